import Foundation
import PMTiles
import TilerCore

/// A pyramid read from its archive, `ROOT/ID.pmtiles`: the manifest from the metadata,
/// checked against the header, and tile lookups by pyramid coordinate. What `unpack`
/// reads, and what the server serves archives from.
public struct ArchivedPyramid: Sendable {
    public let reader: ArchiveReader
    public let manifest: PyramidManifest
    /// `pyramid.json`'s bytes as stored under `"tiler"` (no trailing newline).
    public let manifestBytes: [UInt8]
    public let geometry: PyramidGeometry
    /// The thumbnail's bytes in the file.
    public let thumbnail: TileLocation
    /// The largest tile this pyramid can hold (`PyramidManifest.maximumTileBytes`, as
    /// for a folder). A directory entry longer than this is corruption, and no read is
    /// made for it.
    public let maximumTileBytes: Int

    /// Opens the archive at `path`.
    public static func open(
        path: String, limits: ArchiveReader.Limits = .init(),
        cache: DirectoryCache? = nil
    ) throws(StorageError) -> ArchivedPyramid {
        try ArchivedPyramid(reader: ArchiveReader(source: FileArchiveSource(path: path), limits: limits, cache: cache))
    }

    /// Checks that `reader`'s archive is a tiler pyramid: a manifest under `"tiler"` with a
    /// consistent geometry, the tile type of its format, uncompressed tiles, zooms
    /// 0...maxLevel, and a thumbnail inside the tile data.
    public init(reader: ArchiveReader) throws(StorageError) {
        let name = reader.source.name
        let header = reader.header
        let metadata = reader.metadata
        guard let span = JSONSpan.value(of: PyramidArchive.manifestKey, in: metadata) else {
            throw .invalid(
                path: name, reason: "the archive's metadata has no \"\(PyramidArchive.manifestKey)\" manifest (not cut by tiler?)")
        }
        let bytes = Array(metadata[span])
        let decoded: (manifest: PyramidManifest, geometry: PyramidGeometry)
        do {
            decoded = try PyramidManifest.decodedWithGeometry(bytes)
        } catch {
            throw .invalid(path: name, reason: "unreadable manifest in the archive's metadata: \(Self.reason(error))")
        }
        let (manifest, geometry) = decoded
        guard header.tileType == PyramidArchive.tileType(manifest.format) else {
            throw .invalid(
                path: name, reason: "the header's tile type is \(header.tileType) but the manifest says \(manifest.format.rawValue)")
        }
        guard header.tileCompression == .none else {
            throw .invalid(path: name, reason: "tiles are \(header.tileCompression)-compressed; tiler archives store them as they are")
        }
        guard header.minZoom == 0, Int(header.maxZoom) == geometry.maxLevel else {
            throw .invalid(
                path: name, reason: "the header's zooms \(header.minZoom)...\(header.maxZoom) do not match levels 0...\(geometry.maxLevel)")
        }
        struct Layout: Decodable {
            struct Blob: Decodable {
                let offset: UInt64
                let length: UInt64
            }
            let thumbnail: Blob
        }
        guard let layoutSpan = JSONSpan.value(of: PyramidArchive.layoutKey, in: metadata),
            let layout = try? JSONDecoder().decode(Layout.self, from: Data(metadata[layoutSpan]))
        else {
            throw .invalid(
                path: name, reason: "the archive's metadata does not say where the thumbnail is (\"\(PyramidArchive.layoutKey)\")")
        }
        let t = layout.thumbnail
        let (end, overflow) = t.offset.addingReportingOverflow(t.length)
        let thumbnailLimit = manifest.maximumThumbnailBytes
        guard t.length > 0, !overflow, end <= header.tileDataLength, t.length <= UInt64(max(0, thumbnailLimit)) else {
            throw .archive(
                path: name, .corrupt("the thumbnail (\(t.length) bytes at \(t.offset)) lies outside the tile data or is too large"))
        }
        self.reader = reader
        self.manifest = manifest
        manifestBytes = bytes
        self.geometry = geometry
        thumbnail = TileLocation(offset: header.tileDataOffset + t.offset, length: Int(t.length))
        maximumTileBytes = manifest.maximumTileBytes
    }

