import Foundation
import Testing
import TilerCore
import TilerTestSupport

/// `tiler cut` end to end: the built binary, inputs made with the `vips` command line,
/// pyramids checked against `PyramidGeometry` and pixels against libvips' own `shrink`.
@Suite(.serialized) struct CutCommandTests {
    // MARK: inputs

    /// A smooth-plus-noisy 8-bit image with 1 (grey), 2, 3 (RGB) or 4 (RGBA) bands, saved
    /// losslessly as PNG. Seeded, so a size always gets the same pixels: at the smallest
    /// levels one rounding step is the whole error budget, and a test must not pass or fail
    /// by the draw.
    static func makeImage(_ path: String, width: Int, height: Int, bands: Int, scratch: Scratch) throws {
        let perlin = scratch.path("perlin-\(width)x\(height).v")
        let noise = scratch.path("noise-\(width)x\(height).v")
        let noise8 = scratch.path("noise8-\(width)x\(height).v")
        let seed = "\((width &* 7919 &+ height &* 104_729 &+ bands) % 1_000_003)"
        try vips("perlin", perlin, "\(width)", "\(height)", "--cell-size", "48", "--uchar", "--seed", seed)
        try vips("gaussnoise", noise, "\(width)", "\(height)", "--sigma", "40", "--mean", "128", "--seed", seed)
        try vips("cast", noise, noise8, "uchar")
        let planes = [perlin, noise8, perlin, noise8].prefix(bands)
        if bands == 1 {
            try vips("copy", perlin, path)
        } else {
            let joined = scratch.path("joined-\(width)x\(height)-\(bands).v")
            try vips("bandjoin", planes.joined(separator: " "), joined)
            try vips("copy", joined, path)
        }
    }

    // MARK: checks

