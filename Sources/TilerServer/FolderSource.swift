import TilerCore
import TilerHTTP
import TilerSystem

/// A pyramid folder, `ROOT/ID/`: each tile and the thumbnail is a file, read through
/// `RootedFiles` (no symbolic link below ROOT followed, regular files only, size-bounded).
/// A file in the page cache is read on the event loop; any other goes to the read lane.
/// Each file's validators are its own (`FileInfo.entityTag`, its modification time).
final class FolderSource: PyramidSource {
    let root: String
    let id: PyramidID
    let manifest: PyramidManifest
    /// `stat` of `pyramid.json` when it was read.
    let manifestInfo: FileInfo
    let location: String
    let validators: Validators

    init(root: String, id: PyramidID, manifest: PyramidManifest, manifestInfo: FileInfo) {
        self.root = root
        self.id = id
        self.manifest = manifest
        self.manifestInfo = manifestInfo
        location = "\(root)/\(id)"
        validators = Validators(manifestInfo)
    }

    /// The part's path below ROOT, as components (`[ID, LEVEL, ROW, COLUMN.EXT]`), or nil
    /// for a thumbnail name that is not a plain file name.
    private func components(_ part: PyramidPart) -> [String]? {
        switch part {
        case let .tile(t):
            return [id.rawValue] + manifest.tilePath(t).split(separator: "/").map(String.init)
        case .thumbnail:
            let file = manifest.thumbnail.file
            guard !file.isEmpty, !file.hasPrefix("."), !file.utf8.contains(UInt8(ascii: "/")), !file.utf8.contains(0) else {
                return nil
            }
            return [id.rawValue, file]
        }
    }

    func location(of part: PyramidPart) -> String {
        guard let path = components(part) else { return "\(location): \(part)" }
        return "\(root)/\(path.joined(separator: "/"))"
    }

    /// A tile file opened by `openTile`; the caller closes `descriptor`.
    struct OpenedTile {
        let descriptor: FileDescriptor
        let info: FileInfo
        /// Its path below ROOT.
        let path: [String]
        /// The `fstat` of the folder it was opened in, taken in the same walk; nil if that
        /// failed (the tile is then read, not kept open).
        let folder: FileInfo?
    }

    /// Opens the tile `t`'s file as `read` would (no read yet); nil where `read` finds
    /// nothing, `.damaged` where it finds a file larger than `maximumBytes`.
    func openTile(_ t: TileCoordinate, maximumBytes: Int) throws(SourceError) -> OpenedTile? {
        guard let path = components(.tile(t)) else { return nil }
        switch RootedFiles.open(root: root, path, maximumBytes: maximumBytes, describingFolder: true) {
        case let .file(fd, info, folder): return OpenedTile(descriptor: fd, info: info, path: path, folder: folder)
        case .unavailable: return nil
        case let .tooLarge(info): throw tooLarge(path, info, maximumBytes)
        }
    }

    func readIfReady(_ part: PyramidPart, maximumBytes: Int) throws(SourceError) -> SourceRead {
        guard let path = components(part) else { return .absent }
        switch RootedFiles.readIfCached(root: root, path, maximumBytes: maximumBytes) {
        case let .read(bytes, info): return .read(StoredBytes(bytes: bytes, validators: Validators(info)))
        case .unavailable: return .absent
        case let .tooLarge(info): throw tooLarge(path, info, maximumBytes)
        case .wouldBlock: return .mustWait(.read)
        }
    }

    /// A file larger than any tile (or thumbnail) of this pyramid can be: damage, not a
    /// missing file (as `read` says of it).
    private func tooLarge(_ path: [String], _ info: FileInfo, _ maximumBytes: Int) -> SourceError {
        .damaged("\(root)/\(path.joined(separator: "/")): \(info.size) bytes, more than the \(maximumBytes) allowed")
    }

    func read(_ part: PyramidPart, maximumBytes: Int) throws(SourceError) -> StoredBytes {
        guard let path = components(part) else { throw .absent }
        do {
            let (bytes, info) = try RootedFolder.read(root: root, path, maximumBytes: maximumBytes)
            return StoredBytes(bytes: bytes, validators: Validators(info))
        } catch {
            switch error.kind {
            case .missing: throw .absent
            case .link, .notRegularFile, .changed: throw .refused("\(root)/\(path.joined(separator: "/")): \(error)")
            case .tooLarge, .denied, .other: throw .damaged("\(root)/\(path.joined(separator: "/")): \(error)")
            }
        }
    }
}
