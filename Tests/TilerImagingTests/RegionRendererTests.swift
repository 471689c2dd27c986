import Foundation
import Testing
import TilerCore
import TilerTestSupport
@testable import TilerImaging

/// The IIIF validator's test image: 1000 × 1000, a 10 × 10 grid of 100 px squares of
/// known colours, shipped in `Tests/Fixtures/` (a copy of `../shared/fixtures/`, so that a
/// checkout anywhere has it).
enum ValidatorFixture {
    static let id = "67352ccc-d1b0-11e1-89ae-279075081939"
    static var path: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/\(id).png").path
    }

    /// The colour of square (column, row), as the validator lists them.
    static func colour(column: Int, row: Int) -> [Double] {
        let c = colours[column][row]
        return [Double(c.0), Double(c.1), Double(c.2)]
    }

    static let colours: [[(Int, Int, Int)]] = [
        [
            (61, 170, 126), (61, 107, 178), (82, 85, 234), (164, 122, 110), (129, 226, 88), (91, 37, 121), (138, 128, 42), (6, 85, 234),
            (121, 109, 204), (65, 246, 84),
        ],
        [
            (195, 133, 120), (171, 43, 102), (118, 45, 130), (242, 105, 171), (5, 85, 105), (113, 58, 41), (223, 69, 3), (45, 79, 140),
            (35, 117, 248), (121, 156, 184),
        ],
        [
            (168, 92, 163), (28, 91, 143), (86, 41, 173), (111, 230, 29), (174, 189, 7), (18, 139, 88), (93, 168, 128), (35, 2, 14),
            (204, 105, 137), (18, 86, 128),
        ],
        [
            (107, 55, 178), (251, 40, 184), (47, 36, 139), (2, 127, 170), (224, 12, 114), (133, 67, 108), (239, 174, 209), (85, 29, 156),
            (8, 55, 188), (240, 125, 7),
        ],
        [
            (112, 167, 30), (166, 63, 161), (232, 227, 23), (74, 80, 135), (79, 97, 47), (145, 160, 80), (45, 160, 79), (12, 54, 215),
            (203, 83, 70), (78, 28, 46),
        ],
        [
            (102, 193, 63), (225, 55, 91), (107, 194, 147), (167, 24, 95), (249, 214, 96), (167, 34, 136), (53, 254, 209), (172, 222, 21),
            (153, 77, 51), (137, 39, 183),
        ],
        [
            (159, 182, 192), (128, 252, 173), (148, 162, 90), (192, 165, 115), (154, 102, 2), (107, 237, 62), (111, 236, 219),
            (129, 113, 172), (239, 204, 166), (60, 96, 37),
        ],
        [
            (72, 172, 227), (119, 51, 100), (209, 85, 165), (87, 172, 159), (188, 42, 162), (99, 3, 54), (7, 42, 37), (105, 155, 100),
            (38, 220, 240), (98, 46, 2),
        ],
        [
            (18, 223, 145), (189, 121, 17), (88, 3, 210), (181, 16, 43), (189, 39, 244), (123, 147, 116), (246, 148, 214), (223, 177, 199),
            (77, 18, 136), (235, 36, 21),
        ],
        [
            (146, 137, 176), (84, 248, 55), (61, 144, 79), (110, 251, 49), (43, 105, 132), (165, 131, 55), (60, 23, 225), (147, 197, 226),
            (80, 67, 104), (161, 119, 182),
        ],
    ]
}

/// Cuts the fixture once (PNG tiles) into a temporary root shared by this suite.
private let fixturePyramid: Result<(dir: String, manifest: PyramidManifest), Error> = Result {
    let root = try ProcessFolders.fresh(named: "render")
    let result = try PyramidCutter(root: root, options: CutOptions(format: .png, force: true))
        .cut(ValidatorFixture.path, id: PyramidID(ValidatorFixture.id)!)
    return (result.output.path, result.manifest)
}

@Suite struct RegionRendererTests {
    func renderer() throws -> RegionRenderer {
        let p = try fixturePyramid.get()
        return try RegionRenderer(manifest: p.manifest) { (tile: TileCoordinate) throws(RenderError) -> [UInt8] in
            let path = p.dir + "/" + p.manifest.tilePath(tile)
            guard let data = FileManager.default.contents(atPath: path) else { throw .missingTile(path) }
            return Array(data)
        }
    }

    func render(_ iiif: String) throws -> DecodedImage {
        let r = try renderer()
        guard case let .image(request) = try IIIFRoute.parse(path: Substring("x/" + iiif)) else { throw IIIFError.notFound(iiif) }
        let plan = try IIIFImagePlan(request, geometry: r.geometry)
        return try DecodedImage(encoded: try r.render(plan))
    }

