import Foundation
import Testing
import TilerCore
@testable import TilerImaging

@Suite struct PyramidCutterTests {
    /// Cuts a random image with an odd tile size (so strips hold an odd number of rows and
    /// row pairs straddle strips) and checks every level, tile by tile, against the whole
    /// image shrunk in one go.
    @Test(arguments: [(71, 45, 3, 17), (40, 97, 2, 16), (33, 1, 4, 16), (16, 16, 1, 16)])
    func everyLevelEqualsTheWholeImageShrunk(width: Int, height: Int, bands: Int, tileSize: Int) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tiler-cutter-\(getpid())-\(width)x\(height)")
        try? FileManager.default.removeItem(at: folder)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        var seed: UInt32 = 12345
        let source = (0..<(width * height * bands)).map { _ -> UInt8 in
            seed = seed &* 1_664_525 &+ 1_013_904_223
            return UInt8(truncatingIfNeeded: seed >> 24)
        }
        let input = folder.appendingPathComponent("source.png").path
        try Data(PNGEncoder().encode(source, width: width, height: height, bands: bands)).write(to: URL(fileURLWithPath: input))

        let cutter = PyramidCutter(root: folder.appendingPathComponent("out"), options: CutOptions(tileSize: tileSize, format: .png))
        let result = try cutter.cut(input, id: PyramidID("p")!)
        let geometry = try PyramidGeometry(width: width, height: height, tileSize: tileSize)
        #expect(result.manifest.levels == geometry.levels)
        #expect(result.tiles == geometry.levels.map(\.tileCount).reduce(0, +))

        var level = (pixels: source, width: width, height: height)
        for z in geometry.levelNumbers.reversed() {
            let l = geometry.level(z)
            #expect((level.width, level.height) == (l.width, l.height))
            for row in 0..<l.rows {
                for column in 0..<l.columns {
                    let tile = TileCoordinate(level: z, row: row, column: column)
                    let rect = geometry.rectInLevel(tile)
                    let image = try VipsImageHandle.openSequential(
                        path: result.output.appendingPathComponent(result.manifest.tilePath(tile)).path)
                    #expect((image.width, image.height, image.bands) == (rect.width, rect.height, bands), "\(tile)")
                    var expected: [UInt8] = []
                    for y in rect.y..<rect.maxY {
                        let start = (y * level.width + rect.x) * bands
                        expected += level.pixels[start..<(start + rect.width * bands)]
                    }
                    #expect(try image.pixels() == expected, "tile \(tile)")
                }
            }
            if z > 0 { level = AreaAverage.shrink(level.pixels, width: level.width, height: level.height, bands: bands) }
        }
        let files = try FileManager.default.subpathsOfDirectory(atPath: result.output.path)
            .filter { !$0.hasSuffix("/") && $0.contains(".") }
        #expect(files.count == result.tiles + 2)  // tiles, thumbnail.png, pyramid.json
    }
}
