import Foundation
import Testing
import TilerCore
import TilerTestSupport
@testable import TilerServer

/// An independent, deliberately naive reading of the contract's "Visible tiles" section:
/// test every tile of the chosen level (and of every repetition under wrap) for a
/// positive-area intersection with the viewport, grow by the margin, sort nearest first.
struct BruteForceVisible {
    struct Tile: Equatable, CustomStringConvertible {
        var level, row, column, x, y, width, height: Int
        var description: String { "(\(level)/\(row)/\(column) x=\(x) y=\(y) \(width)×\(height))" }
    }
    var level = 0, scale = 0.0, columns = 0, rows = 0
    var tiles: [Tile] = []

    init(
        width W: Int, height H: Int, tileSize T: Int,
        x: Double, y: Double, w: Double, h: Double, scale s: Double, margin: Int, wrap: Bool
    ) {
        var maxLevel = 0
        while T * (1 << maxLevel) < max(W, H) { maxLevel += 1 }
        level = maxLevel
        for z in 0...maxLevel where 1.0 / Double(1 << (maxLevel - z)) >= s { level = z; break }
        let f = 1 << (maxLevel - level)
        scale = 1.0 / Double(f)
        let wz = (W + f - 1) / f, hz = (H + f - 1) / f
        columns = (wz + T - 1) / T
        rows = (hz + T - 1) / T
        let span = T * f

        func overlaps(_ a0: Double, _ a1: Double, _ b0: Double, _ b1: Double) -> Bool { min(a1, b1) - max(a0, b0) > 0 }
        // Rows never wrap.
        let visibleRows = (0..<rows).filter { r in
            overlaps(Double(r * span), Double(min((r + 1) * span, H)), y, y + h)
        }
        // Columns as global indices g = k·columns + column over the repeated plane.
        var visibleColumns: [Int] = []
        let repetitions = wrap ? Int((x / Double(W)).rounded(.down)) - 1...Int(((x + w) / Double(W)).rounded(.down)) + 1 : 0...0
        for k in repetitions {
            for c in 0..<columns {
                let left = k * W + c * span
                let right = k * W + min((c + 1) * span, W)
                if overlaps(Double(left), Double(right), x, x + w) { visibleColumns.append(k * columns + c) }
            }
        }
        guard let r0 = visibleRows.min(), let r1 = visibleRows.max(),
            let g0 = visibleColumns.min(), let g1 = visibleColumns.max()
        else { return }
        let rowRange = max(0, r0 - margin)...min(rows - 1, r1 + margin)
        let columnRange = wrap ? (g0 - margin)...(g1 + margin) : max(0, g0 - margin)...min(columns - 1, g1 + margin)
        let cx = x + w / 2, cy = y + h / 2
        var scored: [(Double, Tile)] = []
        for r in rowRange {
            for g in columnRange {
                let k = Int((Double(g) / Double(columns)).rounded(.down))
                let c = g - k * columns
                let tx = k * W + c * span, ty = r * span
                let tw = min((c + 1) * span, W) - c * span, th = min((r + 1) * span, H) - ty
                let dx = Double(tx) + Double(tw) / 2 - cx
                let dy = Double(ty) + Double(th) / 2 - cy
                scored.append((dx * dx + dy * dy, Tile(level: level, row: r, column: c, x: tx, y: ty, width: tw, height: th)))
            }
        }
        scored.sort { a, b in
            if a.0 != b.0 { return a.0 < b.0 }
            if a.1.row != b.1.row { return a.1.row < b.1.row }
            if a.1.column != b.1.column { return a.1.column < b.1.column }
            return a.1.x < b.1.x
        }
        tiles = scored.map(\.1)
    }
}

@Suite struct VisibleRouteTests {
    static let pyramids: [(id: String, width: Int, height: Int, tileSize: Int)] = [
        ("big", 20000, 20000, 256), ("small", 1000, 700, 256), ("tall", 300, 5000, 256),
        ("odd", 12345, 678, 100), ("dot", 1, 1, 256), ("pano", 70000, 30000, 512), ("fine", 257, 300, 16),
    ]

