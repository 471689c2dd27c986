import Foundation
import ObjectStorage
import PMTiles
import TilerCore
import TilerSystem

extension PyramidManifest {
    /// A stored manifest's bytes decoded, with its geometry rebuilt and checked against
    /// the limits (`geometry()`): what every reader of a folder's or an archive's
    /// `pyramid.json` needs before it trusts a field.
    public static func decodedWithGeometry(_ bytes: [UInt8]) throws -> (manifest: PyramidManifest, geometry: PyramidGeometry) {
        let manifest = try JSONDecoder().decode(PyramidManifest.self, from: Data(bytes))
        return (manifest, try manifest.geometry())
    }
}

/// One pyramid as it is stored: a folder `ROOT/ID/` or an archive `ROOT/ID.pmtiles`
/// (local, or `s3://BUCKET/PREFIX/ID.pmtiles`), with its manifest read and checked. What
/// `tiler info`, `verify` and `ls` look at.
public struct StoredPyramid: Sendable {
    public let id: PyramidID
    public let layout: PyramidLayout
    /// `ROOT/ID`, `ROOT/ID.pmtiles` or `s3://BUCKET/KEY`.
    public let path: String
    public let manifest: PyramidManifest
    /// `pyramid.json`'s bytes (for an archive, the object stored under `"tiler"`).
    public let manifestBytes: [UInt8]
    public let geometry: PyramidGeometry
    /// The archive, for `layout == .archive`.
    public let archive: ArchivedPyramid?

    /// The largest `pyramid.json` read (the server's limit too).
    public static let maximumManifestBytes = 16 << 20

