/// The geometry of one image's tile pyramid: the single source of truth that the
/// cutter, the server, DeepZoom and IIIF all call.
///
/// For an image of `width × height` pixels and tile size `T`:
/// - `maxLevel = max(0, ceil(log2(max(W, H) / T)))`; level `maxLevel` is full resolution
///   and level 0 is the whole image fitting in one tile.
/// - level `z` is the image shrunk by `f = 2^(maxLevel − z)` to `ceil(W / f) × ceil(H / f)`.
/// - level `z` has `ceil(Wz / T)` columns and `ceil(Hz / T)` rows; edge tiles are clipped.
public struct PyramidGeometry: Sendable, Hashable, Codable {
    /// Full-resolution width in pixels.
    public let width: Int
    /// Full-resolution height in pixels.
    public let height: Int
    /// The side of a (non-edge) tile in pixels.
    public let tileSize: Int
    /// The full-resolution level; level 0 fits in one tile.
    public let maxLevel: Int

    /// The largest image side the geometry accepts (2^40 pixels), so that every
    /// product of coordinates stays far from `Int` overflow.
    public static let maximumSide = 1 << 40
    /// Tile sizes accepted by the cutter and the server.
    public static let tileSizeRange = 16...8192
    /// The tile size when none is chosen (`tiler cut --tile-size`'s default).
    public static let defaultTileSize = 256

    public init(width: Int, height: Int, tileSize: Int = defaultTileSize) throws(GeometryError) {
        guard width >= 1, height >= 1, width <= Self.maximumSide, height <= Self.maximumSide else {
            throw .invalidImageSize(width: width, height: height)
        }
        guard Self.tileSizeRange.contains(tileSize) else {
            throw .invalidTileSize(tileSize)
        }
        self.width = width
        self.height = height
        self.tileSize = tileSize
        // Smallest z >= 0 with T * 2^z >= max(W, H): integer form of ceil(log2(max / T)).
        let longest = max(width, height)
        var level = 0
        while tileSize << level < longest { level += 1 }
        self.maxLevel = level
    }

    /// All level numbers, coarsest first.
    public var levelNumbers: ClosedRange<Int> { 0...maxLevel }

    /// Whether `level` exists in this pyramid.
    public func contains(level: Int) -> Bool { level >= 0 && level <= maxLevel }

    /// The downscale factor `f = 2^(maxLevel − level)` of a level.
    public func downscale(of level: Int) -> Int {
        precondition(contains(level: level), "level \(level) outside 0...\(maxLevel)")
        return 1 << (maxLevel - level)
    }

    /// Display pixels per full-resolution pixel at `level`: `1 / f`.
    public func scale(of level: Int) -> Double {
        1.0 / Double(downscale(of: level))
    }

    /// The size and tile grid of one level.
    public func level(_ level: Int) -> Level {
        let f = downscale(of: level)
        let w = ceilDiv(width, f)
        let h = ceilDiv(height, f)
        return Level(
            level: level, width: w, height: h,
            columns: ceilDiv(w, tileSize), rows: ceilDiv(h, tileSize), downscale: f)
    }

    /// Every level, coarsest (0) first.
    public var levels: [Level] { levelNumbers.map { level($0) } }

    /// Whether the tile exists in this pyramid.
    public func contains(_ tile: TileCoordinate) -> Bool {
        contains(level: tile.level) && level(tile.level).contains(row: tile.row, column: tile.column)
    }

    /// The pixels of `level` that a tile holds, clipped at the level's edges.
    public func rectInLevel(_ tile: TileCoordinate) -> PixelRect {
        precondition(contains(tile), "tile \(tile) outside the pyramid")
        let l = level(tile.level)
        let x = tile.column * tileSize
        let y = tile.row * tileSize
        return PixelRect(
            x: x, y: y,
            width: min(x + tileSize, l.width) - x,
            height: min(y + tileSize, l.height) - y)
    }

