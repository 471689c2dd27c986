/// A viewport in full-resolution image pixels. It may extend past the image or lie
/// wholly outside it.
public struct Viewport: Sendable, Hashable {
    public let x: Double
    public let y: Double
    public let width: Double
    public let height: Double

    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    public var centerX: Double { x + width / 2 }
    public var centerY: Double { y + height / 2 }
}

/// One tile to show: its stored address and where it sits in the (possibly repeated)
/// full-resolution plane.
public struct VisibleTile: Sendable, Hashable {
    public let coordinate: TileCoordinate
    /// Left edge in the plane: `k·W + column·T·f` for repetition `k` (0 without wrap).
    public let x: Int
    public let y: Int
    /// Full-resolution size of the clipped tile.
    public let width: Int
    public let height: Int

    public init(coordinate: TileCoordinate, x: Int, y: Int, width: Int, height: Int) {
        self.coordinate = coordinate
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }
}

/// The answer to a `VisibleTilesQuery`: the level chosen and its tiles, nearest first.
public struct VisibleTiles: Sendable, Hashable {
    public let level: Level
    /// The chosen level's scale, `1 / f`.
    public let scale: Double
    public let tiles: [VisibleTile]
}

/// Why a visible-tiles question cannot be answered; the server maps each to a 400.
public enum VisibleTilesError: Error, Hashable, Sendable, CustomStringConvertible {
    case missingParameter(String)
    case invalidParameter(String, String)
    case tooManyTiles(count: Int, limit: Int)

    public var description: String {
        switch self {
        case let .missingParameter(name): "missing parameter '\(name)'"
        case let .invalidParameter(name, why): "parameter '\(name)' \(why)"
        case let .tooManyTiles(count, limit):
            "the viewport would list \(count) tiles, more than the limit of \(limit); use a smaller viewport or scale"
        }
    }
}

extension PyramidGeometry {
    /// The default cap on tiles listed for one viewport.
    public static let defaultMaximumVisibleTiles = 4096

    /// The tiles of the level chosen for `query.scale` whose clipped rectangle meets the
    /// viewport with positive area, plus `margin` rings of neighbours (clipped to the grid,
    /// except horizontally under `wrapX`, where they continue into the neighbouring
    /// repetitions), ordered by distance from the tile's centre to the viewport's centre,
    /// then row, column and x. (`visibleTilesPlan` gives them one at a time, in the same
    /// order, without this array.)
    public func visibleTiles(
        for query: VisibleTilesQuery,
        maximumTiles: Int = defaultMaximumVisibleTiles
    ) throws(VisibleTilesError) -> VisibleTiles {
        let plan = try visibleTilesPlan(for: query, maximumTiles: maximumTiles)
        var tiles: [VisibleTile] = []
        tiles.reserveCapacity(plan.count)
        plan.forEachInDistanceOrder { tiles.append($0) }
        return VisibleTiles(level: plan.level, scale: plan.scale, tiles: tiles)
    }

    /// The level and the block of tiles `visibleTiles(for:maximumTiles:)` lists, without
    /// listing them: arithmetic only, no allocation.
    public func visibleTilesPlan(
        for query: VisibleTilesQuery,
        maximumTiles: Int = defaultMaximumVisibleTiles
    ) throws(VisibleTilesError) -> VisibleTilesPlan {
        let z = level(forScale: query.scale)
        let l = level(z)
        let span = Double(tileSize * l.downscale)  // full-resolution pixels per tile step
        let v = query.viewport
        let W = Double(width), H = Double(height)
        let empty = VisibleTilesPlan(
            level: l, scale: scale(of: z), geometry: self, rows: 0..<0, columns: 0..<0,
            centerX: v.centerX, centerY: v.centerY)

        // Rows: the viewport clipped to [0, H); none when it misses the image.
        let top = max(v.y, 0), bottom = min(v.y + v.height, H)
        guard top < bottom else { return empty }
        var firstRow = min(Int((top / span).rounded(.down)), l.rows - 1)
        var lastRow = min(Int((bottom / span).rounded(.up)) - 1, l.rows - 1)
        firstRow = max(firstRow - query.margin, 0)
        lastRow = min(lastRow + query.margin, l.rows - 1)

        // Columns as "global" indices g = k·columns + column over the repeated plane.
        let firstColumn: Int, lastColumn: Int
        if query.wrapX {
            // Estimate the count in Double before any Int conversion can overflow.
            let estimate = (v.width / W + 2) * Double(l.columns) + Double(2 * query.margin)
            let rowsListed = lastRow - firstRow + 1
            // Only a guard against absurd viewports before Int arithmetic: the estimate
            // allows two extra repetitions per row, so it can exceed the exact count many
            // times over; the exact count below decides against `maximumTiles`.
            if estimate * Double(rowsListed) > max(Double(maximumTiles), Double(Int32.max)) {
                throw .tooManyTiles(count: Int(min(estimate * Double(rowsListed), Double(Int32.max))), limit: maximumTiles)
            }
            firstColumn = globalColumn(containing: v.x, in: l, span: span, roundingUp: false) - query.margin
            lastColumn = globalColumn(containing: v.x + v.width, in: l, span: span, roundingUp: true) + query.margin
        } else {
            let left = max(v.x, 0), right = min(v.x + v.width, W)
            guard left < right else { return empty }
            let first = min(Int((left / span).rounded(.down)), l.columns - 1)
            let last = min(Int((right / span).rounded(.up)) - 1, l.columns - 1)
            firstColumn = max(first - query.margin, 0)
            lastColumn = min(last + query.margin, l.columns - 1)
        }

        let count = (lastColumn - firstColumn + 1) * (lastRow - firstRow + 1)
        guard count <= maximumTiles else { throw .tooManyTiles(count: count, limit: maximumTiles) }
        return VisibleTilesPlan(
            level: l, scale: scale(of: z), geometry: self, rows: firstRow..<(lastRow + 1),
            columns: firstColumn..<(lastColumn + 1), centerX: v.centerX, centerY: v.centerY)
    }

