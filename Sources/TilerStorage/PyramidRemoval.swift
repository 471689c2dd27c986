import Foundation
import TilerCore
import TilerSystem

/// `tiler rm ROOT ID`: removes pyramid `ID` from a local ROOT so that a server reading
/// ROOT never serves half of it.
///
/// A server keeps the pyramids of ROOT in memory (`tiler serve` rescans ROOT every
/// `--rescan-interval`, 1 s by default) and reads a folder pyramid's tiles by path. If
/// the folder vanished at once, a server that still lists the pyramid would answer its
/// cached tiles 200 and the others 404 until its next scan: half an image. So a folder
/// is removed in three steps:
///
/// 1. ``retire()``: `pyramid.json` is renamed to a hidden name inside the folder. The
///    folder is no longer a pyramid (the contract: a folder without `pyramid.json` is
///    never served), so a server's next scan drops it, and a lookup of the id finds
///    nothing; every tile file is still where it was, so until that scan every request
///    is answered as before.
/// 2. The caller waits the grace period (longer than the servers' rescan interval).
/// 3. ``delete()``: the folder is renamed to a hidden, locked name,
///    `ROOT/.ID.partial-PID-rm-XXXXXXXX` (out of view at once), then deleted. If the
///    process dies meanwhile, the next cut of `ID` (folder or archive) removes the
///    leftover, as it removes any unlocked partial.
///
/// An archive `ROOT/ID.pmtiles` is one `unlink` in ``retire()``: a server that has it
/// open keeps reading the same file until its next scan drops it, so it answers every
/// tile or none. When a folder and an archive share the id, both go (the archive first:
/// the folder, which the server serves, keeps being served until it is retired).
///
/// ``restore()`` undoes step 1 (an interrupt during the grace period).
public final class PyramidRemoval {
    /// What is removed.
    public struct Target: Sendable, Codable, Equatable {
        public var layout: String
        public var path: String
    }

    public let root: String
    public let id: PyramidID
    /// The folder and the archive of `id` that exist, in the order they go.
    public let targets: [Target]
    private let folder: String?
    private let archive: String?
    private var retired = false

    /// The hidden name `pyramid.json` has while a folder is being removed. A folder with
    /// it and no `pyramid.json` is one whose removal was interrupted: `tiler rm` finishes
    /// it (with the archive of the id, if any), and so does a `tiler cut --archive
    /// --force` of the id (which keeps its new archive).
    public static let retiredManifestName = ".\(PyramidManifest.fileName).removed"

    /// Finds pyramid `id` in `root`: a folder holding `pyramid.json` (or a retired one),
    /// an archive, or both. Neither is an error; so is a folder that is no pyramid (it is
    /// left alone: it may be something else of the user's).
    ///
    /// `only`: that layout alone (the other is neither looked at nor removed).
    public init(root: String, id: PyramidID, only: PyramidLayout? = nil) throws(StorageError) {
        var root = root
        while root.count > 1, root.hasSuffix("/") { root.removeLast() }
        self.root = root
        self.id = id
        try StorageError.requireFolder(root, notAFolder: "is not a directory")
        let found = { (path: String) in try? FileSystem.info(path, followingLinks: false) }

        let folderPath = PyramidLayout.folder.path(of: id, in: root)
        let archivePath = PyramidLayout.archive.path(of: id, in: root)
        var folder: String?
        if only != .archive, let info = found(folderPath) {
            guard info.isDirectory else {
                throw .invalid(path: folderPath, reason: "is not a pyramid folder (a link or a file); left alone")
            }
            let hasManifest = found("\(folderPath)/\(PyramidManifest.fileName)") != nil
            let wasRetired = found("\(folderPath)/\(Self.retiredManifestName)") != nil
            guard hasManifest || wasRetired else {
                throw .invalid(path: folderPath, reason: "has no \(PyramidManifest.fileName), so it is not a pyramid; left alone")
            }
            folder = folderPath
        }
        var archive: String?
        if only != .folder, let info = found(archivePath) {
            guard info.isRegularFile else {
                throw .invalid(path: archivePath, reason: "is not an archive (not a regular file); left alone")
            }
            archive = archivePath
        }
        guard folder != nil || archive != nil else {
            switch only {
            case .folder: throw .io(path: folderPath, reason: "no such pyramid folder")
            case .archive: throw .io(path: archivePath, reason: "no such archive")
            case nil:
                throw .io(path: folderPath, reason: "no such pyramid (neither a folder nor \(id).\(PyramidLayout.archiveExtension))")
            }
        }
        self.folder = folder
        self.archive = archive
        targets = [archive.map { Target(layout: "archive", path: $0) }, folder.map { Target(layout: "folder", path: $0) }]
            .compactMap { $0 }
    }

    /// Whether a grace period is needed after ``retire()``: only a folder's tiles are
    /// still read by path.
    public var needsGrace: Bool { folder != nil }

    /// Step 1: unlinks the archive, and hides the folder's manifest so that servers drop
    /// the folder at their next scan.
    public func retire() throws(StorageError) {
        if let archive {
            do {
                try FileSystem.unlinkIfPresent(archive)
            } catch {
                throw .system(archive, error)
            }
        }
        if let folder {
            let manifest = "\(folder)/\(PyramidManifest.fileName)"
            let hidden = "\(folder)/\(Self.retiredManifestName)"
            do {
                try FileSystem.rename(manifest, to: hidden)
            } catch  where error.errno != ENOENT {
                throw .system(manifest, error)
            } catch {}
        }
        retired = true
    }

    /// Undoes ``retire()`` for the folder (an archive, once unlinked, is gone).
    public func restore() {
        guard retired, let folder else { return }
        try? FileSystem.rename("\(folder)/\(Self.retiredManifestName)", to: "\(folder)/\(PyramidManifest.fileName)")
        retired = false
    }

    /// Step 3: moves the folder out of view under a hidden, locked name, then deletes it.
    public func delete() throws(StorageError) {
        guard let folder else { return }
        let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".utf8)
        let suffix = String(decoding: (0..<8).map { _ in letters.randomElement()! }, as: UTF8.self)
        let hidden = "\(root)/.\(id.rawValue).partial-\(getpid())-rm-\(suffix)"
        do {
            try FileSystem.rename(folder, to: hidden)
        } catch {
            throw .system(folder, error)
        }
        // Locked while it is deleted, so that a cut of the same id leaves it to us.
        let fd = try? FileDescriptor.open(hidden, O_RDONLY | O_DIRECTORY)
        _ = try? fd?.tryLockExclusive()
        defer { fd?.close() }
        do {
            try FileManager.default.removeItem(atPath: hidden)
        } catch {
            throw .io(path: hidden, reason: "moved out of view, but not deleted: \(StagedOutput.reason(error))")
        }
    }
}