    /// Reads and checks `ROOT/ID`: the manifest against the geometry, exactly the expected
    /// files, every tile's size and bands, the thumbnail, and no hidden leftovers in ROOT.
    @discardableResult
    static func checkPyramid(
        root: URL, id: String, width: Int, height: Int, bands: Int,
        format: TileFormat = .png, tileSize: Int = 256, thumbnailSize: Int = 256
    ) throws -> PyramidManifest {
        let folder = root.appendingPathComponent(id)
        let manifest = try JSONDecoder().decode(PyramidManifest.self, from: Data(contentsOf: folder.appendingPathComponent("pyramid.json")))
        let geometry = try PyramidGeometry(width: width, height: height, tileSize: tileSize)
        #expect(manifest.id.rawValue == id)
        #expect(manifest.width == width && manifest.height == height && manifest.tileSize == tileSize)
        #expect(manifest.maxLevel == geometry.maxLevel)
        #expect(manifest.levels == geometry.levels)
        #expect(manifest.format == format)
        #expect(manifest.bands == bands)
        #expect(manifest.formatVersion == 1, "an unpadded pyramid stays readable by version-1 readers")
        #expect(try manifest.geometry() == geometry)

        // Exactly the tiles, the thumbnail and the manifest.
        var expected: Set<String> = ["pyramid.json", manifest.thumbnail.file]
        var tiles: [(path: String, rect: PixelRect)] = []
        for level in geometry.levels {
            for row in 0..<level.rows {
                for column in 0..<level.columns {
                    let tile = TileCoordinate(level: level.level, row: row, column: column)
                    expected.insert(manifest.tilePath(tile))
                    tiles.append((manifest.tilePath(tile), geometry.rectInLevel(tile)))
                }
            }
        }
        let enumerator = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.isRegularFileKey])!
        var found: Set<String> = []
        for case let url as URL in enumerator where (try url.resourceValues(forKeys: [.isRegularFileKey])).isRegularFile == true {
            found.insert(String(url.path.dropFirst(folder.path.count + 1)))
        }
        #expect(
            found == expected,
            "unexpected: \(found.subtracting(expected).sorted().prefix(5)), missing: \(expected.subtracting(found).sorted().prefix(5))")

        // Every tile's size and bands, read back by libvips (one vipsheader for all).
        let headers = try run(
            "vipsheader",
            tiles.map { folder.appendingPathComponent($0.path).path }
                + [folder.appendingPathComponent(manifest.thumbnail.file).path])
        #expect(headers.status == 0, "vipsheader: \(headers.stderr)")
        let lines = headers.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == tiles.count + 1)
        for (line, tile) in zip(lines, tiles) {
            #expect(line.contains(": \(tile.rect.width)x\(tile.rect.height) uchar, \(bands) band"), "\(tile.path): \(line)")
        }
        let longest = max(width, height)
        let thumbLongest = min(thumbnailSize, longest)
        #expect(max(manifest.thumbnail.width, manifest.thumbnail.height) == thumbLongest)
        if let last = lines.last {
            #expect(last.contains(": \(manifest.thumbnail.width)x\(manifest.thumbnail.height) uchar, \(bands) band"), "thumbnail: \(last)")
        }
        let hidden = try FileManager.default.contentsOfDirectory(atPath: root.path).filter { $0.hasPrefix(".") }
        #expect(hidden.isEmpty, "leftovers in ROOT: \(hidden)")
        return manifest
    }

    /// One level of a cut pyramid, its tiles joined back into one raster by libvips.
    static func level(_ z: Int, of manifest: PyramidManifest, in folder: URL, scratch: Scratch) throws -> Raster {
        let level = manifest.levels[z]
        var files: [String] = []
        for row in 0..<level.rows {
            for column in 0..<level.columns {
                files.append(folder.appendingPathComponent(manifest.tilePath(TileCoordinate(level: z, row: row, column: column))).path)
            }
        }
        let joined = scratch.path("level-\(z)-joined.v"), cropped = scratch.path("level-\(z).v")
        try vips("arrayjoin", files.joined(separator: " "), joined, "--across", "\(level.columns)")
        try vips("crop", joined, cropped, "0", "0", "\(level.width)", "\(level.height)")
        return try Raster(vFile: cropped)
    }

    /// The independent reference for level `z`: libvips' box `shrink` of the source by `f`
    /// (by the whole side where the side is shorter than `f`: one pixel, the mean of all).
    static func reference(_ source: String, downscale f: Int, width: Int, height: Int, scratch: Scratch) throws -> Raster {
        let out = scratch.path("reference-\(f).v")
        try vips("shrink", source, out, "\(min(f, width))", "\(min(f, height))")
        return try Raster(vFile: out)
    }

    /// Full resolution exactly equal to the source; levels maxLevel−1, maxLevel−2 and 0
    /// within a mean absolute error of 1 per band of libvips' shrink.
    static func checkPixels(_ manifest: PyramidManifest, root: URL, source: String, scratch: Scratch) throws {
        let folder = root.appendingPathComponent(manifest.id.rawValue)
        let original = try Raster.read(source, scratch: scratch)
        let full = try level(manifest.maxLevel, of: manifest, in: folder, scratch: scratch)
        #expect((full.width, full.height, full.bands) == (original.width, original.height, original.bands))
        #expect(full.pixels == original.pixels, "full-resolution tiles differ from the source")
        let sourceV = scratch.path("source.v")
        try vips("copy", source, sourceV)
        for z in Set([manifest.maxLevel - 1, manifest.maxLevel - 2, 0]) where z >= 0 && z < manifest.maxLevel {
            let ours = try level(z, of: manifest, in: folder, scratch: scratch)
            let theirs = try reference(
                sourceV, downscale: manifest.levels[z].downscale,
                width: manifest.width, height: manifest.height, scratch: scratch)
            let mae = ours.meanAbsoluteError(to: theirs)
            #expect(mae < 1.0, "level \(z): mean absolute error \(mae) against vips shrink")
        }
    }

    // MARK: tests

    @Test(arguments: [(3001, 1999, 3), (700, 500, 4), (600, 300, 1), (333, 257, 2)])
    func cutsPNGPyramidsWithExactPixels(width: Int, height: Int, bands: Int) throws {
        let scratch = try Scratch("png\(width)x\(height)x\(bands)")
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try Self.makeImage(input, width: width, height: height, bands: bands, scratch: scratch)
        let root = scratch.url.appendingPathComponent("tiles")
        // No --quiet: stderr is a pipe, not a terminal, so there is no progress display,
        // only the result line on stdout.
        let result = try run(try tilerBinary(), ["cut", input, "--output", root.path, "--format", "png"])
        #expect(result.status == 0, "tiler cut failed: \(result.stderr)")
        #expect(result.stdout.hasPrefix("photo.png → \(root.path)/photo: \(width)×\(height), png, "), "stdout: \(result.stdout)")
        #expect(
            result.stdout.split(separator: "\n").count == 1 && result.stderr.isEmpty, "stdout: \(result.stdout) stderr: \(result.stderr)")
        let manifest = try Self.checkPyramid(root: root, id: "photo", width: width, height: height, bands: bands)
        try Self.checkPixels(manifest, root: root, source: input, scratch: scratch)
    }

    @Test(arguments: [(1, 1), (256, 256), (2999, 1), (1, 300), (257, 256)])
    func cutsEdgeSizes(width: Int, height: Int) throws {
        let scratch = try Scratch("edge\(width)x\(height)")
        defer { scratch.cleanUp() }
        let input = scratch.path("edge.png")
        try Self.makeImage(input, width: width, height: height, bands: 3, scratch: scratch)
        let root = scratch.url.appendingPathComponent("tiles")
        let result = try run(try tilerBinary(), ["cut", input, "-o", root.path, "--name", "e", "--format", "png", "--quiet"])
        #expect(result.status == 0, "tiler cut failed: \(result.stderr)")
        let manifest = try Self.checkPyramid(root: root, id: "e", width: width, height: height, bands: 3)
        try Self.checkPixels(manifest, root: root, source: input, scratch: scratch)
    }

    /// An id ending in `.dzi` would hide the DeepZoom descriptor `/images/ID.dzi` of the
    /// id without it: refused, named or derived, and the other inputs are still cut.
    @Test func idsEndingInDziAreRefused() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let map = scratch.path("map.dzi.png"), other = scratch.path("other.png")
        try Self.makeImage(map, width: 300, height: 200, bands: 3, scratch: scratch)
        try Self.makeImage(other, width: 300, height: 200, bands: 3, scratch: scratch)
        let root = scratch.path("tiles")
        let derived = try run(try tilerBinary(), ["cut", map, other, "-o", root, "--quiet"])
        #expect(derived.status == 1)
        #expect(
            derived.stderr == "tiler: cut: \(map): the id 'map.dzi' ends in .dzi, so /images/map.dzi would hide the DeepZoom "
                + "descriptor of 'map'; choose another with --name\n", "\(derived.stderr)")
        #expect(ArchiveCommandTests.entries(root) == ["other"])
        let named = try run(try tilerBinary(), ["cut", other, "-o", root, "--name", "x.dzi", "--quiet"])
        #expect(named.status == 1 && named.stderr.contains("'x.dzi' ends in .dzi"), "\(named.stderr)")
        #expect(try run(try tilerBinary(), ["cut", map, "-o", root, "--name", "map", "--quiet"]).status == 0)
        #expect(ArchiveCommandTests.entries(root) == ["map", "other"])
    }

    /// `--thumbnail-size` sets the thumbnail's longest side; a smaller image keeps its own.
    @Test(arguments: [16, 100, 2048])
    func thumbnailSizeIsASetting(size: Int) throws {
        let scratch = try Scratch("thumb\(size)")
        defer { scratch.cleanUp() }
        let input = scratch.path("wide.png")
        try Self.makeImage(input, width: 1500, height: 700, bands: 3, scratch: scratch)
        let root = scratch.url.appendingPathComponent("tiles")
        let result = try run(
            try tilerBinary(), ["cut", input, "-o", root.path, "--thumbnail-size", "\(size)", "--format", "png", "--quiet"])
        #expect(result.status == 0, "tiler cut failed: \(result.stderr)")
        let manifest = try Self.checkPyramid(root: root, id: "wide", width: 1500, height: 700, bands: 3, thumbnailSize: size)
        #expect(manifest.thumbnail.width == min(size, 1500))
    }

    @Test func cutsJPEGTilesFlatteningAlphaOnWhite() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let rgb = scratch.path("rgb.png"), rgba = scratch.path("rgba.png")
        try Self.makeImage(rgb, width: 700, height: 420, bands: 3, scratch: scratch)
        try Self.makeImage(rgba, width: 530, height: 300, bands: 4, scratch: scratch)
        let root = scratch.url.appendingPathComponent("tiles")
        let result = try run(try tilerBinary(), ["cut", rgb, rgba, "-o", root.path, "--format", "jpeg", "--quality", "95", "--quiet"])
        #expect(result.status == 0, "tiler cut failed: \(result.stderr)")
        let manifest = try Self.checkPyramid(root: root, id: "rgb", width: 700, height: 420, bands: 3, format: .jpeg)
        #expect(manifest.quality == 95)
        #expect(manifest.thumbnail.file == "thumbnail.jpg")
        try Self.checkPyramid(root: root, id: "rgba", width: 530, height: 300, bands: 3, format: .jpeg)
        // Lossy, but close: full resolution within a few levels of the source.
        let full = try Self.level(manifest.maxLevel, of: manifest, in: root.appendingPathComponent("rgb"), scratch: scratch)
        let mae = full.meanAbsoluteError(to: try Raster.read(rgb, scratch: scratch))
        #expect(mae < 6, "JPEG Q95 full resolution is \(mae) away from the source")
    }

    @Test func cutsWebPTilesKeepingAlpha() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let rgba = scratch.path("rgba.png")
        try Self.makeImage(rgba, width: 600, height: 300, bands: 4, scratch: scratch)
        let root = scratch.url.appendingPathComponent("tiles")
        let result = try run(try tilerBinary(), ["cut", rgba, "-o", root.path, "--format", "webp", "--quiet"])
        #expect(result.status == 0, "tiler cut failed: \(result.stderr)")
        let manifest = try Self.checkPyramid(root: root, id: "rgba", width: 600, height: 300, bands: 4, format: .webp)
        #expect(manifest.quality == 80)
    }

    @Test func converts16BitInputTo8Bit() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let rgb = scratch.path("rgb.png"), deep = scratch.path("deep.png")
        try Self.makeImage(rgb, width: 300, height: 200, bands: 3, scratch: scratch)
        try vips("colourspace", rgb, deep, "rgb16")
        #expect(try run("vipsheader", [deep]).stdout.contains("ushort"))
        let root = scratch.url.appendingPathComponent("tiles")
        let result = try run(try tilerBinary(), ["cut", deep, "-o", root.path, "--format", "png", "--quiet"])
        #expect(result.status == 0, "tiler cut failed: \(result.stderr)")
        let manifest = try Self.checkPyramid(root: root, id: "deep", width: 300, height: 200, bands: 3)
        let full = try Self.level(manifest.maxLevel, of: manifest, in: root.appendingPathComponent("deep"), scratch: scratch)
        #expect(full.meanAbsoluteError(to: try Raster.read(rgb, scratch: scratch)) <= 0.5)
    }

    @Test func badInputsGetOneLineEachAndNoPyramidWhileGoodOnesAreCut() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let good = scratch.path("good.png"), jpeg = scratch.path("whole.jpg")
        try Self.makeImage(good, width: 300, height: 280, bands: 3, scratch: scratch)
        try Self.makeImage(jpeg, width: 900, height: 700, bands: 3, scratch: scratch)
        let jpegBytes = try Data(contentsOf: URL(fileURLWithPath: jpeg))
        try jpegBytes.prefix(jpegBytes.count / 2).write(to: URL(fileURLWithPath: scratch.path("truncated.jpg")))
        try Data("this is not an image\n".utf8).write(to: URL(fileURLWithPath: scratch.path("notes.jpg")))
        try Data().write(to: URL(fileURLWithPath: scratch.path("empty.png")))
        try FileManager.default.createDirectory(atPath: scratch.path("folder.png"), withIntermediateDirectories: false)
        let bad = ["missing.jpg", "notes.jpg", "truncated.jpg", "empty.png", "folder.png"].map { scratch.path($0) }
        let root = scratch.url.appendingPathComponent("tiles")

        let result = try run(
            try tilerBinary(), ["cut"] + bad.prefix(3) + [good] + bad.suffix(2) + ["-o", root.path, "--format", "png", "--quiet"])
        #expect(result.status == 1)
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == bad.count, "stderr: \(result.stderr)")
        for (path, reason) in zip(bad, ["no such file", "not a supported image", "truncated", "not a supported image", "directory"]) {
            let line = lines.first { $0.contains(path) }
            #expect(line?.hasPrefix("tiler: cut: \(path): ") == true, "no line for \(path) in: \(result.stderr)")
            #expect(line?.contains(reason) == true, "\(line ?? "nothing") does not say '\(reason)'")
        }
        let entries = try FileManager.default.contentsOfDirectory(atPath: root.path)
        #expect(entries == ["good"], "ROOT holds \(entries)")
        try Self.checkPyramid(root: root, id: "good", width: 300, height: 280, bands: 3)
    }

    @Test func existingIDIsAnErrorUnlessForced() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let first = scratch.path("first.png"), second = scratch.path("second.png")
        try Self.makeImage(first, width: 300, height: 200, bands: 3, scratch: scratch)
        try Self.makeImage(second, width: 520, height: 100, bands: 1, scratch: scratch)
        let root = scratch.url.appendingPathComponent("tiles")
        let tiler = try tilerBinary()
        #expect(try run(tiler, ["cut", first, "-o", root.path, "--name", "same", "--format", "png", "--quiet"]).status == 0)
        let manifestPath = root.appendingPathComponent("same/pyramid.json")
        let before = try Data(contentsOf: manifestPath)

        let refused = try run(tiler, ["cut", second, "-o", root.path, "--name", "same", "--quiet"])
        #expect(refused.status == 1)
        #expect(refused.stderr.hasPrefix("tiler: cut: \(second): ") && refused.stderr.contains("--force"), "\(refused.stderr)")
        #expect(try Data(contentsOf: manifestPath) == before, "the existing pyramid changed")
        try Self.checkPyramid(root: root, id: "same", width: 300, height: 200, bands: 3)

        let forced = try run(tiler, ["cut", second, "-o", root.path, "--name", "same", "--force", "--format", "png", "--quiet"])
        #expect(forced.status == 0, "\(forced.stderr)")
        try Self.checkPyramid(root: root, id: "same", width: 520, height: 100, bands: 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.path) == ["same"])
    }

    /// `--format auto`, the default: JPEG (quality 85) for an image without an alpha
    /// channel (grey or colour), PNG for one with it (grey or colour), decided per image
    /// of one run; `--quality` sets auto's JPEG quality, a transparent `--pad` background
    /// asks for PNG, and an explicit format is kept. Before, PNG was the default for every
    /// image (an 80 MB JPEG mosaic became 652 MB of PNG tiles, 87 MB as JPEG).
    @Test func autoFormatIsJPEGWithoutAlphaAndPNGWithIt() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let inputs = (1...4).map { scratch.path("bands\($0).png") }
        for (i, input) in inputs.enumerated() {
            try Self.makeImage(input, width: 600, height: 300, bands: i + 1, scratch: scratch)
        }
        let root = scratch.url.appendingPathComponent("tiles")
        let tiler = try tilerBinary()
        let cut = try run(tiler, ["cut"] + inputs + ["-o", root.path, "--quiet"])
        #expect(cut.status == 0, "\(cut.stderr)")
        for (bands, format) in [(1, TileFormat.jpeg), (2, .png), (3, .jpeg), (4, .png)] {
            let manifest = try Self.checkPyramid(root: root, id: "bands\(bands)", width: 600, height: 300, bands: bands, format: format)
            #expect(manifest.quality == (format == .jpeg ? 85 : nil), "bands\(bands)")
            #expect(manifest.thumbnail.file == "thumbnail.\(format.fileExtension)")
        }
        let explicit = try run(tiler, ["cut", inputs[2], "-o", root.path, "--name", "png", "--format", "png", "--quiet"])
        #expect(explicit.status == 0, "\(explicit.stderr)")
        try Self.checkPyramid(root: root, id: "png", width: 600, height: 300, bands: 3, format: .png)
        let quality = try run(
            tiler, ["cut", inputs[2], "-o", root.path, "--name", "q70", "--format", "auto", "--quality", "70", "--quiet"])
        #expect(quality.status == 0, "\(quality.stderr)")
        #expect(try Self.checkPyramid(root: root, id: "q70", width: 600, height: 300, bands: 3, format: .jpeg).quality == 70)
        let padded = try run(
            tiler, ["cut", inputs[2], "-o", root.path, "--name", "clear", "--pad", "--background", "transparent", "--quiet"])
        #expect(padded.status == 0, "\(padded.stderr)")
        let clear = try JSONDecoder().decode(
            PyramidManifest.self, from: Data(contentsOf: root.appendingPathComponent("clear/pyramid.json")))
        #expect(clear.format == .png && clear.isPadded)
        let lossless = try run(tiler, ["cut", inputs[2], "-o", root.path, "--name", "bad", "--format", "png", "--quality", "70"])
        #expect(lossless.status == 64 && lossless.stderr.contains("--quality applies to"), "\(lossless.stderr)")
    }

    /// Off a terminal, each image cut gets one line on stdout saying what was written
    /// (`INPUT → PYRAMID: size, format, levels, tiles, bytes, seconds`), failures one line
    /// on stderr; `--quiet` prints neither progress nor result lines, and `--json` prints
    /// its JSON only. `pack` and `unpack` likewise. Before, a cut or a pack off a terminal
    /// printed nothing at all on success.
    @Test func printsOneLinePerPyramidWritten() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let rgb = scratch.path("rgb.png"), rgba = scratch.path("rgba.png")
        try Self.makeImage(rgb, width: 600, height: 300, bands: 3, scratch: scratch)
        try Self.makeImage(rgba, width: 300, height: 200, bands: 4, scratch: scratch)
        let root = scratch.path("tiles")
        let tiler = try tilerBinary()
        let cut = try run(tiler, ["cut", rgb, scratch.path("gone.png"), rgba, "-o", root])
        #expect(cut.status == 1)
        let lines = cut.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.count == 3 && lines.last == "", "\(cut.stdout)")
        #expect(lines.first?.hasPrefix("rgb.png → \(root)/rgb: 600×300, jpeg, 3 levels, 9 tiles, ") == true, "\(lines)")
        #expect(lines.dropFirst().first?.hasPrefix("rgba.png → \(root)/rgba: 300×200, png, 2 levels, 3 tiles, ") == true, "\(lines)")
        #expect(lines.prefix(2).allSatisfy { $0.hasSuffix(" s") && ($0.contains(" kB, ") || $0.contains(" B, ")) }, "\(lines)")
        #expect(cut.stderr == "tiler: cut: \(scratch.path("gone.png")): no such file\n", "\(cut.stderr)")

        let quiet = try run(tiler, ["cut", rgb, rgba, "-o", root, "--force", "--quiet"])
        #expect(quiet.status == 0 && quiet.stdout.isEmpty && quiet.stderr.isEmpty, "\(quiet.stdout)\(quiet.stderr)")
        let json = try run(tiler, ["cut", rgb, rgba, "-o", root, "--force", "--json"])
        #expect(json.status == 0 && json.stderr.isEmpty, "\(json.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stdout)")
        #expect(summary["succeeded"] as? Int == 2)

        let packed = try run(tiler, ["pack", "\(root)/rgb"])
        #expect(packed.status == 0 && packed.stderr.isEmpty, "\(packed.stderr)")
        #expect(
            packed.stdout.hasPrefix("\(root)/rgb → \(root)/rgb.pmtiles: 9 tiles, ") && packed.stdout.hasSuffix(" s\n"), "\(packed.stdout)")
        #expect(packed.stdout.split(separator: "\n").count == 1)
        let quietPack = try run(tiler, ["pack", "\(root)/rgba", "--quiet"])
        #expect(quietPack.status == 0 && quietPack.stdout.isEmpty && quietPack.stderr.isEmpty, "\(quietPack.stdout)")
        let unpacked = try run(tiler, ["unpack", "\(root)/rgb.pmtiles", "--force"])
        #expect(unpacked.status == 0, "\(unpacked.stderr)")
        #expect(unpacked.stdout.hasPrefix("\(root)/rgb.pmtiles → \(root)/rgb: 9 tiles, "), "\(unpacked.stdout)")
        let jsonPack = try run(tiler, ["pack", "\(root)/rgb", "--force", "--json"])
        #expect(jsonPack.status == 0 && jsonPack.stdout.hasPrefix("{") && jsonPack.stdout.hasSuffix("}\n"), "\(jsonPack.stdout)")
        #expect((try? JSONSerialization.jsonObject(with: Data(jsonPack.stdout.utf8))) != nil, "\(jsonPack.stdout)")
    }

    @Test func jsonSummaryDescribesEveryInput() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let good = scratch.path("good image.png")
        try Self.makeImage(good, width: 600, height: 300, bands: 3, scratch: scratch)
        let missing = scratch.path("gone.png")
        let root = scratch.url.appendingPathComponent("tiles")
        let result = try run(try tilerBinary(), ["cut", good, missing, "-o", root.path, "--json"])
        #expect(result.status == 1)
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "stdout: \(result.stdout)")
        #expect(json["succeeded"] as? Int == 1 && json["failed"] as? Int == 1)
        let images = try #require(json["images"] as? [[String: Any]])
        #expect(images.count == 2)
        let ok = images[0]
        #expect(ok["path"] as? String == good && ok["id"] as? String == "good_image" && ok["ok"] as? Bool == true)
        #expect(ok["width"] as? Int == 600 && ok["height"] as? Int == 300 && ok["levels"] as? Int == 3)
        let geometry = try PyramidGeometry(width: 600, height: 300)
        #expect(ok["tiles"] as? Int == geometry.levels.map(\.tileCount).reduce(0, +))
        let bytes = try #require(ok["bytes"] as? Int)
        let onDisk = try FileManager.default.subpathsOfDirectory(atPath: root.appendingPathComponent("good_image").path)
            .map { try FileManager.default.attributesOfItem(atPath: root.appendingPathComponent("good_image/\($0)").path) }
            .filter { $0[.type] as? FileAttributeType == .typeRegular }
            .reduce(0) { $0 + (($1[.size] as? Int) ?? 0) }
        #expect(bytes == onDisk)
        #expect((ok["seconds"] as? Double).map { $0 > 0 } == true)
        let failed = images[1]
        #expect(failed["path"] as? String == missing && failed["ok"] as? Bool == false)
        #expect((failed["error"] as? String)?.contains("no such file") == true)
        #expect(result.stderr.contains("tiler: cut: \(missing): no such file"))
    }

    @Test(arguments: [
        ["--name", "x", "a.png", "b.png"],
        ["--tile-size", "8", "a.png"],
        ["--format", "gif", "a.png"],
        ["--format", "png", "--quality", "90", "a.png"],
        ["--format", "jpeg", "--quality", "0", "a.png"],
        ["--name", "../escape", "a.png"],
        ["--thumbnail-size", "15", "a.png"],
        ["--thumbnail-size", "2049", "a.png"],
        [],
    ])
    func badFlagsGetUsage(arguments: [String]) throws {
        let result = try run(try tilerBinary(), ["cut"] + arguments)
        #expect(result.status == 64, "exit \(result.status) for \(arguments)")
        #expect(result.stderr.contains("Usage: tiler cut"), "\(result.stderr)")
    }

    /// A usage error a subcommand finds while running (an environment variable, a ROOT
    /// that is no folder) is shown with that subcommand's usage, not the top level's.
    @Test(arguments: [
        (["serve", "/nonexistent/tiler-root", "--port", "0"], [:], "tiler serve"),
        (["rm", "/nonexistent/tiler-root", "x"], ["TILER_RM_GRACE": "soon"], "tiler rm"),
        (["cut", "a.png"], ["TILER_MAX_PIXELS": "lots"], "tiler cut"),
    ])
    func usageErrorsFoundWhileRunningNameTheSubcommand(arguments: [String], environment: [String: String], usage: String) throws {
        let result = try run(try tilerBinary(), arguments, environment: environment)
        #expect(result.status == 64, "exit \(result.status) for \(arguments)")
        #expect(result.stderr.hasPrefix("Error: "), "\(result.stderr)")
        #expect(result.stderr.contains("Usage: \(usage) "), "\(result.stderr)")
        #expect(result.stderr.contains("See '\(usage) --help'"), "\(result.stderr)")
        #expect(!result.stderr.contains("<subcommand>"), "\(result.stderr)")
    }

    /// On a terminal (a pseudo-terminal made by util-linux `script`), `tiler cut` draws
    /// its progress line in place and ends it with the result line; `--quiet` draws none.
    @Test func drawsItsProgressOnATerminal() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try vips("black", input, "600", "400", "--bands", "3")
        let geometry = try PyramidGeometry(width: 600, height: 400)
        let tiles = geometry.levels.map(\.tileCount).reduce(0, +)
        func onTerminal(_ flags: [String]) throws -> ProcessOutput {
            let command = ([try tilerBinary(), "cut", input, "-o", scratch.path("tiles"), "--force"] + flags)
                .map { "'\($0)'" }.joined(separator: " ")
            // stdin from /dev/null: `script` would otherwise put a terminal it is run from into raw mode.
            let script = "exec /usr/bin/script --quiet --return --command \"$1\" /dev/null < /dev/null"
            return try run("/bin/sh", ["-c", script, "sh", command])
        }
        let drawn = try onTerminal([])
        #expect(drawn.status == 0, "\(drawn.stdout)\(drawn.stderr)")
        #expect(drawn.stdout.hasPrefix("\r\u{1B}[Kphoto.png  0%"), "\(drawn.stdout.debugDescription)")
        #expect(drawn.stdout.contains("\r\u{1B}[Kphoto.png  100%"), "\(drawn.stdout.debugDescription)")
        // The progress line cleared, then the result line (on stdout, as off a terminal).
        let result =
            "\r\u{1B}[Kphoto.png → \(scratch.path("tiles"))/photo: 600×400, jpeg, \(geometry.levels.count) levels, \(tiles) tiles, "
        #expect(drawn.stdout.contains(result), "\(drawn.stdout.debugDescription)")
        #expect(drawn.stdout.hasSuffix(" s\r\n"), "\(drawn.stdout.debugDescription)")

        let quiet = try onTerminal(["--quiet"])
        #expect(quiet.status == 0)
        #expect(quiet.stdout.isEmpty, "\(quiet.stdout.debugDescription)")
    }

    @Test func interruptedCutLeavesNothing() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let input = scratch.path("big.v")
        try vips("gaussnoise", scratch.path("big-f.v"), "7000", "7000")
        try vips("cast", scratch.path("big-f.v"), input, "uchar")
        let root = scratch.url.appendingPathComponent("tiles")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try tilerBinary())
        process.arguments = ["cut", input, "-o", root.path, "--quiet"]
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Wait until the partial folder exists (it is made as `.big.staging-*` and then
        // renamed, so a non-empty ROOT is not yet the state), then stop the cut.
        func partialExists() -> Bool {
            ((try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []).contains { $0.hasPrefix(".big.partial-") }
        }
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, !partialExists() { usleep(20_000) }
        #expect(partialExists())
        process.terminate()
        process.waitUntilExit()
        #expect(process.terminationStatus == 128 + SIGTERM)
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.path).isEmpty)
    }
}
