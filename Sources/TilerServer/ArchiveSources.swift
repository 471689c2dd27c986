import ObjectStorage
import TilerCore
import TilerHTTP
import TilerStorage
import TilerSystem

/// What both archive sources share: tiles and the thumbnail found through an
/// `ArchivedPyramid` (header and root directory read at open, leaf directories in the
/// server's `DirectoryCache`), and validators derived from the archive's own, so a
/// replaced archive changes every tag.
protocol ArchiveBackedSource: PyramidSource {
    var archive: ArchivedPyramid { get }
    /// The lane a read that cannot be done at once goes to.
    var lane: BlockingKind { get }
}

extension ArchiveBackedSource {
    /// Where `part` is in the archive, if the directories on the way are cached: never
    /// reads. nil: a leaf directory must be read first.
    func cachedLocation(_ part: PyramidPart) throws(SourceError) -> TileLocation?? {
        switch part {
        case .thumbnail:
            return .some(archive.thumbnail)
        case let .tile(t):
            let lookup: ArchiveReader.Lookup
            do {
                lookup = try archive.cachedLocation(of: t)
            } catch {
                throw Self.sourceError(error)
            }
            switch lookup {
            case let .found(location): return .some(location)
            case .absent: return .some(nil)
            case .needsRead: return nil
            }
        }
    }

    /// The bytes of `part`, checked against `maximumBytes`; may block.
    func bytes(of part: PyramidPart, maximumBytes: Int) throws(SourceError) -> StoredBytes {
        do {
            let spot: TileLocation
            switch part {
            case .thumbnail: spot = archive.thumbnail
            case let .tile(t):
                guard let found = try archive.location(of: t) else { throw SourceError.absent }
                spot = found
            }
            try check(spot, part, maximumBytes: maximumBytes)
            return StoredBytes(bytes: try archive.reader.read(spot), validators: validators(of: spot))
        } catch let error as StorageError {
            throw Self.sourceError(error)
        } catch let error as SourceError {
            throw error
        } catch {
            throw .damaged("\(self.location): \(part): \(error)")
        }
    }

    func check(_ location: TileLocation, _ part: PyramidPart, maximumBytes: Int) throws(SourceError) {
        guard location.length <= maximumBytes else {
            throw .damaged("\(self.location): \(part) claims \(location.length) bytes, more than the \(maximumBytes) it can take")
        }
    }

    /// A part's validators: the archive's, with the part's offset in the file.
    func validators(of location: TileLocation) -> Validators {
        validators.derived(String(location.offset, radix: 16))
    }

    /// What a storage error means for a request: the object replaced or gone (reopen),
    /// storage unavailable (503/504: down, slow, failing, refusing the server's
    /// credentials, or answering what no store should), or a damaged archive (500). A
    /// request to object storage that fails says nothing about the archive's bytes, so it
    /// is never taken for damage: it passes, or lasts until the store (or its credentials)
    /// works again, and the server recovers by itself either way.
    static func sourceError(_ error: StorageError) -> SourceError {
        guard case let .remote(s3) = error else { return .damaged(error.description) }
        if s3.isObjectChanged || s3.code == "NoSuchKey" { return .replaced(s3.description) }
        return .unavailable(StorageHealth.reason(s3), timedOut: s3.kind == .timedOut)
    }
}

/// An archive on the local disk, `ROOT/ID.pmtiles`, read with `pread` on one descriptor
/// that every thread shares. The descriptor keeps the file it opened: an archive replaced
/// by `cut --force` or `pack --force` (a rename) is still read whole from the old inode
/// until the catalog opens the new one as a new generation, so no answer mixes the two.
///
/// Event loops take a tile when its directory is cached and its bytes are in the page
/// cache (`preadv2(RWF_NOWAIT)`, or `mincore` where that is unsupported); anything else
/// (a leaf directory to read, bytes on the disk) goes to the read lane.
final class LocalArchiveSource: ArchiveBackedSource {
    let archive: ArchivedPyramid
    let file: FileArchiveSource
    let location: String
    let validators: Validators
    var lane: BlockingKind { .read }

    init(archive: ArchivedPyramid, file: FileArchiveSource) {
        self.archive = archive
        self.file = file
        location = file.name
        let info = file.info
        let tag =
            "\"a\(String(info.size, radix: 16))-\(String(info.modificationSeconds, radix: 16))."
            + "\(String(info.modificationNanoseconds, radix: 16))-\(String(info.inode, radix: 16))\""
        validators = Validators(etag: tag, lastModified: info.modificationSeconds)
    }

    func readIfReady(_ part: PyramidPart, maximumBytes: Int) throws(SourceError) -> SourceRead {
        guard let found = try cachedLocation(part) else { return .mustWait(.read) }
        guard let location = found else { return .absent }
        try check(location, part, maximumBytes: maximumBytes)
        let bytes: [UInt8]?
        do {
            bytes = try file.readIfCached(offset: location.offset, length: location.length)
        } catch {
            throw Self.sourceError(error)
        }
        guard let bytes else { return .mustWait(.read) }
        return .read(StoredBytes(bytes: bytes, validators: validators(of: location)))
    }

    func read(_ part: PyramidPart, maximumBytes: Int) throws(SourceError) -> StoredBytes {
        try bytes(of: part, maximumBytes: maximumBytes)
    }
}

/// An archive in a bucket, `s3://BUCKET/PREFIX/ID.pmtiles`, read by range requests
/// pinned to the ETag the listing gave (`If-Match`): an object replaced meanwhile is
/// refused (`SourceError.replaced`), never mixed. Every read waits on the network, so
/// each one goes to the storage lane, bounded by the request's `StorageDeadline`; the
/// store's response cache is what answers hot tiles without a request.
final class BucketArchiveSource: ArchiveBackedSource {
    let archive: ArchivedPyramid
    let object: S3Object
    let location: String
    let validators: Validators
    var lane: BlockingKind { .storage }

    init(archive: ArchivedPyramid, object: S3Object, location: String) {
        self.archive = archive
        self.object = object
        self.location = location
        // S3's ETag (an MD5, or MD5-parts) names the version; keep only safe characters.
        let core = object.etag.filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
        validators = Validators(etag: "\"s\(String(object.size, radix: 16))-\(core)\"", lastModified: object.lastModified)
    }

    func readIfReady(_ part: PyramidPart, maximumBytes: Int) throws(SourceError) -> SourceRead {
        if case .some(.none) = try cachedLocation(part) { return .absent }
        return .mustWait(.storage)
    }

    func read(_ part: PyramidPart, maximumBytes: Int) throws(SourceError) -> StoredBytes {
        try bytes(of: part, maximumBytes: maximumBytes)
    }
}
