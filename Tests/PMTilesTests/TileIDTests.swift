import PMTiles
import Testing
import TilerTestSupport

/// Hilbert tile ids against the values in PMTiles' spec and Go tests, and round trips.
struct TileIDTests {
    @Test func knownValues() {
        #expect(TileID.id(zoom: 0, x: 0, y: 0) == 0)
        #expect(TileID.id(zoom: 1, x: 0, y: 0) == 1)
        #expect(TileID.id(zoom: 1, x: 0, y: 1) == 2)
        #expect(TileID.id(zoom: 1, x: 1, y: 1) == 3)
        #expect(TileID.id(zoom: 1, x: 1, y: 0) == 4)
        #expect(TileID.id(zoom: 2, x: 0, y: 0) == 5)
        #expect(TileID.id(zoom: 12, x: 3423, y: 1763) == 19_078_479)
        let t = TileID.tile(19_078_479)
        #expect(t?.zoom == 12 && t?.x == 3423 && t?.y == 1763)
    }

    @Test func firstIDOfEachZoom() {
        var sum: UInt64 = 0
        for z in 0...TileID.maximumZoom {
            #expect(TileID.firstID(ofZoom: z) == sum)
            #expect(TileID.id(zoom: z, x: 0, y: 0) == sum)
            sum &+= UInt64(1) << UInt64(2 * z)
        }
    }

    /// Every tile of zooms 0...7 round-trips, and the ids of a zoom are exactly
    /// firstID..<firstID + 4^z: a bijection.
    @Test func everyTileOfSmallZoomsRoundTrips() {
        for z in 0...7 {
            let n = UInt64(1) << UInt64(z)
            var seen = Set<UInt64>()
            for x in 0..<n {
                for y in 0..<n {
                    let id = TileID.id(zoom: z, x: x, y: y)
                    seen.insert(id)
                    let back = TileID.tile(id)
                    #expect(back?.zoom == z && back?.x == x && back?.y == y)
                }
            }
            let first = TileID.firstID(ofZoom: z)
            #expect(seen.count == Int(n * n) && seen.min() == first && seen.max() == first + n * n - 1)
        }
    }

    /// Consecutive ids on one zoom are neighbouring tiles (the Hilbert curve's defining
    /// property).
    @Test func consecutiveIDsAreNeighbours() {
        let z = 6
        let first = TileID.firstID(ofZoom: z)
        for d in 0..<(UInt64(1) << 12) - 1 {
            let a = TileID.tile(first + d)!, b = TileID.tile(first + d + 1)!
            let distance = (a.x > b.x ? a.x - b.x : b.x - a.x) + (a.y > b.y ? a.y - b.y : b.y - a.y)
            #expect(distance == 1, "ids \(first + d) and \(first + d + 1)")
        }
    }

    @Test func extremesOfEveryZoom() {
        var generator = SplitMix(seed: 12)
        for z in 0...TileID.maximumZoom {
            let dim = (UInt64(1) << UInt64(z)) - 1
            var points = [(0, 0), (dim, 0), (0, dim), (dim, dim)].map { (UInt64($0.0), UInt64($0.1)) }
            for _ in 0..<50 { points.append((generator.next() & dim, generator.next() & dim)) }
            for (x, y) in points {
                let back = TileID.tile(TileID.id(zoom: z, x: x, y: y))
                #expect(back?.zoom == z && back?.x == x && back?.y == y, "\(z)/\(x)/\(y)")
            }
        }
        #expect(TileID.tile(TileID.firstID(ofZoom: TileID.maximumZoom + 1)) == nil)
        #expect(TileID.tile(UInt64.max) == nil)
    }

    /// `forEachTile` visits exactly a level's rectangle, each tile once, ids strictly
    /// increasing: checked against listing and sorting, over generated rectangles
    /// (thin, square, odd, full) of zooms 0...9.
    @Test func forEachTileWalksARectangleInTileIDOrder() {
        var generator = SplitMix(seed: 21)
        var cases: [(Int, UInt64, UInt64)] = [(0, 1, 1), (3, 8, 8), (9, 512, 1), (9, 1, 512), (5, 17, 3)]
        for _ in 0..<60 {
            let z = Int.random(in: 0...9, using: &generator)
            let n = UInt64(1) << UInt64(z)
            cases.append((z, UInt64.random(in: 1...n, using: &generator), UInt64.random(in: 1...n, using: &generator)))
        }
        for (z, columns, rows) in cases {
            var visited: [UInt64] = []
            TileID.forEachTile(zoom: z, columns: columns, rows: rows) { x, y in
                #expect(x < columns && y < rows)
                visited.append(TileID.id(zoom: z, x: x, y: y))
            }
            var expected: [UInt64] = []
            for x in 0..<columns { for y in 0..<rows { expected.append(TileID.id(zoom: z, x: x, y: y)) } }
            #expect(visited == expected.sorted(), "zoom \(z), \(columns)×\(rows)")
        }
    }

    /// A thrown error stops the walk and reaches the caller.
    @Test func forEachTileStopsAtAnError() {
        struct Stop: Error {}
        var count = 0
        #expect(throws: Stop.self) {
            try TileID.forEachTile(zoom: 4, columns: 16, rows: 16) { (_, _) throws(Stop) in
                count += 1
                if count == 10 { throw Stop() }
            }
        }
        #expect(count == 10)
    }
}
