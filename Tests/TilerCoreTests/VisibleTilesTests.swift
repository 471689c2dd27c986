import Foundation
import Testing
import TilerTestSupport
@testable import TilerCore

/// An independent, brute-force reading of the contract's visible-tiles rule: enumerate
/// every tile (and every horizontal repetition near the viewport), test each for
/// positive-area overlap, grow by the margin, sort. It shares no code with TilerCore
/// beyond the result types.
enum BruteForceVisible {
    struct Answer: Equatable { var level: Int; var tiles: [VisibleTile] }

    static func answer(
        width W: Int, height H: Int, tileSize T: Int,
        x: Double, y: Double, w: Double, h: Double, scale: Double,
        margin: Int, wrap: Bool
    ) -> Answer {
        var maxLevel = 0
        while Double(T) * pow(2, Double(maxLevel)) < Double(max(W, H)) { maxLevel += 1 }
        var level = maxLevel
        for z in 0...maxLevel where pow(2, Double(z - maxLevel)) >= scale { level = z; break }
        let f = Int(pow(2, Double(maxLevel - level)))
        let levelWidth = Int(ceil(Double(W) / Double(f)))
        let levelHeight = Int(ceil(Double(H) / Double(f)))
        let columns = Int(ceil(Double(levelWidth) / Double(T)))
        let rows = Int(ceil(Double(levelHeight) / Double(T)))
        let span = T * f

        func overlaps(_ a0: Double, _ a1: Double, _ b0: Double, _ b1: Double) -> Bool {
            max(a0, b0) < min(a1, b1)
        }
        // Candidate (k, column) pairs: repetition 0 only without wrap.
        var ks: [Int] = [0]
        if wrap {
            let lo = Int(floor(x / Double(W))) - margin - 2
            let hi = Int(floor((x + w) / Double(W))) + margin + 2
            ks = Array(lo...hi)
        }
        struct Cell { var k: Int; var column: Int; var row: Int; var global: Int }
        var visible: [Cell] = []
        var all: [Cell] = []
        for k in ks {
            for column in 0..<columns {
                let x0 = k * W + column * span
                let x1 = k * W + min((column + 1) * span, W)
                for row in 0..<rows {
                    let y0 = row * span, y1 = min((row + 1) * span, H)
                    let cell = Cell(k: k, column: column, row: row, global: k * columns + column)
                    all.append(cell)
                    if overlaps(Double(x0), Double(x1), x, x + w) && overlaps(Double(y0), Double(y1), y, y + h) {
                        visible.append(cell)
                    }
                }
            }
        }
        guard !visible.isEmpty else { return Answer(level: level, tiles: []) }
        // The margin adds rings around the visible tiles: every cell within `margin` steps
        // (Chebyshev distance) of the visible block, which is always a rectangle.
        let minRow = visible.map(\.row).min()!, maxRow = visible.map(\.row).max()!
        let minG = visible.map(\.global).min()!, maxG = visible.map(\.global).max()!
        precondition(visible.count == (maxRow - minRow + 1) * (maxG - minG + 1), "visible tiles form a block")
        let included = all.filter { c in
            c.row >= minRow - margin && c.row <= maxRow + margin && c.global >= minG - margin && c.global <= maxG + margin
        }
        var tiles = included.map { c -> (Double, VisibleTile) in
            let x0 = c.k * W + c.column * span
            let width = min((c.column + 1) * span, W) - c.column * span
            let y0 = c.row * span
            let height = min((c.row + 1) * span, H) - y0
            let dx = Double(x0) + Double(width) / 2 - (x + w / 2)
            let dy = Double(y0) + Double(height) / 2 - (y + h / 2)
            return (
                dx * dx + dy * dy,
                VisibleTile(
                    coordinate: TileCoordinate(level: level, row: c.row, column: c.column),
                    x: x0, y: y0, width: width, height: height)
            )
        }
        tiles.sort { a, b in
            if a.0 != b.0 { return a.0 < b.0 }
            if a.1.coordinate.row != b.1.coordinate.row { return a.1.coordinate.row < b.1.coordinate.row }
            if a.1.coordinate.column != b.1.coordinate.column { return a.1.coordinate.column < b.1.coordinate.column }
            return a.1.x < b.1.x
        }
        return Answer(level: level, tiles: tiles.map(\.1))
    }
}

