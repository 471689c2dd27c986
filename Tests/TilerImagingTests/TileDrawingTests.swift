import Foundation
import Synchronization
import Testing
import TilerCore
import TilerTestSupport
@testable import TilerImaging

/// IIIF drawings made from a JPEG pyramid's tiles without libvips (`TileDrawing`), checked
/// against libvips itself: the same drawing through libvips' path (`usesTileDrawing`
/// off) differs by at most 2 levels on average and 6 in any column or row (tile seams run
/// along them), and against `vips crop` of the full-resolution source then `vips resize`
/// to the asked size (turned with `vips rot`/`flip`, greyed with `vips colourspace b-w`)
/// it is at least as near as libvips' path is; for every level choice (DCT scaling
/// included), odd sizes and regions touching the image's edges.
@Suite(.serialized) struct TileDrawingTests {
    static let width = 1537
    static let height = 1101

    /// The source (a PNG) and its JPEG pyramid, made once for the suite.
    static let fixture: Result<(source: String, renderer: RegionRenderer, dir: String), Error> = Result {
        let root = try ProcessFolders.fresh(named: "drawing")
        let source = root.appendingPathComponent("source.png").path
        let pixels = photo(width: width, height: height)
        try Data(try PNGEncoder().encode(pixels, width: width, height: height, bands: 3)).write(to: URL(fileURLWithPath: source))
        let result = try PyramidCutter(root: root.appendingPathComponent("pyramids"), options: CutOptions(format: .jpeg, force: true))
            .cut(source, id: PyramidID("photo")!)
        let dir = result.output.path
        let manifest = result.manifest
        let renderer = try RegionRenderer(manifest: manifest) { (tile: TileCoordinate) throws(RenderError) -> [UInt8] in
            try tileBytes(tile, of: manifest, in: dir)
        }
        return (source, renderer, dir)
    }

    /// A tile of the suite's pyramid.
    static func fixtureTile(_ tile: TileCoordinate) throws(RenderError) -> [UInt8] {
        guard case let .success(fixture) = fixture else { throw .missingTile("the fixture") }
        return try tileBytes(tile, of: fixture.renderer.manifest, in: fixture.dir)
    }

    /// A tile of the pyramid in `dir`.
    static func tileBytes(_ tile: TileCoordinate, of manifest: PyramidManifest, in dir: String) throws(RenderError) -> [UInt8] {
        let path = dir + "/" + manifest.tilePath(tile)
        guard let data = FileManager.default.contents(atPath: path) else { throw .missingTile(path) }
        return Array(data)
    }

    /// Smooth shading, waves of several frequencies (the finer ones fainter, as in a
    /// photograph), hard edges and a little grain: what a photograph asks of a resampler,
    /// without detail at the edge of what the output can show, on which no two
    /// resamplers agree.
    static func photo(width: Int, height: Int) -> [UInt8] {
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for y in 0..<height {
            for x in 0..<width {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                let grain = Int(state % 7) - 3
                let fx = Double(x), fy = Double(y)
                let edge = ((x / 97) + (y / 83)) % 2 == 0 ? 35 : -35
                for band in 0..<3 {
                    let shade = 60 + (x + y * (band + 1)) * 120 / (width + height * 3)
                    let wave = 40 * sin(fx / (53 + 9 * Double(band)) + fy / 71) + 12 * cos(fy / (11 + Double(band)) - fx / 37)
                    pixels[(y * width + x) * 3 + band] = UInt8(clamping: shade + Int(wave) + edge + grain)
                }
            }
        }
        return pixels
    }

    /// The pixels of a IIIF request drawn by the renderer, with or without `TileDrawing`.
    func drawn(_ iiif: String, fast: Bool = true) throws -> DecodedImage {
        var renderer = try Self.fixture.get().renderer
        renderer.usesTileDrawing = fast
        guard case let .image(request) = try IIIFRoute.parse(path: Substring("x/" + iiif)) else { throw IIIFError.notFound(iiif) }
        let plan = try IIIFImagePlan(request, geometry: renderer.geometry)
        return try DecodedImage(encoded: try renderer.render(plan))
    }

