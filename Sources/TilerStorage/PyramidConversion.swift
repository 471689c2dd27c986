import Foundation
import PMTiles
import TilerCore
import TilerSystem

/// `tiler pack` and `tiler unpack`: a pyramid folder `ROOT/ID/` to an archive
/// `ROOT/ID.pmtiles` and back, tile bytes, thumbnail and `pyramid.json` unchanged. The
/// output is staged and renamed into place like a cut's; the input is only read.
public enum PyramidConversion {
    /// What one conversion did.
    public struct Result: Sendable, Codable, Equatable {
        /// The pyramid id.
        public var id: String
        public var input: String
        public var output: String
        public var tiles: Int
        /// Bytes the output takes (the archive's size, or every file of the folder).
        public var bytes: Int
        public var seconds: Double
    }

    /// Packs the folder `folder` (`ROOT/ID`) into `ROOT/ID.pmtiles`, or into `output`
    /// (another folder's `OUTPUT/ID.pmtiles`, or `s3://BUCKET/PREFIX/ID.pmtiles`, uploaded
    /// whole once complete, as a cut's archive is).
    ///
    /// The folder is read as the server reads it (``FolderFiles``): no symbolic link is
    /// followed (the folder itself, a level or row folder, a tile, the thumbnail or the
    /// manifest), only regular files are read, none larger than the server serves. A
    /// pyramid with a link where a file or folder should be is refused, naming it: it is
    /// not what the server would serve, and packing it would copy whatever the link
    /// points at into the archive.
    public static func pack(
        folder: String, output: (any PyramidOutput)? = nil, replace: Bool,
        isCancelled: () -> Bool = { false }
    ) throws(StorageError) -> Result {
        let started = DispatchTime.now()
        let root = split(folder).root
        let files = try FolderFiles(folder: folder)
        let stored = try StoredPyramid.openFolder(folder) { (_, limit, missing) throws(StorageError) in
            try files.read(PyramidManifest.fileName, limit: limit, missing: missing)
        }
        let (id, manifest, manifestBytes, geometry) = (stored.id, stored.manifest, stored.manifestBytes, stored.geometry)
        let manifestPath = "\(folder)/\(PyramidManifest.fileName)"
        let output = output ?? FolderOutput(root: root)
        let destination = output.destination(of: id, layout: .archive)
        if !replace, try output.exists(id, layout: .archive) { throw .exists(path: destination) }
        let tileLimit = manifest.maximumTileBytes
        let sink = try output.makeSink(id: id, layout: .archive, geometry: geometry, format: manifest.format)
        do throws(StorageError) {
            // In tile-id order, so that the archive's tile data is too (clustered).
            var tiles = 0
            for level in geometry.levels {
                try TileID.forEachTile(zoom: level.level, columns: UInt64(level.columns), rows: UInt64(level.rows)) {
                    (column, row) throws(StorageError) in
                    if tiles % 64 == 0, isCancelled() { throw StorageError.invalid(path: folder, reason: "interrupted; nothing was kept") }
                    let tile = TileCoordinate(level: level.level, row: Int(row), column: Int(column))
                    let bytes = try files.readTile(tile, format: manifest.format, limit: tileLimit)
                    guard !bytes.isEmpty else {
                        throw StorageError.invalid(path: "\(folder)/\(manifest.tilePath(tile))", reason: "empty tile")
                    }
                    try sink.writeTile(tile, bytes)
                    tiles += 1
                }
            }
            let thumbnailPath = "\(folder)/\(manifest.thumbnail.file)"
            guard Self.isPlainName(manifest.thumbnail.file) else {
                throw StorageError.invalid(path: manifestPath, reason: "the thumbnail '\(manifest.thumbnail.file)' is not a file name")
            }
            let thumbnail = try files.read(
                manifest.thumbnail.file, limit: manifest.maximumThumbnailBytes, missing: "missing thumbnail")
            guard !thumbnail.isEmpty else { throw StorageError.invalid(path: thumbnailPath, reason: "empty thumbnail") }
            try thumbnail.withBytes { (raw) throws(StorageError) in try sink.writeThumbnail(named: manifest.thumbnail.file, raw) }
            let bytes = try sink.commit(manifest: manifestBytes, replace: replace)
            return Result(
                id: id.rawValue, input: folder, output: destination, tiles: tiles, bytes: bytes,
                seconds: elapsed(since: started))
        } catch {
            sink.discard()
            throw error
        }
    }

