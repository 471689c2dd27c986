import Foundation
import Testing
import TilerTestSupport
@testable import TilerCore

/// Image and tile sizes that stress edges: tiny, powers of two and their neighbours, odd,
/// extreme aspect ratios, and random ones.
func generatedSizes(count: Int, seed: UInt64) -> [(w: Int, h: Int, t: Int)] {
    var rng = SplitMix(seed: seed)
    let tiles = [16, 17, 100, 128, 254, 255, 256, 257, 512, 1000, 1024]
    var sizes: [(Int, Int, Int)] = []
    for t in [256, 255, 257, 16] {
        for w in [1, 2, 3, t - 1, t, t + 1, 2 * t - 1, 2 * t, 2 * t + 1, 3001, 2999, 20000, 65537] {
            for h in [1, 2, t, t + 1, 1999, 4097] { sizes.append((w, h, t)) }
        }
    }
    while sizes.count < count {
        let t = tiles.randomElement(using: &rng)!
        let magnitude = Int.random(in: 0...20, using: &rng)
        let w = Int.random(in: 1...(1 << magnitude), using: &rng)
        let h = Bool.random(using: &rng) ? w : Int.random(in: 1...(1 << Int.random(in: 0...20, using: &rng)), using: &rng)
        sizes.append((w, h, t))
    }
    return sizes
}

@Suite struct PyramidGeometryTests {
    /// The grids made once say what the geometry says, for every level and edge: rows and
    /// columns just inside and just past each level, negative ones, and levels past
    /// either end.
    @Test func tileGridsHoldTheTilesTheGeometryHolds() throws {
        for (w, h, t) in generatedSizes(count: 400, seed: 12) {
            let g = try PyramidGeometry(width: w, height: h, tileSize: t)
            let grids = TileGrids(g)
            for level in -1...(g.maxLevel + 1) {
                let l = g.contains(level: level) ? g.level(level) : nil
                let rows = [-1, 0, 1] + (l.map { [$0.rows - 1, $0.rows, $0.rows + 1] } ?? [])
                let columns = [-1, 0, 1] + (l.map { [$0.columns - 1, $0.columns, $0.columns + 1] } ?? [])
                for row in rows {
                    for column in columns {
                        let tile = TileCoordinate(level: level, row: row, column: column)
                        #expect(grids.contains(tile) == g.contains(tile), "\(w)x\(h)/\(t) \(tile)")
                    }
                }
            }
        }
    }

    @Test func contractExample() throws {
        let g = try PyramidGeometry(width: 20000, height: 20000, tileSize: 256)
        #expect(g.maxLevel == 7)
        #expect(g.level(0).width == 157 && g.level(0).height == 157)
        #expect(g.level(7).columns == 79 && g.level(7).rows == 79)
        #expect(g.level(7).width == 20000)
    }

    @Test func smallAndExactSizes() throws {
        #expect(try PyramidGeometry(width: 1, height: 1).maxLevel == 0)
        #expect(try PyramidGeometry(width: 256, height: 256).maxLevel == 0)
        #expect(try PyramidGeometry(width: 257, height: 1).maxLevel == 1)
        #expect(try PyramidGeometry(width: 512, height: 3).maxLevel == 1)
        #expect(try PyramidGeometry(width: 513, height: 3).maxLevel == 2)
        let thin = try PyramidGeometry(width: 2999, height: 1)
        #expect(thin.maxLevel == 4)
        #expect(thin.levels.map(\.width) == [188, 375, 750, 1500, 2999])
        #expect(thin.levels.allSatisfy { $0.height == 1 && $0.rows == 1 })
    }

    @Test func rejectsBadSizes() {
        #expect(throws: GeometryError.self) { try PyramidGeometry(width: 0, height: 5) }
        #expect(throws: GeometryError.self) { try PyramidGeometry(width: 5, height: -1) }
        #expect(throws: GeometryError.self) { try PyramidGeometry(width: 5, height: 5, tileSize: 0) }
        #expect(throws: GeometryError.self) { try PyramidGeometry(width: 5, height: 5, tileSize: 1 << 20) }
    }