    /// libvips' own drawing of `region` (full-resolution pixels) at `width` × `height`,
    /// then `after` (more vips commands on the file, e.g. a turn).
    func reference(
        x: Int, y: Int, w: Int, h: Int, width: Int, height: Int, after: [[String]] = []
    ) throws -> DecodedImage {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let source = try Self.fixture.get().source
        try runVips(["crop", source, scratch.path("crop.v"), "\(x)", "\(y)", "\(w)", "\(h)"])
        try runVips([
            "resize", scratch.path("crop.v"), scratch.path("step0.v"), "\(Double(width) / Double(w))",
            "--vscale", "\(Double(height) / Double(h))",
        ])
        var current = scratch.path("step0.v")
        for (i, command) in after.enumerated() {
            let next = scratch.path("step\(i + 1).v")
            try runVips([command[0], current, next] + command.dropFirst())
            current = next
        }
        try runVips(["pngsave", current, scratch.path("reference.png")])
        return try DecodedImage(encoded: Array(try Data(contentsOf: URL(fileURLWithPath: scratch.path("reference.png")))))
    }

    /// The mean absolute difference over the area both images cover (libvips' resize may
    /// round a side one pixel differently), and the worst mean of any one column or row.
    func difference(_ a: DecodedImage, _ b: DecodedImage) -> (mean: Double, worstLine: Double) {
        #expect(abs(a.width - b.width) <= 1 && abs(a.height - b.height) <= 1, "\(a.width)×\(a.height) vs \(b.width)×\(b.height)")
        #expect(a.bands == b.bands)
        let w = min(a.width, b.width), h = min(a.height, b.height), n = min(a.bands, b.bands)
        var total = 0
        var columns = [Int](repeating: 0, count: w), rows = [Int](repeating: 0, count: h)
        for y in 0..<h {
            for x in 0..<w {
                var d = 0
                for band in 0..<n {
                    d += abs(Int(a.pixels[(y * a.width + x) * a.bands + band]) - Int(b.pixels[(y * b.width + x) * b.bands + band]))
                }
                total += d
                columns[x] += d
                rows[y] += d
            }
        }
        let worstColumn = Double(columns.max() ?? 0) / Double(h * n)
        let worstRow = Double(rows.max() ?? 0) / Double(w * n)
        return (Double(total) / Double(w * h * n), max(worstColumn, worstRow))
    }

    /// Regions and sizes: whole image, corners and edges, odd sizes, every level choice
    /// (the level's region from just above the output to eight times it: DCT scaling
    /// 1/2, 1/4 and 1/8).
    @Test(arguments: [
        (0, 0, 1537, 1101, 700, 501),
        (0, 0, 1537, 1101, 301, 215),
        (0, 0, 1537, 1101, 97, 69),
        (0, 0, 1537, 1101, 23, 17),
        (100, 50, 1000, 700, 613, 429),
        (1037, 601, 500, 500, 300, 300),
        (1037, 601, 500, 500, 251, 251),
        (0, 601, 777, 500, 389, 250),
        (1, 1, 1535, 1099, 511, 366),
        (255, 255, 514, 514, 257, 257),
        (256, 0, 1281, 1101, 640, 550),
        (700, 300, 129, 131, 61, 67),
        (1400, 1000, 137, 101, 130, 96),
        (300, 200, 800, 600, 100, 75),
        (0, 0, 4000, 4000, 0, 0),  // a region past the edges: clipped, like IIIF
    ])
    func regionsAndSizesMatchLibvips(x: Int, y: Int, w: Int, h: Int, width: Int, height: Int) throws {
        let clippedW = min(w, Self.width - x), clippedH = min(h, Self.height - y)
        let (outW, outH) = width == 0 ? (clippedW / 4, clippedH / 4) : (width, height)
        let iiif = "\(x),\(y),\(w),\(h)/\(outW),\(outH)/0/default.png"
        let fast = try drawn(iiif)
        #expect(fast.width == outW && fast.height == outH && fast.bands == 3)
        let viaLibvips = try drawn(iiif, fast: false)
        // The same drawing as libvips' path makes from the same level's tiles, with no
        // seam (a column or row off) where covering tiles meet.
        let (mean, worst) = difference(fast, viaLibvips)
        #expect(mean <= 2, "\(iiif): mean difference from libvips' path \(mean)")
        #expect(worst <= 6, "\(iiif): worst column or row \(worst)")
        // At least as near as libvips' path to libvips' resize of the full-resolution source.
        let expected = try reference(x: x, y: y, w: clippedW, h: clippedH, width: outW, height: outH)
        let ours = difference(fast, expected).mean, theirs = difference(viaLibvips, expected).mean
        #expect(ours <= theirs + 0.25, "\(iiif): \(ours) from the source's resize, libvips' path \(theirs)")
    }

