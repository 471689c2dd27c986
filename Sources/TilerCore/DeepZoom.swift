/// DeepZoom (DZI) levels for a pyramid, as OpenSeadragon and other DeepZoom clients
/// expect them.
///
/// DeepZoom numbers its levels from a 1 × 1 image up to full resolution:
/// - `maxLevel = ceil(log2(max(W, H)))`, the full-resolution level;
/// - level `l` is the image shrunk by `2^(maxLevel − l)` to `ceil(W / 2^(maxLevel − l)) ×
///   ceil(H / 2^(maxLevel − l))` (OpenSeadragon: `getLevelScale(l) = 1 / 2^(maxLevel − l)`);
/// - level `l` has `ceil(Wl / T)` columns and `ceil(Hl / T)` rows of `T`-pixel tiles,
///   edge tiles clipped, no overlap.
///
/// Our pyramid's level `z` is the image shrunk by `2^(pyramid.maxLevel − z)`, so DeepZoom
/// level `l` *is* pyramid level `z = l − (maxLevel − pyramid.maxLevel)` whenever that is
/// `>= 0`, tile for tile. The DeepZoom levels below that (smaller than our level 0, down
/// to 1 × 1) are each a single tile that the server renders by shrinking level 0.
public struct DeepZoomGeometry: Sendable, Hashable {
    /// The pyramid this DeepZoom view describes.
    public let pyramid: PyramidGeometry
    /// The full-resolution DeepZoom level, `ceil(log2(max(W, H)))` (0 for a 1 × 1 image).
    public let maxLevel: Int

    public init(pyramid: PyramidGeometry) {
        self.pyramid = pyramid
        // Smallest l >= 0 with 2^l >= max(W, H): the integer form of ceil(log2(max)).
        let longest = max(pyramid.width, pyramid.height)
        var level = 0
        while 1 << level < longest { level += 1 }
        self.maxLevel = level
    }

    /// How many DeepZoom levels sit below pyramid level 0.
    public var levelsBelowPyramid: Int { maxLevel - pyramid.maxLevel }

    /// All DeepZoom level numbers, smallest image first.
    public var levelNumbers: ClosedRange<Int> { 0...maxLevel }

    /// Whether `level` is a DeepZoom level of this image.
    public func contains(level: Int) -> Bool { level >= 0 && level <= maxLevel }

    /// The size and tile grid of a DeepZoom level, and where its pixels come from.
    public func level(_ level: Int) -> DeepZoomLevel {
        precondition(contains(level: level), "DeepZoom level \(level) outside 0...\(maxLevel)")
        let f = 1 << (maxLevel - level)
        let w = ceilDiv(pyramid.width, f)
        let h = ceilDiv(pyramid.height, f)
        let z = level - levelsBelowPyramid
        return DeepZoomLevel(
            level: level, width: w, height: h,
            columns: ceilDiv(w, pyramid.tileSize), rows: ceilDiv(h, pyramid.tileSize),
            pyramidLevel: z >= 0 ? z : nil)
    }

    /// Every DeepZoom level, smallest first.
    public var levels: [DeepZoomLevel] { levelNumbers.map { level($0) } }

    /// Where a DeepZoom tile's pixels come from, or nil when the level, column or row is
    /// outside the image (a 404).
    public func source(level: Int, column: Int, row: Int) -> DeepZoomTileSource? {
        guard contains(level: level) else { return nil }
        let l = self.level(level)
        guard column >= 0, column < l.columns, row >= 0, row < l.rows else { return nil }
        if let z = l.pyramidLevel {
            return .pyramidTile(TileCoordinate(level: z, row: row, column: column))
        }
        // Below our level 0 every level fits in one tile: column 0, row 0.
        return .shrunkLevelZero(width: l.width, height: l.height)
    }

    /// The `.dzi` descriptor. `format` is the tile file extension (`png`, `jpg`, `webp`).
    public func descriptorXML(format: String) -> String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <Image xmlns="http://schemas.microsoft.com/deepzoom/2008" TileSize="\(pyramid.tileSize)" Overlap="0" Format="\(format)"><Size Width="\(pyramid.width)" Height="\(pyramid.height)"/></Image>

        """
    }
}

/// One DeepZoom level: its size, its tile grid, and the pyramid level that holds the
/// same pixels (nil below our level 0).
public struct DeepZoomLevel: Sendable, Hashable {
    public let level: Int
    public let width: Int
    public let height: Int
    public let columns: Int
    public let rows: Int
    /// The pyramid level of exactly this size, or nil when the level is smaller than our
    /// level 0 and must be rendered by shrinking it.
    public let pyramidLevel: Int?
}

/// Where the pixels of one DeepZoom tile come from.
public enum DeepZoomTileSource: Sendable, Hashable {
    /// The pyramid's own tile file, byte for byte.
    case pyramidTile(TileCoordinate)
    /// The whole of pyramid level 0 shrunk to `width × height` (one tile; levels below
    /// ours are always smaller than a tile).
    case shrunkLevelZero(width: Int, height: Int)
}

extension DeepZoomGeometry {
    /// Parses the tile part of `/images/ID_files/L/COLUMN_ROW.EXT`: `L` and `COLUMN_ROW.EXT`.
    /// Returns nil for anything that is not non-negative decimal numbers and an extension.
    public static func parseTilePath(level: String, file: String) -> (level: Int, column: Int, row: Int, fileExtension: String)? {
        guard let l = strictNonNegative(level),
            let dot = file.lastIndex(of: "."),
            let underscore = file[..<dot].firstIndex(of: "_"),
            let c = strictNonNegative(String(file[..<underscore])),
            let r = strictNonNegative(String(file[file.index(after: underscore)..<dot]))
        else { return nil }
        let ext = String(file[file.index(after: dot)...])
        guard !ext.isEmpty else { return nil }
        return (l, c, r, ext)
    }
}

/// A non-negative decimal integer of at most 9 digits (no sign, no spaces).
func strictNonNegative(_ text: String) -> Int? {
    guard !text.isEmpty, text.utf8.count <= 9,
        text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
    else { return nil }
    return Int(text)
}
