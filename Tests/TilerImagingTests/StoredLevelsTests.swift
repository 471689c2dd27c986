import Testing
import TilerCore

@testable import TilerImaging

/// Which level of a pyramid a level a file stores is: sizes and orientations only, no file.
@Suite struct StoredLevelsTests {
    private func levels(_ width: Int, _ height: Int, orientation: Int = 1) throws -> StoredLevels {
        let o = ExifOrientation(orientation)
        let upright = o.upright(width: width, height: height)
        let geometry = try PyramidGeometry(width: upright.width, height: upright.height, tileSize: 256)
        return StoredLevels(geometry: geometry, orientation: o, width: width, height: height)
    }

    @Test func halvingsAreTheLevelsBelowFullResolution() throws {
        let l = try levels(8000, 6000)
        #expect(l.match("shrink", 2, width: 4000, height: 3000)?.k == 1)
        #expect(l.match("shrink", 8, width: 1000, height: 750)?.k == 3)
        // Not a halving of the file: no level.
        #expect(l.match("page", 1, width: 3000, height: 3000) == nil)
    }

    /// TIFF pyramids and shrink-on-load round down where the geometry rounds up: a level
    /// one pixel short is the level, its last row and column repeated to fill it.
    @Test func aLevelOnePixelShortIsTheLevelItFills() throws {
        let l = try levels(8001, 6001)
        let geometry = l.geometry
        let match = try #require(l.match("subifd", 0, width: 4000, height: 3000))
        #expect(match.k == 1)
        #expect(match.level.levelWidth == geometry.level(geometry.maxLevel - 1).width)
        #expect(match.level.levelWidth == 4001)
        #expect(match.level.levelHeight == 3001)
        // Two pixels short is another size.
        #expect(l.match("subifd", 0, width: 3999, height: 3000) == nil)
    }

    /// Turned a quarter (orientation 6: x stays, y reverses after the swap), the stored
    /// sizes are compared across; an odd height along the reversed axis shifts the grid.
    @Test func aTurnedFileMatchesAcrossAndOnlyOnAnAlignedGrid() throws {
        let even = try levels(6000, 8000, orientation: 6)
        let match = try #require(even.match("page", 1, width: 3000, height: 4000))
        #expect(match.k == 1)
        #expect(match.level.levelWidth == 3000 && match.level.levelHeight == 4000)
        let odd = try levels(6000, 8001, orientation: 6)
        #expect(odd.match("page", 1, width: 3000, height: 4000) == nil)
        // Orientation 2 mirrors x only: an odd height does not matter, an odd width does.
        #expect(try levels(8000, 6001, orientation: 2).match("page", 1, width: 4000, height: 3000)?.k == 1)
        #expect(try levels(8001, 6000, orientation: 2).match("page", 1, width: 4000, height: 3000) == nil)
    }

    @Test func smallStoredLevelsAreMadeFromTheLevelAbove() throws {
        let l = try levels(8192, 8192)
        var stored: [Int: StoredLevel] = [
            0: StoredLevel(option: nil, value: 0, width: 8192, height: 8192, levelWidth: 8192, levelHeight: 8192)
        ]
        for k in 1...4 {
            stored[k] = try #require(l.match("page", k, width: 8192 >> k, height: 8192 >> k)?.level)
        }
        let plan = l.plan(stored)
        let maxLevel = l.geometry.maxLevel
        #expect(plan.count == maxLevel + 1)
        #expect(plan[maxLevel]?.option == nil && plan[maxLevel] != nil)  // the file itself
        #expect(plan[maxLevel - 3]?.value == 3)  // 1024 px: four tiles, used
        #expect(plan[maxLevel - 4] == nil)  // 512 px: fewer than four tiles, made
        #expect(plan[maxLevel - 5] == nil)  // never stored
        #expect(StoredLevels.smallestStoredSide(tileSize: 256) == 1024)
    }

    @Test func orientationsOutsideTheEightAreUpright() {
        #expect(ExifOrientation(0).value == 1)
        #expect(ExifOrientation(9).value == 1)
        #expect(ExifOrientation(8).swapsAxes && ExifOrientation(8).reversesX && !ExifOrientation(8).reversesY)
        #expect(ExifOrientation(3).needsRandomAccess && !ExifOrientation(2).needsRandomAccess)
    }
}