    /// The global column index (over the plane repeated with period W) of the tile that
    /// holds the point just right of `position` (`roundingUp == false`: the first tile the
    /// viewport meets) or just left of it (`roundingUp == true`: the last tile it meets).
    private func globalColumn(containing position: Double, in l: Level, span: Double, roundingUp: Bool) -> Int {
        let W = Double(width)
        var k = Int((position / W).rounded(.down))
        var local = position - Double(k) * W
        if local < 0 { local = 0 }
        if local >= W { local = 0; k += 1 }
        if roundingUp {
            // The last tile meeting [.., position): a point exactly on a repetition's
            // start belongs to the previous repetition's last column.
            if local == 0 { return k * l.columns - 1 }
            let column = min(Int((local / span).rounded(.up)) - 1, l.columns - 1)
            return k * l.columns + max(column, 0)
        } else {
            let column = min(Int((local / span).rounded(.down)), l.columns - 1)
            return k * l.columns + column
        }
    }
}

/// The tiles one viewport lists (see `PyramidGeometry.visibleTiles(for:maximumTiles:)`):
/// a block of rows and of global columns of one level, given nearest first by
/// `forEachInDistanceOrder` without a sort and without an allocation.
///
/// How the order comes without sorting: every row has the same column centres, strictly
/// increasing with the global column (an edge tile is narrower, but its centre still lies
/// right of its left neighbour's). So along one row the distance to the viewport's centre
/// falls, then rises: walking outwards from the column nearest the centre, one cursor left
/// and one right, gives that row's tiles nearest first. The next tile overall is the
/// nearest of the rows' next tiles (ties by row, then column, then x): a merge of a few
/// rows, each step a scan over them, with their cursors on the stack.
public struct VisibleTilesPlan: Sendable {
    public let level: Level
    /// The level's scale, `1 / f`.
    public let scale: Double
    let rows: Range<Int>
    /// Global columns `k·columns + column` over the plane repeated horizontally.
    let columns: Range<Int>
    let centerX: Double, centerY: Double
    let step: Int, width: Int, height: Int, levelColumns: Int

    init(
        level: Level, scale: Double, geometry: PyramidGeometry, rows: Range<Int>, columns: Range<Int>,
        centerX: Double, centerY: Double
    ) {
        self.level = level
        self.scale = scale
        self.rows = rows
        self.columns = columns
        self.centerX = centerX
        self.centerY = centerY
        step = geometry.tileSize * level.downscale
        width = geometry.width
        height = geometry.height
        levelColumns = level.columns
    }

    /// How many tiles it lists.
    public var count: Int { rows.count * columns.count }

    /// How many rows and columns the block has; `tile(rowOffset:columnOffset:)` takes
    /// offsets into them.
    public var rowCount: Int { rows.count }
    public var columnCount: Int { columns.count }

    /// The top edge and clipped height of the block's row `i`.
    @inline(__always)
    public func rowSpan(_ i: Int) -> (row: Int, y: Int, height: Int) {
        let row = rows.lowerBound + i
        let y = row * step
        return (row, y, min(y + step, height) - y)
    }

    /// The column, left edge in the plane (`k·W + column·T·f`) and clipped width of the
    /// block's global column `j`.
    @inline(__always)
    public func columnSpan(_ j: Int) -> (column: Int, x: Int, width: Int) {
        let g = columns.lowerBound + j
        let k = floorDiv(g, levelColumns)
        let column = g - k * levelColumns
        let local = column * step
        return (column, k * width + local, min(local + step, width) - local)
    }

