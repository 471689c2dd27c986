import Foundation
import ObjectStorage
import TilerCore
import Synchronization
import TilerSystem

/// Where a cut puts its pyramids: a folder ROOT (``FolderOutput``) or a bucket prefix
/// `s3://BUCKET/PREFIX` (``BucketOutput``, archives only).
public protocol PyramidOutput: Sendable {
    /// Where pyramid `id` appears: `ROOT/ID`, `ROOT/ID.pmtiles` or
    /// `s3://BUCKET/PREFIX/ID.pmtiles`.
    func destination(of id: PyramidID, layout: PyramidLayout) -> String
    /// Whether a pyramid `id` is there already (checked before a cut starts, so that a
    /// cut without `--force` fails before the work; the sink checks again at the end).
    func exists(_ id: PyramidID, layout: PyramidLayout) throws(StorageError) -> Bool
    /// The pyramid `id` that a cut in `layout` would replace, as its path: the same id in
    /// that layout, or a pyramid of that id in the other layout (which would shadow the
    /// new one, or be shadowed by it: a folder wins over an archive). Nil when there is
    /// none.
    func existing(_ id: PyramidID, layout: PyramidLayout) throws(StorageError) -> String?
    /// Called once pyramid `id` was committed in `layout` replacing what was there
    /// (`--force`): the same id in the other layout must not outlive the replacement.
    /// Returns the folder it retired, if any, to be deleted after a grace period (see
    /// ``PyramidRemoval``); an archive is unlinked at once.
    func removeOtherLayout(of id: PyramidID, keeping layout: PyramidLayout) throws(StorageError) -> RetiredFolder?
    /// A new sink for pyramid `id`.
    func makeSink(
        id: PyramidID, layout: PyramidLayout, geometry: PyramidGeometry,
        format: TileFormat
    ) throws(StorageError) -> any PyramidSink
}

/// A folder pyramid retired (its `pyramid.json` hidden, so servers drop it at their next
/// scan) because the same id was cut again as an archive with `--force`: deleted after
/// the grace period that lets every server's scan pass, as `tiler rm` does.
public struct RetiredFolder: Sendable, Equatable {
    public let root: String
    public let id: PyramidID
    /// The folder's device and inode when it was retired.
    let identity: FileIdentity
    public var path: String { PyramidLayout.folder.path(of: id, in: root) }

    /// Moves the folder out of view and deletes it, if it is still the folder that was
    /// retired and still retired: a cut of the id meanwhile (a new folder swapped in, or
    /// its manifest put back) is left alone. Returns whether it was deleted.
    @discardableResult
    public func delete() throws(StorageError) -> Bool {
        guard FileIdentity(path) == identity, !FileManager.default.fileExists(atPath: "\(path)/\(PyramidManifest.fileName)")
        else { return false }
        try PyramidRemoval(root: root, id: id, only: .folder).delete()
        return true
    }
}

/// A file's device and inode (`lstat`), to tell whether a path still names it.
struct FileIdentity: Sendable, Equatable {
    let device: UInt64
    let inode: UInt64

    init?(_ path: String) {
        guard let info = try? FileSystem.info(path, followingLinks: false) else { return nil }
        device = info.device
        inode = info.inode
    }
}

/// Pyramids in a local folder: `ROOT/ID/` or `ROOT/ID.pmtiles`.
public struct FolderOutput: PyramidOutput {
    public let root: String

    public init(root: String) { self.root = root }

    public func destination(of id: PyramidID, layout: PyramidLayout) -> String { layout.path(of: id, in: root) }

    public func exists(_ id: PyramidID, layout: PyramidLayout) -> Bool {
        FileManager.default.fileExists(atPath: destination(of: id, layout: layout))
    }

