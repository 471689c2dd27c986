/// PMTiles tile ids: tile `(z, x, y)` is number `d` on the Hilbert curve that fills the
/// `2^z × 2^z` grid of zoom `z`, plus the number of tiles in every coarser zoom, so ids
/// run through zoom 0, then all of zoom 1, and so on, and tiles close on the curve are
/// close in the file.
public enum TileID {
    /// The highest zoom whose ids fit in 64 bits (PMTiles' own limit is a UInt8 zoom, but
    /// `Σ 4^z` for z ≤ 31 is the last sum below 2^64).
    public static let maximumZoom = 31

    /// The id of the first tile of `zoom`: `Σ_{t<z} 4^t = (4^z − 1) / 3`.
    @inlinable
    public static func firstID(ofZoom zoom: Int) -> UInt64 {
        precondition(zoom >= 0 && zoom <= maximumZoom + 1, "zoom \(zoom) outside 0...\(maximumZoom + 1)")
        // 4^32 overflows; (4^z − 1) / 3 computed as ((1 << 2z) − 1) / 3 with wrapping.
        return (zoom == 32 ? UInt64.max : (UInt64(1) << (2 * UInt64(zoom))) &- 1) / 3
    }

    /// The id of tile `(zoom, x, y)`; `x` and `y` must be below `2^zoom`.
    @inlinable
    public static func id(zoom: Int, x: UInt64, y: UInt64) -> UInt64 {
        precondition(zoom >= 0 && zoom <= maximumZoom, "zoom \(zoom) outside 0...\(maximumZoom)")
        let n = UInt64(1) << UInt64(zoom)
        precondition(x < n && y < n, "tile \(zoom)/\(x)/\(y) outside the \(n)×\(n) grid")
        var x = x, y = y
        var d: UInt64 = 0
        var s = n >> 1
        while s > 0 {
            let rx: UInt64 = x & s != 0 ? 1 : 0
            let ry: UInt64 = y & s != 0 ? 1 : 0
            d += s * s * ((3 * rx) ^ ry)
            // Rotate the quadrant so that the curve inside it starts and ends where the
            // whole curve does; only the bits below `s` matter from here on.
            if ry == 0 {
                if rx == 1 {
                    x = n - 1 - x
                    y = n - 1 - y
                }
                swap(&x, &y)
            }
            x &= s - 1
            y &= s - 1
            s >>= 1
        }
        return firstID(ofZoom: zoom) + d
    }

    /// The tile `(zoom, x, y)` of an id; nil for ids past zoom `maximumZoom`.
    @inlinable
    public static func tile(_ id: UInt64) -> (zoom: Int, x: UInt64, y: UInt64)? {
        var zoom = 0
        while zoom <= maximumZoom {
            if id < firstID(ofZoom: zoom + 1) { break }
            zoom += 1
        }
        guard zoom <= maximumZoom else { return nil }
        let n = UInt64(1) << UInt64(zoom)
        var t = id - firstID(ofZoom: zoom)
        var x: UInt64 = 0, y: UInt64 = 0
        var s: UInt64 = 1
        while s < n {
            let rx = 1 & (t / 2)
            let ry = 1 & (t ^ rx)
            if ry == 0 {
                if rx == 1 {
                    x = s - 1 - x
                    y = s - 1 - y
                }
                swap(&x, &y)
            }
            x += s * rx
            y += s * ry
            t /= 4
            s <<= 1
        }
        return (zoom, x, y)
    }

    /// Calls `body(x, y)` for every tile of zoom `zoom` with `x < columns` and
    /// `y < rows` (a pyramid level's rectangle), in tile-id order, without listing or
    /// sorting them: the Hilbert curve runs through each aligned quarter of a square
    /// before it enters the next, so the quarters are visited in the order of their
    /// first cells' ids, and recursively. Memory is the recursion's depth, time a few id
    /// computations per tile.
    public static func forEachTile<E: Error>(
        zoom: Int, columns: UInt64, rows: UInt64,
        _ body: (_ x: UInt64, _ y: UInt64) throws(E) -> Void
    ) throws(E) {
        precondition(zoom >= 0 && zoom <= maximumZoom, "zoom \(zoom) outside 0...\(maximumZoom)")
        let n = UInt64(1) << UInt64(zoom)
        precondition(columns <= n && rows <= n, "\(columns)×\(rows) tiles do not fit zoom \(zoom)")
        func visit(_ x: UInt64, _ y: UInt64, _ size: UInt64) throws(E) {
            guard x < columns, y < rows else { return }
            if size == 1 { return try body(x, y) }
            let half = size / 2
            var quarters = [(x, y), (x + half, y), (x, y + half), (x + half, y + half)]
                .filter { $0.0 < columns && $0.1 < rows }
                .map { (id: id(zoom: zoom, x: $0.0, y: $0.1), x: $0.0, y: $0.1) }
            quarters.sort { $0.id < $1.id }
            for q in quarters { try visit(q.x, q.y, half) }
        }
        try visit(0, 0, n)
    }
}