    /// The tile at the block's row `i` and column `j`.
    @inline(__always)
    public func tile(rowOffset i: Int, columnOffset j: Int) -> VisibleTile {
        let r = rowSpan(i), c = columnSpan(j)
        return VisibleTile(
            coordinate: TileCoordinate(level: level.level, row: r.row, column: c.column), x: c.x, y: r.y,
            width: c.width, height: r.height)
    }

    /// Calls `body` with every tile, nearest first (the order of `VisibleTiles.tiles`).
    public func forEachInDistanceOrder(_ body: (VisibleTile) -> Void) {
        forEachOffsetInDistanceOrder { i, j in body(tile(rowOffset: i, columnOffset: j)) }
    }

    /// Calls `body` with the row and column offsets into the block of every tile, nearest
    /// first: what `forEachInDistanceOrder` lists, for callers that format a row's or a
    /// column's numbers once rather than once per tile.
    ///
    /// A tile's squared distance is `dx·dx + dy·dy`, where `dx` depends only on its
    /// column and `dy` only on its row, so both squares are computed once per column and
    /// per row; the sum is the same `Double` as computing it per tile. Ties go by row,
    /// then column, then x.
    public func forEachOffsetInDistanceOrder(_ body: (_ rowOffset: Int, _ columnOffset: Int) -> Void) {
        guard count > 0 else { return }
        let rowCount = rows.count, columnCount = columns.count
        // dy² per row, dx² per column, and each row's next distance (+∞ once the row is
        // done, so the scan for the nearest needs no other test).
        withUnsafeTemporaryAllocation(of: Double.self, capacity: 2 * rowCount + columnCount) { doubles in
            let dy2 = doubles.baseAddress!, dx2 = dy2 + rowCount, next = dx2 + columnCount
            for i in 0..<rowCount {
                let r = rowSpan(i)
                let dy = Double(r.y) + Double(r.height) / 2 - centerY
                dy2[i] = dy * dy
            }
            // The split: the last column whose centre is at or left of the viewport's
            // centre (-1 when none is); centres increase with the column.
            var split = -1
            for j in 0..<columnCount {
                let c = columnSpan(j)
                let dx = Double(c.x) + Double(c.width) / 2 - centerX
                dx2[j] = dx * dx
                if dx <= 0 { split = j }
            }
            withUnsafeTemporaryAllocation(of: RowWalk.self, capacity: rowCount) { walks in
                let w = walks.baseAddress!
                // Sets row i's next column: the nearer of those left and right, if any. Within
                // a row, equal distances go by column, then x (a wrapped left neighbour can
                // have the higher column; x increases to the right).
                func advance(_ i: Int) {
                    let left = w[i].left, right = w[i].right
                    let hasLeft = left >= 0, hasRight = right < columnCount
                    guard hasLeft || hasRight else {
                        next[i] = .infinity
                        return
                    }
                    var j = hasLeft ? left : right
                    if hasLeft && hasRight {
                        let dl = dx2[left] + dy2[i], dr = dx2[right] + dy2[i]
                        if dr < dl || (dr == dl && columnSpan(right).column < columnSpan(left).column) { j = right }
                    }
                    w[i].next = j
                    next[i] = dx2[j] + dy2[i]
                }
                for i in 0..<rowCount {
                    (w + i).initialize(to: RowWalk(left: split, right: split + 1, next: 0))
                    advance(i)
                }
                // Emits row `best`'s next tile and moves the row on.
                @inline(__always)
                func emit(_ best: Int) {
                    let j = w[best].next
                    body(best, j)
                    if j == w[best].left { w[best].left -= 1 } else { w[best].right += 1 }
                    advance(best)
                }
                if rowCount <= Self.rowsScannedLinearly {
                    for _ in 0..<count {
                        // The nearest of the rows' next tiles; rows are scanned in order, so a
                        // tie in distance goes to the lower row. Distances are finite, so a
                        // row not done is always found.
                        var best = 0
                        var bestDistance = next[0]
                        for i in 1..<rowCount where next[i] < bestDistance {
                            best = i
                            bestDistance = next[i]
                        }
                        emit(best)
                    }
                } else {
                    Self.mergeByHeap(rows: rowCount, tiles: count, next: next, emit: emit)
                }
                w.deinitialize(count: rowCount)
            }
        }
    }