    /// Where a tile is, if every directory on its way is cached; never reads. `.absent`
    /// for coordinates outside the pyramid.
    public func cachedLocation(of tile: TileCoordinate) throws(StorageError) -> ArchiveReader.Lookup {
        guard geometry.contains(tile) else { return .absent }
        let lookup = reader.cachedLocation(ofTileID: PyramidArchive.tileID(tile))
        if case let .found(location) = lookup { try check(location, tile) }
        return lookup
    }

    /// Where a tile is, or nil if the pyramid or the archive has no such tile. May block.
    public func location(of tile: TileCoordinate) throws(StorageError) -> TileLocation? {
        guard geometry.contains(tile) else { return nil }
        guard let location = try reader.location(ofTileID: PyramidArchive.tileID(tile)) else { return nil }
        try check(location, tile)
        return location
    }

    /// A tile's bytes, or nil if there is no such tile. May block.
    public func tile(_ tile: TileCoordinate) throws(StorageError) -> [UInt8]? {
        guard let location = try location(of: tile) else { return nil }
        return try reader.read(location)
    }

    /// Calls `body` with the tiles of every directory entry, in tile-id order, and where
    /// their bytes are (a run of identical tiles comes as one call, or several of at most
    /// 4,096 tiles). Reads each leaf directory once. Throws, naming the archive, when an
    /// entry addresses a tile outside the pyramid, comes out of order, or would make more
    /// tiles than the pyramid has. May block.
    public func forEachTile(_ body: ([TileCoordinate], TileLocation) throws(StorageError) -> Void) throws(StorageError) {
        let name = reader.source.name
        let expected = geometry.levels.reduce(0) { $0 + $1.tileCount }
        var seen = 0
        var next: UInt64 = 0
        try reader.forEachTileEntry { (entry) throws(StorageError) in
            guard entry.tileID >= next else {
                throw .archive(path: name, .corrupt("tile id \(entry.tileID) comes after tile id \(next - 1)"))
            }
            guard entry.runLength <= expected - seen else {
                throw .archive(path: name, .corrupt("it addresses more than the pyramid's \(expected) tiles"))
            }
            let (end, overflow) = entry.tileID.addingReportingOverflow(UInt64(entry.runLength))
            guard !overflow else { throw .archive(path: name, .corrupt("tile id \(entry.tileID) runs past the last id")) }
            let location = reader.location(of: entry)
            var tiles: [TileCoordinate] = []
            tiles.reserveCapacity(min(Int(entry.runLength), 4096))
            for id in entry.tileID..<end {
                guard let t = TileID.tile(id), t.zoom <= geometry.maxLevel else {
                    throw .archive(path: name, .corrupt("tile id \(id) is past level \(geometry.maxLevel)"))
                }
                let tile = TileCoordinate(level: t.zoom, row: Int(t.y), column: Int(t.x))
                guard geometry.contains(tile) else {
                    throw .archive(path: name, .corrupt("tile \(tile) lies outside the \(geometry.width)×\(geometry.height) image"))
                }
                tiles.append(tile)
                if tiles.count == 4096 {
                    try body(tiles, location)
                    tiles.removeAll(keepingCapacity: true)
                }
            }
            if !tiles.isEmpty { try body(tiles, location) }
            seen += Int(entry.runLength)
            next = end
        }
    }

    /// The thumbnail's bytes. May block.
    public func thumbnailBytes() throws(StorageError) -> [UInt8] {
        try reader.read(thumbnail)
    }

    private func check(_ location: TileLocation, _ tile: TileCoordinate) throws(StorageError) {
        guard location.length <= maximumTileBytes else {
            throw .archive(
                path: reader.source.name,
                .corrupt("tile \(tile) claims \(location.length) bytes, more than a \(geometry.tileSize) px tile can take"))
        }
    }

    static func reason(_ error: any Error) -> String {
        switch error {
        case let DecodingError.dataCorrupted(context): context.debugDescription
        case let DecodingError.keyNotFound(key, _): "no '\(key.stringValue)'"
        case let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context):
            "'\(context.codingPath.map(\.stringValue).joined(separator: "."))' has the wrong type"
        default: String(describing: error)
        }
    }
}