    func expectColour(
        _ image: DecodedImage, x: Int, y: Int, size: Int, column: Int, row: Int, tolerance: Double = 6,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let got = image.mean(x: x, y: y, width: size, height: size).prefix(3)
        let want = ValidatorFixture.colour(column: column, row: row)
        #expect(
            zip(got, want).allSatisfy { abs($0 - $1) < tolerance }, "\(Array(got)) vs \(want) at \(x),\(y)",
            sourceLocation: sourceLocation)
    }

    @Test func fullResolutionIsTheSourceExactly() throws {
        let source = try DecodedImage(encoded: Array(try Data(contentsOf: URL(fileURLWithPath: ValidatorFixture.path))))
        let full = try render("full/max/0/default.png")
        #expect(full.width == 1000 && full.height == 1000 && full.bands == 3)
        #expect(full.pixels == source.pixels)
        // A region across four tiles, at full size.
        let region = try render("200,200,200,200/max/0/default.png")
        #expect(region.width == 200 && region.height == 200)
        for (x, y) in [(0, 0), (55, 56), (199, 199), (100, 3)] {
            #expect(region[x, y] == source[200 + x, 200 + y])
        }
    }

    @Test func regionsAndSizesLandOnTheRightSquares() throws {
        // The validator's region-by-pixels probes: inner 74 px of square (x, y).
        for (x, y) in [(0, 0), (3, 7), (9, 9), (5, 2)] {
            let img = try render("\(x * 100 + 13),\(y * 100 + 13),74,74/max/0/default.jpg")
            #expect(img.width == 74 && img.height == 74)
            expectColour(img, x: 5, y: 5, size: 64, column: x, row: y)
        }
        // Scaled whole image from a coarser level: square (x, y) is at x·s/10.
        let small = try render("full/300,/0/default.png")
        #expect(small.width == 300 && small.height == 300)
        expectColour(small, x: 5, y: 5, size: 20, column: 0, row: 0)
        expectColour(small, x: 275, y: 185, size: 20, column: 9, row: 6)
        // Distorted size, upscaled.
        let big = try render("0,0,100,100/^300,150/0/default.png")
        #expect(big.width == 300 && big.height == 150)
        expectColour(big, x: 20, y: 20, size: 100, column: 0, row: 0)
    }

    @Test func rotationAndMirroring() throws {
        let r90 = try render("full/200,/90/default.png")
        #expect(r90.width == 200 && r90.height == 200)
        // Clockwise: the top-left square comes from the bottom-left of the source.
        expectColour(r90, x: 4, y: 4, size: 12, column: 0, row: 9)
        expectColour(r90, x: 184, y: 4, size: 12, column: 0, row: 0)
        let r180 = try render("full/200,/180/default.png")
        expectColour(r180, x: 4, y: 4, size: 12, column: 9, row: 9)
        let r270 = try render("full/200,/270/default.png")
        expectColour(r270, x: 4, y: 4, size: 12, column: 9, row: 0)
        let mirrored = try render("full/200,/!0/default.png")
        expectColour(mirrored, x: 4, y: 4, size: 12, column: 9, row: 0)
        let mirrored90 = try render("full/200,/!90/default.png")
        expectColour(mirrored90, x: 4, y: 4, size: 12, column: 9, row: 9)
        // Arbitrary angles: the canvas holds the rotated image, corners transparent in PNG.
        let r45 = try render("full/200,/45/default.png")
        #expect(abs(r45.width - 283) <= 2 && abs(r45.height - 283) <= 2 && r45.bands == 4)
        #expect(r45[1, 1].last == 0)
        // Source point (550, 550), inside square (5, 5), is 50·√2 px below the centre once
        // turned 45° clockwise: at 1/5 scale, 14 px.
        expectColour(r45, x: r45.width / 2 - 2, y: r45.height / 2 + 14 - 2, size: 4, column: 5, row: 5, tolerance: 12)
    }

    @Test func qualitiesAndFormats() throws {
        let gray = try render("full/100,/0/gray.png")
        #expect(gray.bands == 1)
        let bitonal = try render("full/100,/0/bitonal.png")
        #expect(bitonal.bands == 1 && bitonal.pixels.allSatisfy { $0 == 0 || $0 == 255 })
        #expect(Set(bitonal.pixels).count == 2)
        let color = try render("full/100,/0/color.jpg")
        #expect(color.bands == 3)
        let webp = try render("full/120,/0/default.webp")
        #expect(webp.width == 120 && webp.height == 120)
        expectColour(webp, x: 2, y: 2, size: 8, column: 0, row: 0, tolerance: 10)
    }

    @Test func deepZoomLevelsBelowThePyramid() throws {
        let r = try renderer()
        let dz = DeepZoomGeometry(pyramid: r.geometry)
        for l in 0..<dz.levelsBelowPyramid {
            guard case let .shrunkLevelZero(w, h)? = dz.source(level: l, column: 0, row: 0) else {
                Issue.record("level \(l) should be shrunk")
                continue
            }
            let img = try DecodedImage(encoded: try r.render(r.shrunkLevelZeroJob(width: w, height: h)))
            #expect(img.width == w && img.height == h && img.width == dz.level(l).width)
        }
        let eight = try DecodedImage(encoded: try r.render(r.shrunkLevelZeroJob(width: 125, height: 125)))
        expectColour(eight, x: 2, y: 2, size: 8, column: 0, row: 0)
    }

    @Test func badJobsAreRefused() throws {
        let r = try renderer()
        #expect(throws: RenderError.self) {
            _ = try r.render(
                RegionRenderer.Job(level: 9, rect: PixelRect(x: 0, y: 0, width: 1, height: 1), width: 1, height: 1, format: .png))
        }
        #expect(throws: RenderError.self) {
            _ = try r.render(
                RegionRenderer.Job(level: 0, rect: PixelRect(x: 200, y: 0, width: 100, height: 1), width: 1, height: 1, format: .png))
        }
        #expect(throws: RenderError.self) { _ = try DecodedImage(encoded: [1, 2, 3]) }
    }
}