    /// The merge for many rows (a tall, narrow viewport, or a raised
    /// `--max-visible-tiles`), where a scan per tile would cost tiles × rows: the rows not
    /// done are kept in a binary heap ordered by (next distance, row), the order the scan
    /// gives. `emit(row)` sends that row's next tile and updates `next[row]` (+∞ once the
    /// row is done).
    private static func mergeByHeap(
        rows rowCount: Int, tiles count: Int, next: UnsafeMutablePointer<Double>, emit: (Int) -> Void
    ) {
        withUnsafeTemporaryAllocation(of: Int.self, capacity: rowCount) { heapBuffer in
            let heap = heapBuffer.baseAddress!
            func precedes(_ a: Int, _ b: Int) -> Bool { next[a] < next[b] || (next[a] == next[b] && a < b) }
            var size = 0
            func siftDown(_ start: Int) {
                var k = start
                let row = heap[k]
                while true {
                    var child = 2 * k + 1
                    guard child < size else { break }
                    if child + 1 < size && precedes(heap[child + 1], heap[child]) { child += 1 }
                    guard precedes(heap[child], row) else { break }
                    heap[k] = heap[child]
                    k = child
                }
                heap[k] = row
            }
            for i in 0..<rowCount where next[i] < .infinity {
                heap[size] = i
                size += 1
            }
            for k in stride(from: size / 2 - 1, through: 0, by: -1) { siftDown(k) }
            for _ in 0..<count {
                // Only the root's key changed (it grew, or the row is done): one sift.
                let best = heap[0]
                emit(best)
                if next[best] == .infinity {
                    size -= 1
                    heap[0] = heap[size]
                }
                if size > 0 { siftDown(0) }
            }
        }
    }

    /// Up to this many rows the nearest next tile is found by scanning every row, which
    /// is fastest for the few rows of a screen (a tournament tree measured slower at 8
    /// rows: docs/benchmarks.md, session 15); above it, by a heap.
    static let rowsScannedLinearly = 32

    /// One row's walk outwards: the next column offsets to the left and to the right,
    /// and the nearer of the two.
    private struct RowWalk {
        var left: Int
        var right: Int
        var next: Int
    }
}

/// Floor division for a positive divisor.
@inline(__always)
func floorDiv(_ a: Int, _ b: Int) -> Int {
    a >= 0 ? a / b : -((-a + b - 1) / b)
}

/// A strict decimal parser for query values: optional sign, digits, optional fraction and
/// exponent. Refuses `nan`, `inf`, hex floats and anything Swift's `Double(_:)` would
/// accept beyond plain decimals.
func parseDecimal(_ text: String) -> Double? {
    guard !text.isEmpty, text.utf8.count <= 64 else { return nil }
    var sawDigit = false
    for (i, c) in text.utf8.enumerated() {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): sawDigit = true
        case UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): continue
        default: _ = i; return nil
        }
    }
    guard sawDigit, let value = Double(text), value.isFinite else { return nil }
    return value
}

/// Powers of ten that a `Double` holds exactly (10^22 is the largest).
private let exactPowersOfTen: [Double] = (0...22).map { k in (0..<k).reduce(1.0) { r, _ in r * 10 } }

/// The value of a plain decimal (`-12.375`, `0.5`, `2000`), read without a `String` and
/// without `strtod`, or nil when the text is not one this fast path reads exactly; the
/// caller then asks `Double(_:)`. Exact by Clinger's fast path: with at most 15 significant
/// digits the digits form an integer a `Double` holds exactly, 10^k for k ≤ 22 is exact too,
/// and one IEEE division of two exact values is correctly rounded, which is what `strtod`
/// returns. Takes: an optional sign, at least one digit, and optionally a point followed by
/// at least one digit. Anything else (an exponent, `5.`, `.5`, more digits) returns nil.
@inline(__always)
func plainDecimal(_ text: ArraySlice<UInt8>) -> Double? {
    var i = text.startIndex
    let end = text.endIndex
    guard i < end else { return nil }
    var negative = false
    if text[i] == UInt8(ascii: "-") || text[i] == UInt8(ascii: "+") {
        negative = text[i] == UInt8(ascii: "-")
        i += 1
    }
    var mantissa: UInt64 = 0
    var significant = 0
    var integerDigits = 0
    while i < end, text[i] &- 0x30 < 10 {
        mantissa = mantissa &* 10 &+ UInt64(text[i] &- 0x30)
        if mantissa != 0 { significant += 1 }
        integerDigits += 1
        i += 1
    }
    guard integerDigits > 0, significant <= 15 else { return nil }
    var fractionDigits = 0
    if i < end {
        guard text[i] == UInt8(ascii: ".") else { return nil }
        i += 1
        while i < end, text[i] &- 0x30 < 10 {
            mantissa = mantissa &* 10 &+ UInt64(text[i] &- 0x30)
            if mantissa != 0 { significant += 1 }
            fractionDigits += 1
            i += 1
        }
        guard i == end, fractionDigits > 0, fractionDigits <= 22, significant <= 15 else { return nil }
    }
    let magnitude = Double(mantissa) / exactPowersOfTen[fractionDigits]
    return negative ? -magnitude : magnitude
}