    /// Anything at the layout's own path, or a pyramid in the other layout (a folder
    /// there that holds no pyramid is not one, and is left alone).
    public func existing(_ id: PyramidID, layout: PyramidLayout) -> String? {
        if exists(id, layout: layout) { return destination(of: id, layout: layout) }
        guard let removal = try? PyramidRemoval(root: root, id: id, only: layout.other) else { return nil }
        return removal.targets.first?.path
    }

    public func removeOtherLayout(of id: PyramidID, keeping layout: PyramidLayout) throws(StorageError) -> RetiredFolder? {
        let removal: PyramidRemoval
        do {
            removal = try PyramidRemoval(root: root, id: id, only: layout.other)
        } catch .io {
            return nil  // none there
        } catch .invalid {
            return nil  // not a pyramid (a folder without pyramid.json, a link): left alone
        }
        try removal.retire()
        guard removal.needsGrace else { return nil }
        guard let identity = FileIdentity(PyramidLayout.folder.path(of: id, in: root)) else { return nil }
        return RetiredFolder(root: root, id: id, identity: identity)
    }

    public func makeSink(
        id: PyramidID, layout: PyramidLayout, geometry: PyramidGeometry,
        format: TileFormat
    ) throws(StorageError) -> any PyramidSink {
        try layout.makeSink(root: root, id: id, geometry: geometry, format: format)
    }
}

/// Archives in a bucket, `s3://BUCKET/PREFIX/ID.pmtiles`. Each archive is written to a
/// local staging folder first, exactly as a local archive is, then uploaded (one PUT, or
/// a multipart upload when larger than the part size), so that it becomes visible under
/// its key only when complete: S3 makes an object appear whole or not at all.
public struct BucketOutput: PyramidOutput {
    public let client: S3Client
    public let location: S3Location
    /// The local folder archives are staged in before upload (`TILER_S3_STAGING`, else
    /// the temporary folder). It needs about twice the largest archive free.
    public let staging: String
    /// Polled during the upload: true stops it, and the multipart upload is aborted.
    public let isCancelled: @Sendable () -> Bool

    public init(
        client: S3Client, location: S3Location, staging: String,
        isCancelled: @escaping @Sendable () -> Bool = { false }
    ) {
        self.client = client
        self.location = location
        self.staging = staging
        self.isCancelled = isCancelled
    }

    /// `s3://BUCKET/PREFIX/ID.pmtiles`.
    public func destination(of id: PyramidID, layout: PyramidLayout) -> String {
        location.url(ofKey: key(of: id))
    }

    public func key(of id: PyramidID) -> String {
        location.key("\(id.rawValue).\(PyramidLayout.archiveExtension)")
    }

    public func exists(_ id: PyramidID, layout: PyramidLayout) throws(StorageError) -> Bool {
        do {
            return try client.head(bucket: location.bucket, key: key(of: id)) != nil
        } catch {
            throw .remote(error)
        }
    }

    /// The archive's key, if it exists: a bucket holds archives only.
    public func existing(_ id: PyramidID, layout: PyramidLayout) throws(StorageError) -> String? {
        try exists(id, layout: layout) ? destination(of: id, layout: layout) : nil
    }

    /// A bucket holds no other layout.
    public func removeOtherLayout(of id: PyramidID, keeping layout: PyramidLayout) -> RetiredFolder? { nil }

    /// Lists one key under the prefix: a missing bucket, refused credentials or
    /// unreachable storage are reported before any cutting.
    public func check() throws(StorageError) {
        do {
            _ = try client.list(bucket: location.bucket, prefix: location.listPrefix, maxKeys: 1)
        } catch {
            throw .remote(error)
        }
    }

    public func makeSink(
        id: PyramidID, layout: PyramidLayout, geometry: PyramidGeometry,
        format: TileFormat
    ) throws(StorageError) -> any PyramidSink {
        guard layout == .archive else {
            throw .invalid(path: location.description, reason: "a bucket holds archives only (ID.pmtiles): use --archive")
        }
        return try BucketArchiveSink(output: self, id: id, geometry: geometry, format: format)
    }
}