    /// Unpacks the archive `archive` (`ROOT/ID.pmtiles`) into the folder `ROOT/ID`.
    public static func unpack(
        archive: String, replace: Bool,
        isCancelled: () -> Bool = { false }
    ) throws(StorageError) -> Result {
        let started = DispatchTime.now()
        let (root, file) = split(archive)
        let suffix = ".\(PyramidLayout.archiveExtension)"
        guard file.hasSuffix(suffix), let id = PyramidID(String(file.dropLast(suffix.count))) else {
            throw .invalid(path: archive, reason: "an archive is named ID\(suffix), with ID a pyramid id")
        }
        let pyramid = try ArchivedPyramid.open(path: archive)
        guard pyramid.manifest.id == id else {
            throw .invalid(path: archive, reason: "the archive's manifest is for '\(pyramid.manifest.id)', not '\(id)'")
        }
        guard isPlainName(pyramid.manifest.thumbnail.file), pyramid.manifest.thumbnail.file != PyramidManifest.fileName else {
            throw .invalid(path: archive, reason: "the thumbnail '\(pyramid.manifest.thumbnail.file)' is not a file name")
        }
        let destination = PyramidLayout.folder.path(of: id, in: root)
        if !replace, FileManager.default.fileExists(atPath: destination) { throw .exists(path: destination) }
        let geometry = pyramid.geometry
        let sink = try FolderSink(root: root, id: id, format: pyramid.manifest.format)
        do throws(StorageError) {
            for level in geometry.levels {
                for row in 0..<level.rows { try sink.prepareRow(level: level.level, row: row) }
            }
            // Entries in tile-id order: the archive is read front to back.
            var tiles = 0
            let expected = geometry.levels.reduce(0) { $0 + $1.tileCount }
            try pyramid.reader.forEachTileEntry { (entry) throws(StorageError) in
                if isCancelled() { throw StorageError.invalid(path: archive, reason: "interrupted; nothing was kept") }
                let location = pyramid.reader.location(of: entry)
                guard location.length <= pyramid.maximumTileBytes else {
                    throw .archive(path: archive, .corrupt("tile id \(entry.tileID) claims \(location.length) bytes"))
                }
                let bytes = try pyramid.reader.read(location)
                for id in entry.tileID..<(entry.tileID + UInt64(entry.runLength)) {
                    guard let t = TileID.tile(id), t.zoom <= geometry.maxLevel else {
                        throw .archive(path: archive, .corrupt("tile id \(id) is past level \(geometry.maxLevel)"))
                    }
                    let tile = TileCoordinate(level: t.zoom, row: Int(t.y), column: Int(t.x))
                    guard geometry.contains(tile) else {
                        throw .archive(path: archive, .corrupt("tile \(tile) lies outside the \(geometry.width)×\(geometry.height) image"))
                    }
                    try sink.writeTile(tile, bytes)
                    tiles += 1
                }
            }
            guard tiles == expected else {
                throw StorageError.archive(path: archive, .corrupt("it holds \(tiles) of the pyramid's \(expected) tiles"))
            }
            let thumbnail = try pyramid.thumbnailBytes()
            try thumbnail.withBytes { (raw) throws(StorageError) in
                try sink.writeThumbnail(named: pyramid.manifest.thumbnail.file, raw)
            }
            let bytes = try sink.commit(manifest: pyramid.manifestBytes + [0x0A], replace: replace)
            return Result(
                id: id.rawValue, input: archive, output: destination, tiles: tiles, bytes: bytes,
                seconds: elapsed(since: started))
        } catch {
            sink.discard()
            throw error
        }
    }

    /// `ROOT` and the last component of `path` (trailing slashes ignored; ROOT is `.`
    /// for a bare name).
    static func split(_ path: String) -> (root: String, name: String) {
        var p = path
        while p.count > 1, p.hasSuffix("/") { p.removeLast() }
        guard let slash = p.lastIndex(of: "/") else { return (".", p) }
        let root = String(p[..<slash])
        return (root.isEmpty ? "/" : root, String(p[p.index(after: slash)...]))
    }