    /// The contract's formulas, computed here with floating point as written, against the
    /// integer implementation; and the tiling invariants: each level's tiles cover it
    /// exactly without overlap, level 0 is one tile, sizes halve (rounding up) per level.
    @Test func invariantsOverGeneratedSizes() throws {
        let sizes = generatedSizes(count: 5000, seed: 42)
        for (w, h, t) in sizes {
            let g = try PyramidGeometry(width: w, height: h, tileSize: t)
            let expectedMax = max(0, Int(ceil(log2(Double(max(w, h)) / Double(t)))))
            #expect(g.maxLevel == expectedMax, "maxLevel for \(w)×\(h)/\(t)")
            #expect(g.level(0).columns == 1 && g.level(0).rows == 1, "level 0 of \(w)×\(h)/\(t) is one tile")
            #expect(g.level(0).width <= t && g.level(0).height <= t)
            #expect(g.level(g.maxLevel).width == w && g.level(g.maxLevel).height == h)
            if g.maxLevel > 0 {
                // maxLevel is minimal: level 1 no longer fits in one tile.
                #expect(max(g.level(1).width, g.level(1).height) > t)
            }
            for z in g.levelNumbers {
                let l = g.level(z)
                let f = 1 << (g.maxLevel - z)
                #expect(l.width == Int(ceil(Double(w) / Double(f))))
                #expect(l.height == Int(ceil(Double(h) / Double(f))))
                #expect(l.columns == Int(ceil(Double(l.width) / Double(t))))
                #expect(l.rows == Int(ceil(Double(l.height) / Double(t))))
                #expect(g.scale(of: z) == 1 / Double(f))
                if z < g.maxLevel {
                    let finer = g.level(z + 1)
                    #expect(
                        l.width == (finer.width + 1) / 2 && l.height == (finer.height + 1) / 2,
                        "2×2 area averaging of level \(z + 1) gives level \(z)")
                }
            }
        }
    }

    /// Tiles partition their level exactly, and their full-resolution rectangles partition
    /// the image: checked by summing areas and checking adjacency on a sample of sizes
    /// small enough to enumerate.
    @Test func tilesPartitionEachLevel() throws {
        let sizes = generatedSizes(count: 1200, seed: 7).filter { $0.w * $0.h / ($0.t * $0.t) < 5000 }
        #expect(sizes.count > 500)
        for (w, h, t) in sizes {
            let g = try PyramidGeometry(width: w, height: h, tileSize: t)
            for z in g.levelNumbers {
                let l = g.level(z)
                var levelArea = 0, imageArea = 0
                for row in 0..<l.rows {
                    for column in 0..<l.columns {
                        let tile = TileCoordinate(level: z, row: row, column: column)
                        #expect(g.contains(tile))
                        let r = g.rectInLevel(tile)
                        let i = g.rectInImage(tile)
                        #expect(r.width >= 1 && r.height >= 1 && r.width <= t && r.height <= t)
                        #expect(i.width >= 1 && i.height >= 1)
                        // Neighbours abut: no gap, no overlap.
                        if column > 0 {
                            let left = g.rectInLevel(TileCoordinate(level: z, row: row, column: column - 1))
                            #expect(left.maxX == r.x && left.width == t)
                            #expect(g.rectInImage(TileCoordinate(level: z, row: row, column: column - 1)).maxX == i.x)
                        }
                        if row > 0 {
                            let above = g.rectInLevel(TileCoordinate(level: z, row: row - 1, column: column))
                            #expect(above.maxY == r.y && above.height == t)
                        }
                        if column == l.columns - 1 { #expect(r.maxX == l.width && i.maxX == w) }
                        if row == l.rows - 1 { #expect(r.maxY == l.height && i.maxY == h) }
                        levelArea += r.area
                        imageArea += i.area
                    }
                }
                #expect(levelArea == l.width * l.height)
                #expect(imageArea == w * h)
                #expect(!g.contains(TileCoordinate(level: z, row: l.rows, column: 0)))
                #expect(!g.contains(TileCoordinate(level: z, row: 0, column: l.columns)))
                #expect(!g.contains(TileCoordinate(level: z, row: -1, column: 0)))
                #expect(!g.contains(TileCoordinate(level: z, row: 0, column: -1)))
                #expect(!g.contains(TileCoordinate(level: z, row: l.rows - 1, column: l.columns)))
                #expect(!g.contains(TileCoordinate(level: z, row: l.rows, column: l.columns - 1)))
            }
            #expect(!g.contains(TileCoordinate(level: g.maxLevel + 1, row: 0, column: 0)))
            #expect(!g.contains(TileCoordinate(level: -1, row: 0, column: 0)))
        }
    }

    @Test func levelForScale() throws {
        let g = try PyramidGeometry(width: 20000, height: 20000)
        #expect(g.level(forScale: 1) == 7)
        #expect(g.level(forScale: 4) == 7)
        #expect(g.level(forScale: 0.5) == 6)
        #expect(g.level(forScale: 0.26) == 6)
        #expect(g.level(forScale: 0.25) == 5)
        #expect(g.level(forScale: 0.0001) == 0)
        var rng = SplitMix(seed: 3)
        for _ in 0..<2000 {
            let s = Double.random(in: 0.0001...2, using: &rng)
            let z = g.level(forScale: s)
            if z < g.maxLevel { #expect(g.scale(of: z) >= s) }
            if z > 0 { #expect(g.scale(of: z - 1) < s) }
        }
    }
}
