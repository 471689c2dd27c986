import Foundation
import PMTiles
import TilerCore

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
    public static func pack(
        folder: String, output: (any PyramidOutput)? = nil, replace: Bool,
        isCancelled: () -> Bool = { false }
    ) throws(StorageError) -> Result {
        let started = DispatchTime.now()
        let root = split(folder).root
        let stored = try StoredPyramid.openFolder(folder)
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
                    let path = "\(folder)/\(manifest.tilePath(tile))"
                    let bytes = try readFile(path, limit: tileLimit, missing: "missing tile")
                    guard !bytes.isEmpty else { throw StorageError.invalid(path: path, reason: "empty tile") }
                    try sink.writeTile(tile, bytes)
                    tiles += 1
                }
            }
            let thumbnailPath = "\(folder)/\(manifest.thumbnail.file)"
            guard Self.isPlainName(manifest.thumbnail.file) else {
                throw StorageError.invalid(path: manifestPath, reason: "the thumbnail '\(manifest.thumbnail.file)' is not a file name")
            }
            let thumbnail = try readFile(thumbnailPath, limit: manifest.maximumThumbnailBytes, missing: "missing thumbnail")
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
    /// not read).
    static func readFile(_ path: String, limit: Int, missing: String) throws(StorageError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw errno == ENOENT ? .invalid(path: path, reason: missing) : StorageError.system(path) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw StorageError.system(path) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw .invalid(path: path, reason: "is not a regular file") }
        guard Int(info.st_size) <= limit else {
            throw .invalid(path: path, reason: "has \(info.st_size) bytes, more than such a file can hold (\(limit))")
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        try bytes.withMutableBytes { (buffer) throws(StorageError) in
            try ArchiveWriter.readAll(fd, into: buffer, at: 0, path: path)
        }
        return bytes
    }

    private static func elapsed(since start: DispatchTime) -> Double {
        (Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e6).rounded() / 1000
    }
}