    static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.hasPrefix(".") && !name.utf8.contains(UInt8(ascii: "/"))
            && !name.utf8.contains(0)
    }

    /// A regular file's bytes, at most `limit` of them (a longer file is an error, and is
    /// not read). The file itself may not be a symbolic link (the server follows none).
    static func readFile(_ path: String, limit: Int, missing: String) throws(StorageError) -> [UInt8] {
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW)
        } catch {
            throw refusal(path, missing: missing, error)
        }
        return try read(fd, path: path, limit: limit)
    }

    /// Why opening `path` failed: missing, a link, or the system's reason. (A link opened
    /// as a folder with `O_NOFOLLOW` fails with `ENOTDIR`, as a file does: `lstat` tells
    /// them apart, for the message only.)
    static func refusal(_ path: String, missing: String, _ error: SystemCallError) -> StorageError {
        switch error.errno {
        case ENOENT:
            return .invalid(path: path, reason: missing)
        case ELOOP:
            return .invalid(path: path, reason: "is a symbolic link, which the server never follows; not read")
        case ENOTDIR where (try? FileSystem.info(path, followingLinks: false))??.isSymbolicLink == true:
            return .invalid(path: path, reason: "is a symbolic link, which the server never follows; not read")
        case ENOTDIR:
            return .invalid(path: path, reason: "is not a folder (a file where a folder should be)")
        default:
            return .system(path, error)
        }
    }

    /// The bytes of the open file `fd` (`path`, for messages): a regular file of at most
    /// `limit` bytes. Closes `fd`.
    static func read(_ fd: FileDescriptor, path: String, limit: Int) throws(StorageError) -> [UInt8] {
        defer { fd.close() }
        let info: FileInfo
        do {
            info = try fd.info()
        } catch {
            throw .system(path, error)
        }
        guard info.isRegularFile else { throw .invalid(path: path, reason: "is not a regular file") }
        guard info.size <= limit else {
            throw .invalid(path: path, reason: "has \(info.size) bytes, more than such a file can hold (\(limit))")
        }
        var bytes = [UInt8](repeating: 0, count: info.size)
        try bytes.withMutableBytes { (buffer) throws(StorageError) in
            try ArchiveWriter.readAll(fd, into: buffer, at: 0, path: path)
        }
        return bytes
    }

    private static func elapsed(since start: DispatchTime) -> Double {
        (Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e6).rounded() / 1000
    }
}

/// A pyramid folder's files read as the server reads them: every path walked one
/// component at a time from the folder with `openat(O_NOFOLLOW)`, so that no symbolic
/// link is followed (the folder itself, a level or row folder, or a file); only regular
/// files are read, each at most a given size. `tiler pack` reads through it, so that a
/// tile replaced by a link to another file is refused rather than packed.
final class FolderFiles {
    let folder: String
    private let descriptor: FileDescriptor
    /// Open level folders, by level.
    private var levels: [Int: FileDescriptor] = [:]
    /// Open row folders of `rowsLevel` (tiles are read in tile-id order, which visits
    /// the rows of a level back and forth): at most `maximumOpenRows` at a time.
    private var rows: [Int: FileDescriptor] = [:]
    private var rowsLevel = -1
    static let maximumOpenRows = 256

    init(folder: String) throws(StorageError) {
        self.folder = folder
        do {
            descriptor = try FileDescriptor.open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        } catch {
            throw PyramidConversion.refusal(folder, missing: "no such folder", error)
        }
    }

    deinit {
        closeRows()
        for fd in levels.values { fd.close() }
        descriptor.close()
    }

    /// The file `name` directly in the folder.
    func read(_ name: String, limit: Int, missing: String) throws(StorageError) -> [UInt8] {
        try read(name, in: descriptor, path: "\(folder)/\(name)", limit: limit, missing: missing)
    }

    /// The tile's file, `LEVEL/ROW/COLUMN.EXT`.
    func readTile(_ tile: TileCoordinate, format: TileFormat, limit: Int) throws(StorageError) -> [UInt8] {
        let row = try rowFolder(level: tile.level, row: tile.row)
        let name = "\(tile.column).\(format.fileExtension)"
        return try read(name, in: row, path: "\(folder)/\(tile.level)/\(tile.row)/\(name)", limit: limit, missing: "missing tile")
    }

    private func read(_ name: String, in directory: FileDescriptor, path: String, limit: Int, missing: String)
        throws(StorageError) -> [UInt8]
    {
        let fd: FileDescriptor
        do {
            fd = try directory.open(at: name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        } catch {
            throw PyramidConversion.refusal(path, missing: missing, error)
        }
        return try PyramidConversion.read(fd, path: path, limit: limit)
    }

    private func rowFolder(level: Int, row: Int) throws(StorageError) -> FileDescriptor {
        if level != rowsLevel {
            closeRows()
            rowsLevel = level
        }
        if let fd = rows[row] { return fd }
        let levelFD: FileDescriptor
        if let fd = levels[level] {
            levelFD = fd
        } else {
            levelFD = try openFolder("\(level)", in: descriptor, path: "\(folder)/\(level)")
            levels[level] = levelFD
        }
        if rows.count >= Self.maximumOpenRows { closeRows() }
        let fd = try openFolder("\(row)", in: levelFD, path: "\(folder)/\(level)/\(row)")
        rows[row] = fd
        return fd
    }

    private func openFolder(_ name: String, in directory: FileDescriptor, path: String) throws(StorageError) -> FileDescriptor {
        do {
            return try directory.open(at: name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        } catch {
            throw PyramidConversion.refusal(path, missing: "missing folder (its tiles are missing)", error)
        }
    }

    private func closeRows() {
        for fd in rows.values { fd.close() }
        rows.removeAll(keepingCapacity: true)
    }
}