    /// Quarter turns and mirroring, as libvips turns the same drawing.
    @Test(arguments: [
        ("0", [[String]]()),
        ("90", [["rot", "d90"]]),
        ("180", [["rot", "d180"]]),
        ("270", [["rot", "d270"]]),
        ("!0", [["flip", "horizontal"]]),
        ("!90", [["flip", "horizontal"], ["rot", "d90"]]),
        ("!270", [["flip", "horizontal"], ["rot", "d270"]]),
    ])
    func turnsMatchLibvips(rotation: String, after: [[String]]) throws {
        let fast = try drawn("200,100,900,600/301,201/\(rotation)/default.png")
        let expected = try reference(x: 200, y: 100, w: 900, h: 600, width: 301, height: 201, after: after)
        #expect(fast.width == expected.width && fast.height == expected.height)
        let (mean, _) = difference(fast, expected)
        #expect(mean <= 2, "rotation \(rotation): mean difference \(mean)")
    }

    /// Grey as libvips' `colourspace b-w`; bitonal as its grey at or above 128: all but a
    /// few pixels near the threshold agree.
    @Test func greyAndBitonalMatchLibvips() throws {
        let grey = try drawn("100,100,1200,900/401,301/0/gray.png")
        #expect(grey.bands == 1)
        let expectedGrey = try reference(
            x: 100, y: 100, w: 1200, h: 900, width: 401, height: 301, after: [["colourspace", "b-w"]])
        #expect(difference(grey, expectedGrey).mean <= 2)

        let bitonal = try drawn("100,100,1200,900/401,301/0/bitonal.png")
        #expect(bitonal.pixels.allSatisfy { $0 == 0 || $0 == 255 })
        let agreeing = zip(bitonal.pixels, expectedGrey.pixels).filter { ($0 == 255) == ($1 >= 128) }.count
        #expect(Double(agreeing) / Double(bitonal.pixels.count) >= 0.97)
    }

    /// Every output format the server writes decodes to the same drawing.
    @Test(arguments: ["jpg", "webp"]) func lossyFormatsAreTheSameDrawing(format: String) throws {
        let png = try drawn("300,200,800,600/401,301/0/default.png")
        let lossy = try drawn("300,200,800,600/401,301/0/default.\(format)")
        #expect(difference(png, lossy).mean <= 3)
    }

    /// A padded pyramid (`cut --pad`, for Leaflet) is drawn by libvips' path: its edge
    /// tiles hold the padding in the JPEG blocks that also hold the image's last pixels,
    /// and DCT scaling mixed it into them (13 levels off in an edge line of a DeepZoom
    /// level below the pyramid; at first such tiles even failed as damaged, which cost the
    /// README's OpenSeadragon page its small levels: `ReadmePagesTests`).
    @Test func paddedPyramidsAreDrawnByLibvips() throws {
        let root = try ProcessFolders.fresh(named: "drawing-padded")
        let source = root.appendingPathComponent("padded.png").path
        let (width, height) = (701, 499)
        try Data(try PNGEncoder().encode(Self.photo(width: width, height: height), width: width, height: height, bands: 3))
            .write(to: URL(fileURLWithPath: source))
        let result = try PyramidCutter(
            root: root.appendingPathComponent("pyramids"), options: CutOptions(format: .jpeg, force: true, pad: true)
        ).cut(source, id: PyramidID("photo")!)
        let dir = result.output.path
        let manifest = result.manifest
        var padded = try RegionRenderer(manifest: manifest) { (tile: TileCoordinate) throws(RenderError) -> [UInt8] in
            guard let data = FileManager.default.contents(atPath: dir + "/" + manifest.tilePath(tile)) else {
                throw .missingTile(tile.description)
            }
            return Array(data)
        }
        var jobs = [(300, 213), (37, 26), (1, 1)].map { padded.shrunkLevelZeroJob(width: $0, height: $1) }
        jobs.append(
            RegionRenderer.Job(
                level: padded.geometry.levelNumbers.last!, rect: PixelRect(x: 400, y: 200, width: 301, height: 299),
                width: 150, height: 149, format: .png))
        for job in jobs {
            padded.usesTileDrawing = true
            let drawn = try padded.render(job)
            padded.usesTileDrawing = false
            #expect(try padded.render(job) == drawn, "\(job.width)×\(job.height) of level \(job.level)")
        }
    }