@Suite struct VisibleTilesTests {
    @Test func contractExampleShape() throws {
        let g = try PyramidGeometry(width: 20000, height: 20000)
        let q = try VisibleTilesQuery(viewport: Viewport(x: 4096, y: 3072, width: 1024, height: 1024), scale: 0.25)
        let v = try g.visibleTiles(for: q)
        #expect(v.level.level == 5 && v.scale == 0.25 && v.level.columns == 20 && v.level.rows == 20)
        #expect(
            v.tiles == [VisibleTile(coordinate: TileCoordinate(level: 5, row: 3, column: 4), x: 4096, y: 3072, width: 1024, height: 1024)])
    }

    @Test func edgesTouchingAreNotVisible() throws {
        let g = try PyramidGeometry(width: 1000, height: 600)
        // Exactly the second full-resolution tile: neighbours only touch it.
        let v = try g.visibleTiles(for: VisibleTilesQuery(viewport: Viewport(x: 256, y: 0, width: 256, height: 256), scale: 1))
        #expect(v.tiles.map(\.coordinate) == [TileCoordinate(level: 2, row: 0, column: 1)])
    }

    @Test func outsideListsNoneWhateverTheMargin() throws {
        let g = try PyramidGeometry(width: 1000, height: 600)
        for (x, y) in [(-500.0, 0.0), (1000, 0), (0, 600), (0, -100), (2000, 2000)] {
            let q = try VisibleTilesQuery(viewport: Viewport(x: x, y: y, width: 100, height: 100), scale: 1, margin: 3)
            #expect(try g.visibleTiles(for: q).tiles.isEmpty)
        }
        // Wrapped horizontally, a viewport right of the image shows the next repetition…
        let wrapped = try VisibleTilesQuery(viewport: Viewport(x: 1000, y: 0, width: 100, height: 100), scale: 1, wrapX: true)
        let tiles = try g.visibleTiles(for: wrapped).tiles
        #expect(tiles.map(\.coordinate) == [TileCoordinate(level: 2, row: 0, column: 0)])
        #expect(tiles.first?.x == 1000)
        // …but vertically nothing repeats.
        let below = try VisibleTilesQuery(viewport: Viewport(x: 0, y: 700, width: 100, height: 100), scale: 1, margin: 2, wrapX: true)
        #expect(try g.visibleTiles(for: below).tiles.isEmpty)
    }

    @Test func wrapMarginContinuesIntoNeighbours() throws {
        let g = try PyramidGeometry(width: 1000, height: 200)  // 4 columns at full resolution
        let q = try VisibleTilesQuery(viewport: Viewport(x: 10, y: 0, width: 100, height: 100), scale: 1, margin: 1, wrapX: true)
        let v = try g.visibleTiles(for: q)
        // Column 0 of repetition 0, plus column 1 to the right and column 3 of repetition −1.
        #expect(Set(v.tiles.map { [$0.coordinate.column, $0.x] }) == [[0, 0], [1, 256], [3, -232]])
        #expect(v.tiles.first?.coordinate.column == 0)
    }

    @Test func limitIsEnforced() throws {
        let g = try PyramidGeometry(width: 100_000, height: 100_000)
        let q = try VisibleTilesQuery(viewport: Viewport(x: 0, y: 0, width: 100_000, height: 100_000), scale: 1)
        #expect(throws: VisibleTilesError.tooManyTiles(count: 391 * 391, limit: 4096)) { try g.visibleTiles(for: q) }
        let wide = try VisibleTilesQuery(viewport: Viewport(x: 0, y: 0, width: 1e15, height: 10), scale: 1, wrapX: true)
        #expect(throws: VisibleTilesError.self) { try g.visibleTiles(for: wide) }
        #expect(try g.visibleTiles(for: q, maximumTiles: 391 * 391).tiles.count == 391 * 391)
    }

    @Test func queryValidation() throws {
        func parse(_ s: String) throws(VisibleTilesError) -> VisibleTilesQuery {
            let items = s.split(separator: "&").map { part -> (name: String, value: String) in
                let kv = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                return (String(kv[0]), kv.count > 1 ? String(kv[1]) : "")
            }
            return try VisibleTilesQuery(queryItems: items)
        }
        #expect(try parse("x=1&y=2&width=3&height=4&scale=0.5&margin=2&wrap=x").margin == 2)
        #expect(try parse("x=-1.5e2&y=2&width=3&height=4&scale=1").viewport.x == -150)
        #expect(throws: VisibleTilesError.missingParameter("scale")) { try parse("x=1&y=2&width=3&height=4") }
        for bad in [
            "x=nan&y=2&width=3&height=4&scale=1", "x=inf&y=2&width=3&height=4&scale=1",
            "x=1&y=2&width=0&height=4&scale=1", "x=1&y=2&width=3&height=-4&scale=1",
            "x=1&y=2&width=3&height=4&scale=0", "x=1&y=2&width=3&height=4&scale=abc",
            "x=0x10&y=2&width=3&height=4&scale=1", "x=1&y=2&width=3&height=4&scale=1&margin=-1",
            "x=1&y=2&width=3&height=4&scale=1&margin=1.5", "x=1&y=2&width=3&height=4&scale=1&wrap=y",
            "x=1&x=2&y=2&width=3&height=4&scale=1", "x=1e400&y=2&width=3&height=4&scale=1",
            "x=&y=2&width=3&height=4&scale=1",
        ] {
            #expect(throws: VisibleTilesError.self, "\(bad)") { try parse(bad) }
        }
    }

    /// The byte-level reader of the common query form must give what the item-based
    /// parser gives, or step aside (nil) and leave the answer to it; never a different
    /// query and never an error the item-based parser would not throw.
    @Test func commonFormAgreesWithItemParser() throws {
        func items(_ s: String) -> [(name: String, value: String)] {
            s.split(separator: "&").map { part in
                let kv = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                return (String(kv[0]), kv.count > 1 ? String(kv[1]) : "")
            }
        }
        var rng = SplitMix(seed: 2026)
        let values = [
            "0", "1", "-3", "12.5", "1e3", "-1.5E-2", "+4", "0.000001", "1e400", "nan", "inf", "", "0x10",
            "1.2.3", "e", "-", "5%2E0", "100000000000000000000", "3.", ".5", "07", "64", "65", "x", "none",
            "1125899906842625", "-0",
        ]
        let names = ["x", "y", "width", "height", "scale", "margin", "wrap", "zoom", "", "%78", "X"]
        var answered = 0
        for _ in 0..<20_000 {
            var parts: [String] = []
            // Usually the five required names, shuffled, plus extras; sometimes anything.
            if Bool.random(using: &rng) || Bool.random(using: &rng) {
                for n in ["x", "y", "width", "height", "scale"] {
                    let v =
                        Int.random(in: 0..<4, using: &rng) == 0
                        ? values.randomElement(using: &rng)!
                        : String(Double.random(in: -5000...5000, using: &rng))
                    parts.append("\(n)=\(n == "width" || n == "height" || n == "scale" ? v.replacingOccurrences(of: "-", with: "") : v)")
                }
            }
            for _ in 0..<Int.random(in: 0...3, using: &rng) {
                let n = names.randomElement(using: &rng)!
                parts.append(Bool.random(using: &rng) ? "\(n)=\(values.randomElement(using: &rng)!)" : n)
            }
            if Int.random(in: 0..<10, using: &rng) == 0 { parts.append("") }
            parts.shuffle(using: &rng)
            let query = parts.joined(separator: "&")
            let fast: Result<VisibleTilesQuery?, VisibleTilesError> = Result { () throws(VisibleTilesError) in
                try VisibleTilesQuery.parsingCommonForm(ArraySlice(Array(query.utf8)))
            }
            let slow: Result<VisibleTilesQuery, VisibleTilesError> = Result { () throws(VisibleTilesError) in
                try VisibleTilesQuery(queryItems: items(query))
            }
            switch (fast, slow) {
            case (.success(nil), _): continue
            case let (.success(a?), .success(b)): #expect(a == b, "\(query)")
            case let (.failure(a), .failure(b)): #expect(a == b, "\(query)")
            default: Issue.record("common form \(fast) but item parser \(slow) for '\(query)'")
            }
            answered += 1
        }
        // The fast path must actually be taken for the common form.
        #expect(answered > 1000)
        #expect(
            try VisibleTilesQuery.parsingCommonForm(ArraySlice(Array("x=1&y=2&width=3&height=4&scale=0.5&margin=1&wrap=x".utf8)))
                == VisibleTilesQuery(viewport: Viewport(x: 1, y: 2, width: 3, height: 4), scale: 0.5, margin: 1, wrapX: true))
    }

    /// The fast decimal reader gives, bit for bit, what `Double(_:)` (strtod) gives for every
    /// plain decimal it takes, and declines the forms it does not read exactly.
    @Test func plainDecimalsAreReadExactlyAsStrtodReadsThem() {
        var rng = SplitMix(seed: 1511)
        var taken = 0
        for _ in 0..<200_000 {
            let integerDigits = Int.random(in: 1...17, using: &rng)
            let fractionDigits = Int.random(in: 0...24, using: &rng)
            var text = ["", "-", "+"].randomElement(using: &rng)!
            let zeros = Int.random(in: 0...3, using: &rng)
            text += String(repeating: "0", count: min(zeros, integerDigits - 1))
            for _ in 0..<(integerDigits - min(zeros, integerDigits - 1)) { text += String(Int.random(in: 0...9, using: &rng)) }
            if fractionDigits > 0 {
                text += "."
                for _ in 0..<fractionDigits { text += String(Int.random(in: 0...9, using: &rng)) }
            }
            let want = Double(text)!
            if let got = plainDecimal(ArraySlice(Array(text.utf8))) {
                #expect(got.bitPattern == want.bitPattern, "\(text): \(got) but strtod \(want)")
                taken += 1
            }
        }
        #expect(taken > 50_000)
        for text in ["0.1", "-0", "2000", "0.3000000000004", "123456789012345", "0.0000000000000000000001"] {
            #expect(plainDecimal(ArraySlice(Array(text.utf8)))?.bitPattern == Double(text)!.bitPattern, "\(text)")
        }
        #expect(plainDecimal(ArraySlice(Array("-0".utf8)))?.sign == .minus)
        for text in ["", "-", "5.", ".5", "1e3", "1.5e-3", "1..2", "1-2", "1234567890123456", "0.30000000000000004", "nan", "0x10"] {
            #expect(plainDecimal(ArraySlice(Array(text.utf8))) == nil, "\(text)")
        }
    }

    /// Viewports of many rows, where the nearest-first order comes from a heap of rows
    /// rather than a scan (`VisibleTilesPlan.rowsScannedLinearly`): the same order as the
    /// brute force, ties included (aligned viewports on square tiles tie often).
    @Test(arguments: [5, 6])
    func manyRowsAgreeWithBruteForce(seed: UInt64) throws {
        var rng = SplitMix(seed: seed * 7919)
        var heapAnswers = 0
        for _ in 0..<60 {
            let T = [16, 17].randomElement(using: &rng)!
            let W = Int.random(in: 1...200, using: &rng), H = Int.random(in: 600...3000, using: &rng)
            let g = try PyramidGeometry(width: W, height: H, tileSize: T)
            let aligned = Bool.random(using: &rng)
            let x = aligned ? Double(T * Int.random(in: -3...3, using: &rng)) : Double.random(in: -100...300, using: &rng)
            let y = aligned ? Double(T * Int.random(in: -5...10, using: &rng)) : Double.random(in: -500...500, using: &rng)
            let w = aligned ? Double(T * Int.random(in: 1...6, using: &rng)) : Double.random(in: 0.5...300, using: &rng)
            // Aligned: the centre on a tile's edge or middle, so rows above and below it tie.
            let h =
                aligned
                ? Double(T * Int.random(in: (H / T / 2)...(2 * H / T), using: &rng))
                : Double.random(in: Double(H) / 2...Double(2 * H), using: &rng)
            let margin = Int.random(in: 0...2, using: &rng)
            let wrap = Bool.random(using: &rng)
            let q = try VisibleTilesQuery(viewport: Viewport(x: x, y: y, width: w, height: h), scale: 1, margin: margin, wrapX: wrap)
            let got = try g.visibleTiles(for: q, maximumTiles: 1_000_000)
            let want = BruteForceVisible.answer(
                width: W, height: H, tileSize: T, x: x, y: y, w: w, h: h, scale: 1, margin: margin, wrap: wrap)
            let rows = Set(got.tiles.map(\.coordinate.row)).count
            if rows > VisibleTilesPlan.rowsScannedLinearly { heapAnswers += 1 }
            let same = got.tiles == want.tiles
            #expect(same, "\(W)×\(H)/\(T) viewport \(x),\(y) \(w)×\(h) margin \(margin) wrap \(wrap): \(rows) rows")
        }
        #expect(heapAnswers >= 40, "only \(heapAnswers) answers had more than \(VisibleTilesPlan.rowsScannedLinearly) rows")
    }

    /// Hundreds of random viewports, with margin and wrap, against the brute force.
    @Test(arguments: [1, 2, 3, 4])
    func agreesWithBruteForce(seed: UInt64) throws {
        var rng = SplitMix(seed: seed * 7919)
        for _ in 0..<300 {
            let T = [16, 64, 100, 256].randomElement(using: &rng)!
            let limit = T == 16 ? 400 : 3000
            let W = Int.random(in: 1...limit, using: &rng)
            let H = Bool.random(using: &rng) ? Int.random(in: 1...limit, using: &rng) : Int.random(in: 1...40, using: &rng)
            let g = try PyramidGeometry(width: W, height: H, tileSize: T)
            // Half the viewports on tile boundaries, half anywhere.
            let aligned = Bool.random(using: &rng)
            func coordinate(_ extent: Int) -> Double {
                let v = Double.random(in: -1.5 * Double(extent)...2.5 * Double(extent), using: &rng)
                return aligned ? (v / Double(T)).rounded() * Double(T) : v
            }
            let x = coordinate(W), y = coordinate(H)
            let w = aligned ? Double(T * Int.random(in: 1...8, using: &rng)) : Double.random(in: 0.5...(2.5 * Double(W) + 1), using: &rng)
            let h = aligned ? Double(T * Int.random(in: 1...8, using: &rng)) : Double.random(in: 0.5...(2.5 * Double(H) + 1), using: &rng)
            let scale = pow(2, Double.random(in: -10...1.5, using: &rng))
            let margin = Int.random(in: 0...3, using: &rng)
            let wrap = Bool.random(using: &rng)
            let q = try VisibleTilesQuery(viewport: Viewport(x: x, y: y, width: w, height: h), scale: scale, margin: margin, wrapX: wrap)
            let got = try g.visibleTiles(for: q, maximumTiles: 1_000_000)
            let want = BruteForceVisible.answer(
                width: W, height: H, tileSize: T, x: x, y: y, w: w, h: h,
                scale: scale, margin: margin, wrap: wrap)
            #expect(got.level.level == want.level, "level for \(W)×\(H)/\(T) scale \(scale)")
            #expect(got.tiles == want.tiles, "\(W)×\(H)/\(T) viewport \(x),\(y) \(w)×\(h) scale \(scale) margin \(margin) wrap \(wrap)")
        }
    }
}