    /// The full-resolution pixels a tile covers: `x = column·T·f`,
    /// `width = min((column+1)·T·f, W) − x`, and the same for y.
    public func rectInImage(_ tile: TileCoordinate) -> PixelRect {
        precondition(contains(tile), "tile \(tile) outside the pyramid")
        let span = tileSize * downscale(of: tile.level)
        let x = tile.column * span
        let y = tile.row * span
        return PixelRect(
            x: x, y: y,
            width: min(x + span, width) - x,
            height: min(y + span, height) - y)
    }

    /// The level to show at `scale` display pixels per image pixel: the smallest level
    /// whose scale is at least `scale` (never blurrier than asked), clamped to
    /// `0...maxLevel`.
    public func level(forScale scale: Double) -> Int {
        for z in levelNumbers where self.scale(of: z) >= scale { return z }
        return maxLevel
    }
}

/// A geometry's tile grids, one per level, made once: whether a tile exists is then two
/// comparisons, where `PyramidGeometry.contains` works out the level (four divisions).
/// For the server, which asks at every tile request.
public struct TileGrids: Sendable {
    @usableFromInline let levels: [Level]

    public init(_ geometry: PyramidGeometry) {
        levels = geometry.levels
    }

    /// Whether the tile exists (`PyramidGeometry.contains`). Inlinable: the server's
    /// tile requests call it from another module.
    @inlinable
    public func contains(_ tile: TileCoordinate) -> Bool {
        levels.indices.contains(tile.level) && levels[tile.level].contains(row: tile.row, column: tile.column)
    }
}

/// One level of a pyramid: its size in pixels and its tile grid.
public struct Level: Sendable, Hashable, Codable {
    public let level: Int
    public let width: Int
    public let height: Int
    public let columns: Int
    public let rows: Int
    /// `f = 2^(maxLevel − level)`: how many full-resolution pixels one level pixel spans.
    public let downscale: Int

    public init(level: Int, width: Int, height: Int, columns: Int, rows: Int, downscale: Int) {
        self.level = level
        self.width = width
        self.height = height
        self.columns = columns
        self.rows = rows
        self.downscale = downscale
    }

    /// Number of tiles in the level.
    public var tileCount: Int { columns * rows }

    /// Whether the level's grid has the tile at `row`, `column`.
    @inlinable
    public func contains(row: Int, column: Int) -> Bool {
        row >= 0 && row < rows && column >= 0 && column < columns
    }
}

/// A tile's address: resolution level, row and column.
public struct TileCoordinate: Sendable, Hashable, Codable, CustomStringConvertible {
    public let level: Int
    public let row: Int
    public let column: Int

    public init(level: Int, row: Int, column: Int) {
        self.level = level
        self.row = row
        self.column = column
    }

    public var description: String { "\(level)/\(row)/\(column)" }
}

/// An integer pixel rectangle.
public struct PixelRect: Sendable, Hashable, Codable {
    public let x: Int
    public let y: Int
    public let width: Int
    public let height: Int

    public init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    public var maxX: Int { x + width }
    public var maxY: Int { y + height }
    public var area: Int { width * height }
}

/// Why a geometry could not be made.
public enum GeometryError: Error, Hashable, Sendable, CustomStringConvertible {
    case invalidImageSize(width: Int, height: Int)
    case invalidTileSize(Int)

    public var description: String {
        switch self {
        case let .invalidImageSize(w, h):
            "image size \(w)×\(h) is not supported (each side must be 1...\(PyramidGeometry.maximumSide))"
        case let .invalidTileSize(t):
            "tile size \(t) is not supported (use \(PyramidGeometry.tileSizeRange.lowerBound)...\(PyramidGeometry.tileSizeRange.upperBound))"
        }
    }
}

/// `ceil(a / b)` for non-negative `a` and positive `b`.
@inline(__always)
func ceilDiv(_ a: Int, _ b: Int) -> Int { (a + b - 1) / b }
