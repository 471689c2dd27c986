import Foundation
import ObjectStorage
import TilerCore
import TilerSystem

/// The pyramids in a ROOT, as `tiler serve` counts them: every folder `ROOT/ID/` that
/// holds a `pyramid.json`, and every archive `ROOT/ID.pmtiles`, with `ID` a pyramid id
/// (hidden names, which cuts and removals use while they work, never are). Links are not
/// followed, as the server follows none. When a folder and an archive share an id, the
/// folder is the pyramid (the server serves the folder) and the archive is noted as
/// shadowed.
public enum PyramidListing {
    /// One pyramid found.
    public struct Entry: Sendable {
        public let id: PyramidID
        public let layout: PyramidLayout
        /// `ROOT/ID`, `ROOT/ID.pmtiles` or `s3://BUCKET/KEY`.
        public let path: String
        /// The pyramid, if its manifest could be read and checked.
        public let pyramid: StoredPyramid?
        /// Why it could not (the server answers 500 for such a pyramid).
        public let error: String?
        /// The archive `ROOT/ID.pmtiles` also exists, and is not served: the folder wins.
        public let shadowsArchive: Bool
        /// Bytes of an archive (known from the directory listing); nil for folders.
        public let archiveBytes: UInt64?
    }

    /// The pyramids in the local folder `root`, sorted by id. Each manifest is read
    /// (for an archive, its first 16 KiB and metadata).
    public static func list(root: String) throws(StorageError) -> [Entry] {
        let (folders, archives) = try scan(root: root)
        var entries: [Entry] = []
        for id in Set(folders.keys).union(archives.keys).sorted() {
            if let folder = folders[id] {  // the folder is served (PyramidLayout.served)
                entries.append(
                    entry(id, .folder, folder, shadows: archives[id] != nil, bytes: nil) {
                        () throws(StorageError) in try StoredPyramid.openFolder(folder)
                    })
            } else if let archive = archives[id] {
                entries.append(
                    entry(id, .archive, archive.path, shadows: false, bytes: archive.size) {
                        () throws(StorageError) in try StoredPyramid.openArchive(archive.path)
                    })
            }
        }
        return entries
    }

    /// How many pyramids `root` holds (folders with a `pyramid.json`, archives; an id
    /// with both counts once), without reading any manifest; nil if `root` cannot be read.
    public static func count(root: String) -> Int? {
        guard let (folders, archives) = try? scan(root: root) else { return nil }
        return Set(folders.keys).union(archives.keys).count
    }

    /// The folders with a `pyramid.json` and the archives in `root`, by id.
    private static func scan(root: String) throws(StorageError)
        -> (folders: [PyramidID: String], archives: [PyramidID: (path: String, size: UInt64)])
    {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: root)
        } catch {
            if let info = try? FileSystem.info(root), !info.isDirectory {
                throw .invalid(path: root, reason: "is not a directory")
            }
            throw .io(path: root, reason: StagedOutput.reason(error))
        }
        var folders: [PyramidID: String] = [:]
        var archives: [PyramidID: (path: String, size: UInt64)] = [:]
        for name in names {
            let path = "\(root)/\(name)"
            guard let info = try? FileSystem.info(path, followingLinks: false) else { continue }
            if info.isDirectory, let id = PyramidLayout.folder.id(named: name) {
                let manifest = try? FileSystem.info("\(path)/\(PyramidManifest.fileName)", followingLinks: false)
                if let manifest, PyramidLayout.isPyramid(manifest) { folders[id] = path }
            } else if PyramidLayout.isPyramid(info), let id = PyramidLayout.archive.id(named: name) {
                archives[id] = (path, UInt64(info.size))
            }
        }
        return (folders, archives)
    }

    /// The archives `PREFIX/ID.pmtiles` in a bucket (one listing, then two range reads
    /// per archive for its header and manifest), sorted by id.
    public static func list(_ location: S3Location, client: S3Client) throws(StorageError) -> [Entry] {
        let objects: [S3Object]
        do {
            objects = try client.listAll(bucket: location.bucket, prefix: location.listPrefix)
        } catch {
            throw .remote(error)
        }
        var found: [(PyramidID, S3Object)] = []
        for object in objects {
            let name = object.key.dropFirst(location.listPrefix.count)
            guard !name.contains("/"), let id = PyramidLayout.archive.id(named: name) else { continue }
            found.append((id, object))
        }
        return found.sorted { $0.0 < $1.0 }.map { id, object in
            let path = location.url(ofKey: object.key)
            return entry(id, .archive, path, shadows: false, bytes: object.size) { () throws(StorageError) in
                let source = S3ArchiveSource(client: client, bucket: location.bucket, object: object)
                return try StoredPyramid.open(archive: ArchivedPyramid(reader: ArchiveReader(source: source)), path: path)
            }
        }
    }

    private static func entry(
        _ id: PyramidID, _ layout: PyramidLayout, _ path: String, shadows: Bool, bytes: UInt64?,
        _ open: () throws(StorageError) -> StoredPyramid
    ) -> Entry {
        do {
            return Entry(
                id: id, layout: layout, path: path, pyramid: try open(), error: nil, shadowsArchive: shadows,
                archiveBytes: bytes)
        } catch {
            return Entry(
                id: id, layout: layout, path: path, pyramid: nil, error: error.description, shadowsArchive: shadows,
                archiveBytes: bytes)
        }
    }
}