/// Writes `ROOT/ID.pmtiles` into a private staging folder through an ``ArchiveSink``,
/// and at commit uploads it as `PREFIX/ID.pmtiles`. Without `replace`, an existing key
/// is left alone: a HEAD first, then the upload itself is conditional
/// (`If-None-Match: *`, which S3 and moto honour). A multipart upload under way is
/// registered with ``UnfinishedOutput``, so that a signal aborts it; a failed or
/// cancelled upload is aborted by the client. The staging folder goes either way.
final class BucketArchiveSink: PyramidSink, Sendable {
    private let output: BucketOutput
    private let key: String
    private let folder: String
    private let folderToken: Int
    private let archive: ArchiveSink
    /// The staging folder is gone (committed, discarded or deinitialised).
    private let removed = Atomic<Bool>(false)

    var destination: String { output.location.url(ofKey: key) }

    init(output: BucketOutput, id: PyramidID, geometry: PyramidGeometry, format: TileFormat) throws(StorageError) {
        self.output = output
        key = output.key(of: id)
        do {
            try FileManager.default.createDirectory(atPath: output.staging, withIntermediateDirectories: true)
        } catch {
            throw .io(path: output.staging, reason: StagedOutput.reason(error))
        }
        let made: Result<(String, Int), StorageError> = UnfinishedOutput.shared.withLock { register in
            do throws(SystemCallError) {
                let folder = try FileSystem.makeTemporaryDirectory(prefix: "\(output.staging)/.tiler-upload-\(id.rawValue)-")
                return .success((folder, register(folder)))
            } catch {
                return .failure(.system(output.staging, error, "cannot create a staging folder"))
            }
        }
        (folder, folderToken) = try made.get()
        // mkdtemp makes the folder 0700: the staged archive is read back only by us.
        do {
            archive = try ArchiveSink(root: folder, id: id, geometry: geometry, format: format)
        } catch {
            try? FileManager.default.removeItem(atPath: folder)
            UnfinishedOutput.shared.unregister(folderToken)
            throw error
        }
    }

    deinit { removeFolder() }

    func prepareRow(level: Int, row: Int) throws(StorageError) {}

    func writeTile(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        try archive.writeTile(tile, bytes)
    }

    func writeThumbnail(named name: String, _ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        try archive.writeThumbnail(named: name, bytes)
    }

    func commit(manifest: [UInt8], replace: Bool) throws(StorageError) -> Int {
        defer { removeFolder() }
        let bytes = try archive.commit(manifest: manifest, replace: true)
        let client = output.client
        let bucket = output.location.bucket
        let key = key
        if !replace {
            let existing: S3ObjectInfo?
            do {
                existing = try client.head(bucket: bucket, key: key)
            } catch {
                throw .remote(error)
            }
            if existing != nil { throw .exists(path: destination) }
        }
        let path = archive.destination
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(path, O_RDONLY)
        } catch {
            throw .system(path, error)
        }
        defer { fd.close() }
        var abortToken: Int?
        do {
            try client.upload(
                file: fd, size: UInt64(bytes), bucket: bucket, key: key, ifNoneMatch: !replace,
                isCancelled: output.isCancelled,
                uploadStarted: { uploadID in
                    abortToken = UnfinishedOutput.shared.registerCleanup {
                        try? client.abortMultipartUpload(bucket: bucket, key: key, uploadID: uploadID)
                    }
                },
                uploadEnded: { if let abortToken { UnfinishedOutput.shared.unregister(abortToken) } })
        } catch  where error.code == "PreconditionFailed" {
            throw .exists(path: destination)
        } catch {
            throw .remote(error)
        }
        return bytes
    }

    func discard() {
        archive.discard()
        removeFolder()
    }

    private func removeFolder() {
        guard !removed.exchange(true, ordering: .sequentiallyConsistent) else { return }
        try? FileManager.default.removeItem(atPath: folder)
        UnfinishedOutput.shared.unregister(folderToken)
    }
}