    /// PNG and WebP pyramids take the same path (their tiles decoded by libpng and libwebp),
    /// grey PNG ones too, and draw what libvips' path draws from the same tiles; a pyramid
    /// with transparency is drawn by libvips' path, byte for byte.
    @Test(arguments: [(TileFormat.png, 3, false), (.webp, 3, false), (.png, 1, false), (.png, 4, true), (.webp, 4, true)])
    func pngAndWebPPyramidsTakeTheSamePath(format: TileFormat, bands: Int, transparent: Bool) throws {
        let root = try ProcessFolders.fresh(named: "drawing-\(format.rawValue)-\(bands)")
        let source = root.appendingPathComponent("source.png").path
        let (width, height) = (901, 677)
        let rgb = Self.photo(width: width, height: height)
        var pixels: [UInt8] = []
        for i in 0..<(width * height) {
            switch bands {
            case 1: pixels.append(rgb[i * 3 + 1])
            case 4: pixels += rgb[(i * 3)..<(i * 3 + 3)] + [UInt8(truncatingIfNeeded: 100 + i % 150)]
            default: pixels += rgb[(i * 3)..<(i * 3 + 3)]
            }
        }
        try Data(try PNGEncoder().encode(pixels, width: width, height: height, bands: bands)).write(to: URL(fileURLWithPath: source))
        let result = try PyramidCutter(root: root.appendingPathComponent("pyramids"), options: CutOptions(format: format, force: true))
            .cut(source, id: PyramidID("photo")!)
        let dir = result.output.path, manifest = result.manifest
        let reads = Mutex(0)
        var renderer = try RegionRenderer(manifest: manifest) { (tile: TileCoordinate) throws(RenderError) -> [UInt8] in
            reads.withLock { $0 += 1 }
            return try Self.tileBytes(tile, of: manifest, in: dir)
        }
        renderer.decodedTiles = DecodedTiles(cache: PixelCache(capacity: 64 << 20), owner: 1)
        for iiif in ["0,0,901,677/450,/0/default.png", "100,50,600,500/301,/90/default.png", "600,400,301,277/150,/0/gray.png"] {
            guard case let .image(request) = try IIIFRoute.parse(path: Substring("x/" + iiif)) else { return }
            let plan = try IIIFImagePlan(request, geometry: renderer.geometry)
            renderer.usesTileDrawing = true
            let before = reads.withLock { $0 }
            let fast = try DecodedImage(encoded: try renderer.render(plan))
            let fastReads = reads.withLock { $0 } - before
            let again = try renderer.render(plan)
            let againReads = reads.withLock { $0 } - before - fastReads
            renderer.usesTileDrawing = false
            let viaLibvips = try DecodedImage(encoded: try renderer.render(plan))
            if transparent {
                // Drawn by libvips (after the path found the first tile transparent).
                #expect(fast.pixels == viaLibvips.pixels && fast.bands == viaLibvips.bands, "\(iiif)")
            } else {
                let (mean, worst) = difference(fast, viaLibvips)
                #expect(mean <= 2 && worst <= 6, "\(format) \(bands) bands, \(iiif): mean \(mean), worst line \(worst)")
                // Drawn here: the tiles it decoded are kept, and drawing it again reads none.
                // (The first drawing reads tiles; later ones may find theirs kept already.)
                #expect(
                    (fastReads > 0 || !iiif.hasPrefix("0,0,")) && againReads == 0, "\(iiif): \(fastReads), then \(againReads) tiles read")
                #expect(try DecodedImage(encoded: again).pixels == fast.pixels)
            }
        }
    }

    /// Tiles decoded for one drawing are kept (`DecodedTiles`) and the next drawing of the
    /// same area takes them instead of reading and decoding them again; the drawings are
    /// byte for byte those made without keeping anything, at every DCT scale.
    @Test func keptDecodedTilesMakeTheSameDrawings() throws {
        let good = try Self.fixture.get().renderer
        let reads = Mutex(0)
        let counting = try RegionRenderer(manifest: good.manifest) { (tile: TileCoordinate) throws(RenderError) -> [UInt8] in
            reads.withLock { $0 += 1 }
            return try Self.fixtureTile(tile)
        }
        let cache = PixelCache(capacity: 64 << 20)
        func render(_ renderer: RegionRenderer, _ iiif: String) throws -> (bytes: [UInt8], reads: Int) {
            guard case let .image(request) = try IIIFRoute.parse(path: Substring("x/" + iiif)) else { throw IIIFError.notFound(iiif) }
            let before = reads.withLock { $0 }
            let bytes = try renderer.render(try IIIFImagePlan(request, geometry: renderer.geometry))
            return (bytes, reads.withLock { $0 } - before)
        }
        // Full resolution (1/1), then the same area smaller (1/2, 1/4, 1/8 of the tiles).
        for iiif in [
            "100,50,700,600/350,300/0/default.jpg", "100,50,700,600/max/0/default.jpg",
            "0,0,1537,1101/190,/0/default.jpg", "0,0,1537,1101/95,/0/gray.png", "0,0,1537,1101/190,/90/default.jpg",
        ] {
            let plain = try render(counting, iiif)
            var keeping = counting  // each drawing with a cache of its own, first empty
            keeping.decodedTiles = DecodedTiles(cache: PixelCache(capacity: 64 << 20), owner: 1)
            let first = try render(keeping, iiif)
            let again = try render(keeping, iiif)
            #expect(first.bytes == plain.bytes, "\(iiif): the first drawing that keeps its tiles differs")
            #expect(again.bytes == plain.bytes, "\(iiif): the drawing from kept tiles differs")
            #expect(first.reads == plain.reads && plain.reads > 0)
            #expect(again.reads == 0, "\(iiif): \(again.reads) tiles read again")
        }
        // One shared cache: a drawing overlapping another reads only the tiles it adds;
        // another owner (another pyramid, or this one re-cut) finds none of them.
        var shared = counting
        shared.decodedTiles = DecodedTiles(cache: cache, owner: 1)
        let left = try render(shared, "0,0,600,600/max/0/default.jpg")
        let overlapping = try render(shared, "256,0,600,600/max/0/default.jpg")
        let whole = try render(counting, "256,0,600,600/max/0/default.jpg")
        #expect(overlapping.bytes == whole.bytes && left.reads == 9 && whole.reads == 9 && overlapping.reads == 3)
        var other = counting
        other.decodedTiles = DecodedTiles(cache: cache, owner: 2)
        #expect(try render(other, "0,0,600,600/max/0/default.jpg").reads == 9)
    }

    /// A damaged tile fails the drawing (no grey patch in its place).
    @Test func aDamagedTileIsAnError() throws {
        let good = try Self.fixture.get().renderer
        let broken = try RegionRenderer(manifest: good.manifest) { (tile: TileCoordinate) throws(RenderError) -> [UInt8] in
            Array("\u{FF}\u{D8}\u{FF}\u{E0} not a jpeg".utf8)
        }
        guard case let .image(request) = try IIIFRoute.parse(path: "x/0,0,600,600/300,300/0/default.jpg") else { return }
        let plan = try IIIFImagePlan(request, geometry: broken.geometry)
        #expect(throws: RenderError.self) { try broken.render(plan) }
    }
}
