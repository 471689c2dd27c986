import Foundation
import PMTiles
import TilerCore

/// How a pyramid is stored in a PMTiles v3 archive, `ROOT/ID.pmtiles`:
///
/// - tile `(level z, row r, column c)` is PMTiles tile `(z, x = c, y = r)`, with the
///   bytes the folder layout would hold; `tile_type` png, jpeg or webp,
///   `tile_compression` none, directories and metadata gzip-compressed, `min_zoom` 0,
///   `max_zoom` maxLevel, clustered.
/// - the metadata JSON holds `pyramid.json`'s object, byte for byte, under `"tiler"`;
///   `"tiler_archive"` locates the thumbnail; `name`, `description`, `format` and `type`
///   are the conventional keys PMTiles and TileJSON viewers show.
/// - the thumbnail's bytes are the last blob of the tile data section, after every tile
///   and outside every directory (`tiler_archive.thumbnail.offset` is relative to the
///   tile data section, as directory offsets are), so the file is exactly header +
///   sections, as `pmtiles verify` wants, and readers that know nothing of it are not
///   disturbed.
/// - the bounds are the part of the Web Mercator world the image covers when level 0's
///   single tile is the whole world, so a map viewer opens on the image.
public enum PyramidArchive {
    /// The deepest level an archive holds (PMTiles tile ids fit 32 zoom levels).
    public static let maximumLevel = TileID.maximumZoom
    /// The metadata key holding the manifest.
    public static let manifestKey = "tiler"
    /// The metadata key holding where tiler's extra blobs are.
    public static let layoutKey = "tiler_archive"

    /// The PMTiles tile id of a tile.
    public static func tileID(_ tile: TileCoordinate) -> UInt64 {
        TileID.id(zoom: tile.level, x: UInt64(tile.column), y: UInt64(tile.row))
    }

    /// The PMTiles tile type of a tile format.
    public static func tileType(_ format: TileFormat) -> TileType {
        switch format {
        case .png: .png
        case .jpeg: .jpeg
        case .webp: .webp
        }
    }

    /// The header fields that do not depend on the tile data: types, compressions,
    /// zooms, bounds and centre.
    public static func header(geometry: PyramidGeometry, format: TileFormat) -> ArchiveHeader {
        var h = ArchiveHeader()
        h.tileType = tileType(format)
        h.internalCompression = .gzip
        h.tileCompression = .none
        h.minZoom = 0
        h.maxZoom = UInt8(geometry.maxLevel)
        // Level 0's one tile spans T·2^maxLevel full-resolution pixels: the whole world.
        let world = Double(geometry.tileSize) * pow(2, Double(geometry.maxLevel))
        let fx = Double(geometry.width) / world, fy = Double(geometry.height) / world
        func e7(_ degrees: Double) -> Int32 { Int32((degrees * 1e7).rounded()) }
        func latitude(_ y: Double) -> Double { atan(sinh(Double.pi * (1 - 2 * y))) * 180 / Double.pi }
        h.minLongitudeE7 = e7(-180)
        h.maxLongitudeE7 = max(e7(-180 + 360 * fx), h.minLongitudeE7 + 1)
        h.maxLatitudeE7 = e7(latitude(0))
        h.minLatitudeE7 = min(e7(latitude(fy)), h.maxLatitudeE7 - 1)
        h.centerZoom = 0
        h.centerLongitudeE7 = Int32((Int64(h.minLongitudeE7) + Int64(h.maxLongitudeE7)) / 2)
        h.centerLatitudeE7 = Int32((Int64(h.minLatitudeE7) + Int64(h.maxLatitudeE7)) / 2)
        return h
    }

    /// The metadata JSON: `manifest` (`pyramid.json`'s bytes, a JSON object) spliced in
    /// unchanged under `"tiler"`, the thumbnail's place under `"tiler_archive"`, and the
    /// conventional keys.
    static func metadata(
        manifest: [UInt8], geometry: PyramidGeometry, format: TileFormat,
        thumbnail: (offset: UInt64, length: UInt64), path: String
    ) throws(StorageError) -> [UInt8] {
        var object = manifest[...]
        while let last = object.last, JSONSpan.isWhitespace(last) { object.removeLast() }
        while let first = object.first, JSONSpan.isWhitespace(first) { object.removeFirst() }
        guard object.first == UInt8(ascii: "{"), object.last == UInt8(ascii: "}") else {
            throw .invalid(path: path, reason: "the manifest is not a JSON object")
        }
        let manifestValue = try? JSONDecoder().decode(PyramidManifest.self, from: Data(object))
        guard let id = manifestValue?.id else { throw .invalid(path: path, reason: "the manifest has no valid id") }
        // The id is [A-Za-z0-9._-] and the rest are numbers: nothing here needs escaping.
        var out = Array(
            #"{"description":"\#(geometry.width)×\#(geometry.height) image, \#(geometry.tileSize) px tiles, levels 0-\#(geometry.maxLevel)","#
                .utf8)
        out += Array(#""format":"\#(format.fileExtension)","name":"\#(id.rawValue)","\#(manifestKey)":"#.utf8)
        out += object
        out += Array(
            #","\#(layoutKey)":{"thumbnail":{"offset":\#(thumbnail.offset),"length":\#(thumbnail.length)}},"type":"baselayer"}"#.utf8)
        return out
    }
}

/// Finds a top-level member's value in a JSON object without decoding it, so the
/// manifest comes out of an archive's metadata byte for byte as it went in.
enum JSONSpan {
    static func isWhitespace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 }

    /// The byte range of the value of `key` in the JSON object `bytes`, or nil when
    /// `bytes` is not an object or has no such member. Keys are compared as written
    /// (escapes not undone).
    static func value(of key: String, in bytes: [UInt8]) -> Range<Int>? {
        let wanted = Array(key.utf8)
        var i = 0
        func skipSpace() { while i < bytes.count, isWhitespace(bytes[i]) { i += 1 } }
        /// Moves past a string starting at `i` (a quote); false if it never ends.
        func skipString() -> Bool {
            i += 1
            while i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: "\\"): i += 2
                case UInt8(ascii: "\""): i += 1; return true
                default: i += 1
                }
            }
            return false
        }
        /// Moves past any value starting at `i`.
        func skipValue() -> Bool {
            guard i < bytes.count else { return false }
            switch bytes[i] {
            case UInt8(ascii: "\""): return skipString()
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                var depth = 0
                while i < bytes.count {
                    switch bytes[i] {
                    case UInt8(ascii: "\""): if !skipString() { return false }; continue
                    case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                    case UInt8(ascii: "}"), UInt8(ascii: "]"):
                        depth -= 1
                        if depth == 0 { i += 1; return true }
                    default: break
                    }
                    i += 1
                }
                return false
            default:
                let start = i
                while i < bytes.count, !isWhitespace(bytes[i]), bytes[i] != UInt8(ascii: ","), bytes[i] != UInt8(ascii: "}"),
                    bytes[i] != UInt8(ascii: "]")
                { i += 1 }
                return i > start
            }
        }
        skipSpace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "{") else { return nil }
        i += 1
        while true {
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { return nil }
            let keyStart = i + 1
            guard skipString() else { return nil }
            let isWanted = bytes[keyStart..<(i - 1)].elementsEqual(wanted)
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return nil }
            i += 1
            skipSpace()
            let valueStart = i
            guard skipValue() else { return nil }
            if isWanted { return valueStart..<i }
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ",") else { return nil }
            i += 1
        }
    }
}