    /// Over cut pyramids only: these have tiles of 16, 100 and 512 pixels, and a `--sources`
    /// server makes 256-pixel tiles (as `tiler cut` by default). The answers of sources are
    /// checked by `theContractsExample` and `badQueriesAre400WithAMessage`.
    @Test(arguments: RootKind.cutPyramids) func answersMatchABruteForceOverRandomViewports(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        for p in Self.pyramids { try root.addPyramid(p.id, width: p.width, height: p.height, tileSize: p.tileSize, tilesThrough: -1) }
        let seed = UInt64.random(in: 0...UInt64.max)
        var rng = SplitMix(seed: seed)
        try withTileServer(root, as: kind) { port throws in
            let c = try RawHTTPClient(port: port)
            var compared = 0, tooMany = 0, empty = 0, wrapped = 0
            for i in 0..<700 {
                let p = Self.pyramids[i % Self.pyramids.count]
                let W = Double(p.width), H = Double(p.height)
                // Mix of fractional, integral and tile-aligned coordinates.
                func coordinate(_ extent: Double) -> Double {
                    switch Int.random(in: 0..<4, using: &rng) {
                    case 0: return Double(Int.random(in: -Int(extent)...Int(2 * extent), using: &rng))
                    case 1: return Double(Int.random(in: -4...8, using: &rng) * p.tileSize * (1 << Int.random(in: 0...3, using: &rng)))
                    default: return Double.random(in: -extent...(2 * extent), using: &rng)
                    }
                }
                func size(_ extent: Double) -> Double {
                    Bool.random(using: &rng)
                        ? Double(Int.random(in: 1...Int(max(1, extent)), using: &rng))
                        : Double.random(in: 0.5...(extent * 3), using: &rng)
                }
                let x = coordinate(W), y = coordinate(H), w = size(W), h = size(H)
                let scale =
                    Bool.random(using: &rng)
                    ? 1.0 / Double(1 << Int.random(in: 0...9, using: &rng))
                    : pow(2, Double.random(in: -10...1.5, using: &rng))
                let margin = Int.random(in: 0...3, using: &rng) == 0 ? Int.random(in: 1...3, using: &rng) : 0
                let wrap = Int.random(in: 0...2, using: &rng) == 0
                var query = "x=\(x)&y=\(y)&width=\(w)&height=\(h)&scale=\(scale)"
                if margin > 0 { query += "&margin=\(margin)" }
                if wrap { query += "&wrap=x"; wrapped += 1 }
                let expected = BruteForceVisible(
                    width: p.width, height: p.height, tileSize: p.tileSize,
                    x: x, y: y, w: w, h: h, scale: scale, margin: margin, wrap: wrap)
                try c.request("/images/\(p.id)/visible?\(query)")
                let r = try c.readResponse()
                let context = "seed \(seed) #\(i) \(p.id) \(query)"
                if expected.tiles.count > 4096 {
                    #expect(r.status == 400, "\(context): expected 'too many tiles'")
                    tooMany += 1
                    continue
                }
                guard r.status == 200 else {
                    Issue.record("\(context): status \(r.status) \(r.text) but brute force lists \(expected.tiles.count) tiles")
                    continue
                }
                let j = r.json
                #expect(j["id"] as? String == p.id)
                #expect(j["level"] as? Int == expected.level, "\(context)")
                #expect(j["scale"] as? Double == expected.scale, "\(context)")
                #expect(j["tileSize"] as? Int == p.tileSize)
                #expect(j["columns"] as? Int == expected.columns && j["rows"] as? Int == expected.rows, "\(context)")
                let tiles = (j["tiles"] as? [[String: Any]] ?? []).map { t in
                    BruteForceVisible.Tile(
                        level: t["level"] as? Int ?? -1, row: t["row"] as? Int ?? -1,
                        column: t["column"] as? Int ?? -1, x: t["x"] as? Int ?? -1,
                        y: t["y"] as? Int ?? -1, width: t["width"] as? Int ?? -1,
                        height: t["height"] as? Int ?? -1)
                }
                if tiles != expected.tiles {
                    let firstDiff = (0..<min(tiles.count, expected.tiles.count)).first { tiles[$0] != expected.tiles[$0] }
                    Issue.record(
                        "\(context): server lists \(tiles.count) tiles, brute force \(expected.tiles.count); first difference at \(firstDiff.map(String.init) ?? "end"): server \(firstDiff.map { "\(tiles[$0])" } ?? "-") vs \(firstDiff.map { "\(expected.tiles[$0])" } ?? "-")"
                    )
                }
                let urls = (j["tiles"] as? [[String: Any]] ?? []).map { $0["url"] as? String ?? "" }
                #expect(urls == expected.tiles.map { "/images/\(p.id)/tiles/\($0.level)/\($0.row)/\($0.column).png" })
                if expected.tiles.isEmpty { empty += 1 }
                compared += 1
            }
            #expect(compared > 500, "only \(compared) viewports compared (\(tooMany) too many, \(empty) empty)")
            #expect(wrapped > 100)
        }
    }

    @Test(arguments: RootKind.allCases) func theContractsExample(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try root.addPyramid("big", width: 20000, height: 20000, tilesThrough: -1)
        try withTileServer(root, as: kind) { port throws in
            // Level 5 (scale 0.25) of a 20000² image: tile 3/4 covers x 4096, y 3072, 1024².
            let r = try fetch(port, "/images/big/visible?x=4100&y=3100&width=1000&height=1000&scale=0.25")
            #expect(r.status == 200)
            #expect(
                r.text.hasPrefix(
                    #"{"id":"big","level":5,"scale":0.25,"tileSize":256,"columns":20,"rows":20,"tiles":[{"level":5,"row":3,"column":4,"url":"/images/big/tiles/5/3/4.png","x":4096,"y":3072,"width":1024,"height":1024}"#
                ))
        }
    }

    @Test(arguments: RootKind.allCases) func badQueriesAre400WithAMessage(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try root.addPyramid("big", width: 20000, height: 20000, tilesThrough: -1)
        try withTileServer(root, as: kind, { $0.maximumVisibleTiles = 100 }) { port throws in
            let base = "x=0&y=0&width=100&height=100&scale=1"
            for query in [
                "", "x=0&y=0&width=100&height=100", "x=nan&y=0&width=1&height=1&scale=1",
                "x=inf&y=0&width=1&height=1&scale=1", "x=0&y=0&width=0&height=1&scale=1",
                "x=0&y=0&width=1&height=-1&scale=1", "x=0&y=0&width=1&height=1&scale=0",
                "x=0x10&y=0&width=1&height=1&scale=1", "\(base)&margin=-1", "\(base)&margin=1.5",
                "\(base)&wrap=y", "\(base)&x=5", "x=0&y=0&width=20000&height=20000&scale=1",
                "x=%zz&y=0&width=1&height=1&scale=1",
            ] {
                let r = try fetch(port, "/images/big/visible?\(query)")
                #expect(r.status == 400, "\(query)")
                #expect(r.errorMessage?.isEmpty == false, "\(query)")
            }
            #expect(try fetch(port, "/images/big/visible?\(base)").status == 200)
            #expect(try fetch(port, "/images/nope/visible?\(base)").status == 404)
            let tooMany = try fetch(port, "/images/big/visible?x=0&y=0&width=20000&height=20000&scale=1")
            #expect(tooMany.errorMessage?.contains("limit of 100") == true)
        }
    }
}
