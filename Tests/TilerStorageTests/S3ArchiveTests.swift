import Foundation
import ObjectStorage
import PMTiles
import S3TestSupport
import Testing
import TilerCore
import TilerTestSupport
@testable import TilerStorage

/// Archives in a bucket: the reader over range requests (``S3ArchiveSource``) and the
/// bucket sink (``BucketOutput``), against a real S3-compatible server, with boto3 as
/// the independent client on the other side.
@Suite struct S3ArchiveTests {
    let server: S3TestServer
    let prefix = "storage-\(UUID().uuidString.prefix(8))"

    init() throws { server = try S3TestServer.shared.get() }

    func client(partSize: Int = 5 << 20) -> S3Client {
        S3Client(
            configuration: S3Configuration(
                credentials: S3Credentials(accessKeyID: server.accessKeyID, secretAccessKey: server.secretAccessKey),
                region: server.region, endpoint: server.endpoint, requestTimeout: 20, partSize: partSize))
    }

    /// boto3 uploads an archive tiler wrote locally; tiler's reader over range requests
    /// sees every tile, the thumbnail and the manifest exactly as the local reader does,
    /// leaf directories included (20000² has leaves).
    @Test(arguments: [(3001, 1999), (20000, 20000)])
    func anArchiveUploadedByBoto3IsReadOverRangeRequests(width: Int, height: Int) throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let pyramid = try SyntheticPyramid(width: width, height: height, seed: UInt64(width))
        _ = try pyramid.write(to: ArchiveSink(root: scratch.path, id: pyramid.id, geometry: pyramid.geometry, format: .png))
        let path = "\(scratch.path)/sample.pmtiles"
        try server.python(
            """
            import boto3, sys
            boto3.client("s3").upload_file(sys.argv[1], "tiles", sys.argv[2])
            """, arguments: [path, "\(prefix)/sample.pmtiles"])