    /// Opens what `path` names: `ROOT/ID` (the folder; or, when there is no such folder,
    /// `ROOT/ID.pmtiles`), `ROOT/ID.pmtiles`, or `s3://BUCKET/PREFIX/ID.pmtiles` read
    /// through `client` (which an `s3://` path needs).
    public static func open(_ path: String, client: S3Client? = nil) throws(StorageError) -> StoredPyramid {
        if S3Location.isS3(path) {
            let location: S3Location
            do { location = try S3Location(parsing: path) } catch { throw .remote(error) }
            guard location.prefix.hasSuffix(".\(PyramidLayout.archiveExtension)") else {
                throw .invalid(
                    path: path, reason: "a pyramid in a bucket is an archive, s3://BUCKET/PREFIX/ID.\(PyramidLayout.archiveExtension)")
            }
            guard let client else {
                throw .invalid(path: path, reason: "no S3 client for this path")
            }
            let source = try S3ArchiveSource(client: client, bucket: location.bucket, key: location.prefix)
            return try open(archive: ArchivedPyramid(reader: ArchiveReader(source: source)), path: path)
        }
        var trimmed = path
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed.removeLast() }
        let suffix = ".\(PyramidLayout.archiveExtension)"
        if trimmed.hasSuffix(suffix) {
            return try openArchive(trimmed)
        }
        let lookup = { (path: String) in Result { () throws(SystemCallError) in try FileSystem.info(path, followingLinks: false) } }
        if case .success(nil) = lookup(trimmed) {
            // ROOT/ID names the archive when there is no folder.
            if case .success(.some) = lookup(trimmed + suffix) { return try openArchive(trimmed + suffix) }
            throw .io(path: trimmed, reason: "no such pyramid (neither a folder nor \(PyramidConversion.split(trimmed).name)\(suffix))")
        }
        return try openFolder(trimmed)
    }

    /// Opens the folder `ROOT/ID` and reads its `pyramid.json`.
    public static func openFolder(_ folder: String) throws(StorageError) -> StoredPyramid {
        try openFolder(folder) { (path, limit, missing) throws(StorageError) in
            try PyramidConversion.readFile(path, limit: limit, missing: missing)
        }
    }

    /// The same, with `pyramid.json` read by `read(path, limit, missing)` (`tiler pack`
    /// reads it through the descriptor of the folder it packs).
    static func openFolder(
        _ folder: String, read: (String, Int, String) throws(StorageError) -> [UInt8]
    ) throws(StorageError) -> StoredPyramid {
        let name = PyramidConversion.split(folder).name
        guard let id = PyramidID(name) else {
            throw .invalid(path: folder, reason: "'\(name)' is not a pyramid id, so not a pyramid folder")
        }
        try StorageError.requireFolder(folder, notAFolder: "is not a folder")
        let manifestPath = "\(folder)/\(PyramidManifest.fileName)"
        let bytes = try read(manifestPath, maximumManifestBytes, "no \(PyramidManifest.fileName): not a finished pyramid")
        let decoded: (manifest: PyramidManifest, geometry: PyramidGeometry)
        do {
            decoded = try PyramidManifest.decodedWithGeometry(bytes)
        } catch {
            throw .invalid(path: manifestPath, reason: "unreadable manifest: \(ArchivedPyramid.reason(error))")
        }
        let (manifest, geometry) = decoded
        guard manifest.id == id else {
            throw .invalid(path: manifestPath, reason: "the manifest is for '\(manifest.id)', not '\(id)'")
        }
        return StoredPyramid(
            id: id, layout: .folder, path: folder, manifest: manifest, manifestBytes: bytes,
            geometry: geometry, archive: nil)
    }

    /// Opens the local archive `ROOT/ID.pmtiles`.
    public static func openArchive(_ file: String) throws(StorageError) -> StoredPyramid {
        try open(archive: ArchivedPyramid.open(path: file), path: file)
    }

    /// The pyramid in an opened archive named `path` (`…/ID.pmtiles`).
    public static func open(archive pyramid: ArchivedPyramid, path: String) throws(StorageError) -> StoredPyramid {
        let file = PyramidConversion.split(path).name
        let suffix = ".\(PyramidLayout.archiveExtension)"
        guard file.hasSuffix(suffix), let id = PyramidID(String(file.dropLast(suffix.count))) else {
            throw .invalid(path: path, reason: "an archive is named ID\(suffix), with ID a pyramid id")
        }
        guard pyramid.manifest.id == id else {
            throw .invalid(path: path, reason: "the archive's manifest is for '\(pyramid.manifest.id)', not '\(id)'")
        }
        return StoredPyramid(
            id: id, layout: .archive, path: path, manifest: pyramid.manifest,
            manifestBytes: pyramid.manifestBytes, geometry: pyramid.geometry, archive: pyramid)
    }

    /// The tiles the geometry has, over every level.
    public var expectedTiles: Int { geometry.levels.reduce(0) { $0 + $1.tileCount } }

    /// What a pyramid holds, counted without decoding anything.
    public struct Totals: Sendable, Codable, Equatable {
        /// Levels, `maxLevel + 1`.
        public var levels: Int
        /// Tiles the geometry has.
        public var expectedTiles: Int
        /// Tiles present (a folder: tile files; an archive: tiles its directories address).
        public var tiles: Int
        /// Distinct tile contents an archive stores (identical tiles are stored once); nil
        /// for a folder.
        public var distinctTiles: Int?
        /// Every byte the pyramid takes: the archive's size, or the folder's tile files,
        /// thumbnail and manifest.
        public var bytes: Int
        /// The tiles' bytes (in a folder, the sum of the tile files; in an archive, its
        /// tile data section less the thumbnail).
        public var tileBytes: Int
    }

    /// Counts tiles and bytes: for a folder, one `stat` per tile file (a missing tile is
    /// not counted); for an archive, the header's counts and the file's size.
    public func totals() throws(StorageError) -> Totals {
        let levels = geometry.maxLevel + 1
        if let archive {
            let header = archive.reader.header
            let size = Int(clamping: archive.reader.source.size)
            return Totals(
                levels: levels, expectedTiles: expectedTiles, tiles: Int(clamping: header.addressedTiles),
                distinctTiles: Int(clamping: header.tileContents), bytes: size,
                tileBytes: Int(clamping: header.tileDataLength) - archive.thumbnail.length)
        }
        var tiles = 0
        var tileBytes = 0
        let ext = manifest.format.fileExtension
        for level in geometry.levels {
            for row in 0..<level.rows {
                let rowPath = "\(path)/\(level.level)/\(row)"
                guard let fd = try? FileDescriptor.open(rowPath, O_RDONLY | O_DIRECTORY | O_NOFOLLOW) else { continue }
                defer { fd.close() }
                for column in 0..<level.columns {
                    guard let info = try? fd.info(at: "\(column).\(ext)"), info.isRegularFile else { continue }
                    tiles += 1
                    tileBytes += info.size
                }
            }
        }
        var other = manifestBytes.count
        if PyramidConversion.isPlainName(manifest.thumbnail.file),
            let info = try? FileSystem.info("\(path)/\(manifest.thumbnail.file)", followingLinks: false)
        {
            other += info.size
        }
        return Totals(
            levels: levels, expectedTiles: expectedTiles, tiles: tiles, distinctTiles: nil,
            bytes: tileBytes + other, tileBytes: tileBytes)
    }
}
