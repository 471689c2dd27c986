import ObjectStorage

/// An archive in a bucket, read with HTTP range requests, so that ``ArchiveReader``
/// works over object storage unchanged. The object's size and ETag are taken once (a
/// HEAD, or the listing that found it); every read carries `If-Match: ETAG`, so an
/// object replaced after the source was opened is refused (`412 PreconditionFailed`,
/// a ``StorageError/remote(_:)``) instead of mixing bytes of two versions. Open a new
/// source to read the new object.
public final class S3ArchiveSource: ArchiveSource {
    public let client: S3Client
    public let bucket: String
    public let key: String
    public let name: String
    public let size: UInt64
    /// The ETag of the version this source reads.
    public let etag: String
    /// Seconds for one read (each retry too); nil for the client's own bound.
    public let timeout: Double?

    /// Opens `s3://bucket/key` with a HEAD request.
    public convenience init(client: S3Client, bucket: String, key: String, timeout: Double? = nil) throws(StorageError) {
        let name = "s3://\(bucket)/\(key)"
        let info: S3ObjectInfo?
        do {
            info = try client.head(bucket: bucket, key: key)
        } catch {
            throw .remote(error)
        }
        guard let info else { throw .io(path: name, reason: "no such object") }
        self.init(client: client, bucket: bucket, object: S3Object(key: key, size: info.size, etag: info.etag), timeout: timeout)
    }

    /// A source for an object a listing returned (its size and ETag), without a request.
    public init(client: S3Client, bucket: String, object: S3Object, timeout: Double? = nil) {
        self.client = client
        self.bucket = bucket
        key = object.key
        name = "s3://\(bucket)/\(object.key)"
        size = object.size
        etag = object.etag
        self.timeout = timeout
    }

    public func read(offset: UInt64, length: Int) throws(StorageError) -> [UInt8] {
        guard length >= 0, offset <= size, UInt64(length) <= size - offset else {
            throw .io(path: name, reason: "bytes \(offset)..<\(offset &+ UInt64(max(0, length))) are past the end (\(size) bytes)")
        }
        do {
            return try client.get(
                bucket: bucket, key: key, offset: offset, length: length,
                ifMatch: etag.isEmpty ? nil : etag, timeout: timeout)
        } catch {
            throw .remote(error)
        }
    }
}