        let source = try S3ArchiveSource(client: client(), bucket: "tiles", key: "\(prefix)/sample.pmtiles")
        #expect(source.name == "s3://tiles/\(prefix)/sample.pmtiles")
        #expect(!source.etag.isEmpty)
        let remote = try ArchivedPyramid(reader: ArchiveReader(source: source))
        let local = try ArchivedPyramid.open(path: path)
        #expect(remote.reader.header == local.reader.header)
        #expect(remote.manifestBytes == local.manifestBytes)
        #expect(try remote.thumbnailBytes() == pyramid.thumbnail)
        // Every tile of the small one; every 10th (in every leaf) of the large one, to
        // keep the request count down.
        let stride = pyramid.tiles.count > 2000 ? 10 : 1
        for (i, (tile, expected)) in pyramid.tiles.sorted(by: { $0.key.hashValue < $1.key.hashValue }).enumerated() where i % stride == 0 {
            #expect(try remote.tile(tile) == expected, "tile \(tile)")
        }
    }

    /// A source keeps reading the version it opened: once the object is replaced, its
    /// reads are refused (If-Match), never a mix of two archives; a new source reads the
    /// new one.
    @Test func aReplacedObjectIsRefusedNotMixed() throws {
        let s3 = client()
        try s3.put(bucket: "tiles", key: "\(prefix)/a.pmtiles", body: .bytes(Array(repeating: 1, count: 100)))
        let old = try S3ArchiveSource(client: s3, bucket: "tiles", key: "\(prefix)/a.pmtiles")
        #expect(try old.read(offset: 10, length: 5) == [1, 1, 1, 1, 1])
        try s3.put(bucket: "tiles", key: "\(prefix)/a.pmtiles", body: .bytes(Array(repeating: 2, count: 100)))
        let error = try #require(throws: StorageError.self) { try old.read(offset: 10, length: 5) }
        guard case let .remote(cause) = error else { Issue.record("not a remote error: \(error)"); return }
        #expect(cause.code == "PreconditionFailed")
        #expect(error.description.contains("s3://tiles/\(prefix)/a.pmtiles"))
        #expect(
            try S3ArchiveSource(client: s3, bucket: "tiles", key: "\(prefix)/a.pmtiles").read(offset: 10, length: 5) == [2, 2, 2, 2, 2])
        // Reads past the end are refused before any request.
        #expect(throws: StorageError.self) { try old.read(offset: 99, length: 2) }
        let missing = try #require(throws: StorageError.self) {
            try S3ArchiveSource(client: s3, bucket: "tiles", key: "\(prefix)/none.pmtiles")
        }
        #expect(missing.description == "s3://tiles/\(prefix)/none.pmtiles: no such object")
    }

    /// The bucket sink stages the archive locally, uploads it (in parts here: the part
    /// size is 5 MiB), refuses an existing key without `replace`, replaces it with, and
    /// leaves no staging folder and no open upload either way.
    @Test func theBucketSinkUploadsWholeArchivesOnly() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let staging = "\(scratch.path)/staging"
        let output = BucketOutput(client: client(), location: S3Location(bucket: "tiles", prefix: prefix), staging: staging)
        try output.check()
        // Big enough for several parts: 131k random tiles of up to 300 bytes.
        let pyramid = try SyntheticPyramid(width: 20000, height: 20000, tileSize: 64, seed: 3)
        #expect(try !output.exists(pyramid.id, layout: .archive))
        let sink = try output.makeSink(id: pyramid.id, layout: .archive, geometry: pyramid.geometry, format: .png)
        #expect(sink.destination == "s3://tiles/\(prefix)/sample.pmtiles")
        let bytes = try pyramid.write(to: sink)
        #expect(bytes > 10 << 20, "\(bytes) bytes: too small for a multipart upload")
        #expect(try output.exists(pyramid.id, layout: .archive))
        #expect(Scratch.entries(staging).isEmpty, "staging holds \(Scratch.entries(staging))")

        let seen = try server.python(
            """
            import boto3, sys
            s3 = boto3.client("s3")
            head = s3.head_object(Bucket="tiles", Key=sys.argv[1] + "/sample.pmtiles")
            print(head["ContentLength"], head["ETag"].split("-")[-1].strip('"'))
            print(len(s3.list_multipart_uploads(Bucket="tiles", Prefix=sys.argv[1]).get("Uploads", [])))
            """, arguments: [prefix])
        #expect(seen == "\(bytes) \((bytes + (5 << 20) - 1) / (5 << 20))\n0\n")
        let remote = try ArchivedPyramid(
            reader: ArchiveReader(
                source: S3ArchiveSource(
                    client: client(), bucket: "tiles",
                    key: "\(prefix)/sample.pmtiles")))
        for (tile, expected) in pyramid.tiles.prefix(500) { #expect(try remote.tile(tile) == expected) }

        let again = try output.makeSink(id: pyramid.id, layout: .archive, geometry: pyramid.geometry, format: .png)
        let refused = try #require(throws: StorageError.self) { try pyramid.write(to: again) }
        guard case .exists = refused else { Issue.record("not .exists: \(refused)"); return }
        again.discard()
        let replacement = try SyntheticPyramid(width: 300, height: 200, seed: 9)
        let forced = try output.makeSink(id: replacement.id, layout: .archive, geometry: replacement.geometry, format: .png)
        let small = try replacement.write(to: forced, replace: true)
        #expect(try client().head(bucket: "tiles", key: "\(prefix)/sample.pmtiles")?.size == UInt64(small))
        #expect(Scratch.entries(staging).isEmpty, "staging holds \(Scratch.entries(staging))")
        // A discarded sink uploads nothing.
        let other = try SyntheticPyramid(id: "other", width: 300, height: 200)
        let discarded = try output.makeSink(id: other.id, layout: .archive, geometry: other.geometry, format: .png)
        try other.tiles.forEach { try discarded.writeTile($0.key, $0.value) }
        discarded.discard()
        #expect(try !output.exists(other.id, layout: .archive))
        #expect(Scratch.entries(staging).isEmpty)
        // Folders do not go to buckets.
        #expect(throws: StorageError.self) {
            try output.makeSink(id: other.id, layout: .folder, geometry: other.geometry, format: .png)
        }
    }
}

extension Scratch {
    static func entries(_ path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }
}
