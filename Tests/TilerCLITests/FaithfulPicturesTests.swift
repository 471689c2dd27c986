import Foundation
import Testing
import TilerCore
import TilerTestSupport

/// "Faithful pictures" (issue 14): EXIF orientation, colour profiles, padded edge tiles
/// and where a pyramid came from. Pixels are checked against libvips' own `autorot` and
/// `icc_transform`, and padded pyramids against an unpadded cut of the same image, also
/// through a running server's DeepZoom and IIIF routes.
@Suite(.serialized) struct FaithfulPicturesTests {
    /// The largest difference of any sample between two rasters of the same size.
    static func maximumDifference(_ a: Raster, _ b: Raster) -> Int {
        precondition((a.width, a.height, a.bands) == (b.width, b.height, b.bands))
        return zip(a.pixels, b.pixels).reduce(0) { max($0, abs(Int($1.0) - Int($1.1))) }
    }

    /// Cuts `input` into `root/id` with `extra` flags and reads the manifest; PNG tiles
    /// unless `extra` names a format (these tests compare pixels exactly).
    static func cut(_ input: String, root: URL, id: String, _ extra: [String] = []) throws -> PyramidManifest {
        let format = extra.contains("--format") ? [] : ["--format", "png"]
        let result = try run(try tilerBinary(), ["cut", input, "-o", root.path, "--name", id, "--quiet"] + format + extra)
        try #require(result.status == 0, "tiler cut \(extra) failed: \(result.stderr)")
        return try JSONDecoder().decode(PyramidManifest.self, from: Data(contentsOf: root.appendingPathComponent("\(id)/pyramid.json")))
    }

    // MARK: orientation

    @Test(arguments: 1...8)
    func exifOrientationIsAppliedLikeVipsAutorot(orientation: Int) throws {
        let scratch = try Scratch("orientation\(orientation)")
        defer { scratch.cleanUp() }
        // 600 × 300: two tile columns, so a wrong turn or flip moves pixels between tiles.
        let plain = scratch.path("plain.jpg")
        try CutCommandTests.makeImage(plain, width: 600, height: 300, bands: 3, scratch: scratch)
        let photo = scratch.path("photo.jpg")
        try Data(jpegWithOrientation([UInt8](try Data(contentsOf: URL(fileURLWithPath: plain))), UInt16(orientation)))
            .write(to: URL(fileURLWithPath: photo))
        #expect(try run("vipsheader", ["-f", "orientation", photo]).stdout.hasPrefix("\(orientation)"))
        let root = scratch.url.appendingPathComponent("tiles")

        let upright = try Self.cut(photo, root: root, id: "upright")
        let expected = scratch.path("autorot.v")
        try vips("autorot", photo, expected)
        let reference = try Raster(vFile: expected)
        #expect((upright.width, upright.height) == (reference.width, reference.height))
        let full = try CutCommandTests.level(upright.maxLevel, of: upright, in: root.appendingPathComponent("upright"), scratch: scratch)
        // Compared outside #expect, which would print every sample of a mismatch.
        let same = full.pixels == reference.pixels
        #expect(same, "orientation \(orientation): tiles differ from vips autorot")

        let stored = try Self.cut(photo, root: root, id: "stored", ["--no-autorotate"])
        let storedFull = try CutCommandTests.level(stored.maxLevel, of: stored, in: root.appendingPathComponent("stored"), scratch: scratch)
        #expect((stored.width, stored.height) == (600, 300))
        let unchanged = storedFull.pixels == (try Raster.read(photo, scratch: scratch)).pixels
        #expect(unchanged, "--no-autorotate changed the pixels")
    }

    // MARK: colour profiles

    @Test(arguments: ["png", "jpg"])
    func embeddedProfilesAreConvertedToSRGB(format: String) throws {
        let scratch = try Scratch("icc-\(format)")
        defer { scratch.cleanUp() }
        let source = scratch.path("source.png")
        try CutCommandTests.makeImage(source, width: 500, height: 300, bands: 3, scratch: scratch)
        // The same numbers tagged Display P3: libvips' built-in P3 profile, embedded.
        let tagged = scratch.path("wide.\(format)")
        try vips("icc_transform", source, tagged + (format == "jpg" ? "[Q=95]" : ""), "p3", "--input-profile", "srgb")
        #expect(try run("vipsheader", ["-a", tagged]).stdout.contains("icc-profile-data"))
        let reference = scratch.path("reference.v")
        try vips("icc_transform", tagged, reference, "srgb", "--embedded")
        let expected = try Raster(vFile: reference)

        let root = scratch.url.appendingPathComponent("tiles")
        let converted = try Self.cut(tagged, root: root, id: "converted")
        let full = try CutCommandTests.level(
            converted.maxLevel, of: converted, in: root.appendingPathComponent("converted"), scratch: scratch)
        #expect(Self.maximumDifference(full, expected) <= 1, "tiles are not vips icc_transform's sRGB")

        // --no-icc keeps the stored numbers, which are far from the converted ones.
        let keptManifest = try Self.cut(tagged, root: root, id: "kept", ["--no-icc"])
        let keptFull = try CutCommandTests.level(
            keptManifest.maxLevel, of: keptManifest, in: root.appendingPathComponent("kept"), scratch: scratch)
        let kept = keptFull.pixels == (try Raster.read(tagged, scratch: scratch)).pixels
        #expect(kept, "--no-icc changed the stored values")
        #expect(Self.maximumDifference(keptFull, expected) > 10)
    }

    /// CMYK without an embedded profile (issue 31, item 14) is read through Ghostscript's
    /// `default_cmyk.icc`: the tiles match libvips' `icc_transform` through that file, made
    /// outside tiler, while libvips' built-in CMYK profile (the old path, still there with
    /// `TILER_CMYK_PROFILE=builtin`) is far from it.
    @Test func cmykWithoutAProfileIsReadThroughTheDefaultCMYKProfile() throws {
        guard let profile = CMYKProfileLocation.installed else {
            Issue.record("no CMYK profile at \(CMYKProfileLocation.ghostscript): run scripts/install-deps (libgs-common)")
            return
        }
        let scratch = try Scratch("cmyk")
        defer { scratch.cleanUp() }
        let source = scratch.path("source.png")
        try CutCommandTests.makeImage(source, width: 500, height: 300, bands: 3, scratch: scratch)
        // A press file: CMYK numbers made through the profile, the profile then stripped.
        let cmyk = scratch.path("press.jpg")
        try vips("icc_transform", source, cmyk + "[Q=95,strip]", profile, "--input-profile", "srgb")
        let header = try run("vipsheader", ["-a", cmyk]).stdout
        #expect(header.contains("interpretation: cmyk") && !header.contains("icc-profile-data"), "\(header)")

        let reference = scratch.path("reference.v")
        try vips("icc_transform", cmyk, reference, "srgb", "--input-profile", profile, "--intent", "relative")
        let expected = try Raster(vFile: reference)
        let oldPath = scratch.path("builtin.v")
        try vips("colourspace", cmyk, oldPath, "srgb")
        let builtin = try Raster(vFile: oldPath)

        let root = scratch.url.appendingPathComponent("tiles")
        func cut(_ id: String, profile: String?) throws -> (status: Int32, stderr: String, full: Raster?) {
            let result = try run(
                try tilerBinary(), ["cut", cmyk, "-o", root.path, "--name", id, "--format", "png", "--quiet"],
                environment: profile.map { ["TILER_CMYK_PROFILE": $0] } ?? [:])
            guard result.status == 0 else { return (result.status, result.stderr, nil) }
            let manifest = try JSONDecoder().decode(
                PyramidManifest.self, from: Data(contentsOf: root.appendingPathComponent("\(id)/pyramid.json")))
            let full = try CutCommandTests.level(manifest.maxLevel, of: manifest, in: root.appendingPathComponent(id), scratch: scratch)
            return (0, result.stderr, full)
        }
        let converted = try #require(try cut("default", profile: nil).full)
        let error = converted.meanAbsoluteError(to: expected)
        let oldError = builtin.meanAbsoluteError(to: expected)
        #expect(error < 0.5, "tiles are \(error) levels from icc_transform through \(profile)")
        #expect(oldError > 5, "libvips' built-in CMYK profile is only \(oldError) levels away")

        // TILER_CMYK_PROFILE: builtin is libvips' own profile; a file that is not there
        // fails the cut and says so.
        let own = try #require(try cut("builtin", profile: "builtin").full)
        #expect(own.meanAbsoluteError(to: builtin) < 0.5)
        let missing = try cut("missing", profile: scratch.path("no-such.icc"))
        #expect(missing.status != 0 && missing.stderr.contains("TILER_CMYK_PROFILE"), "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("missing").path))
    }

    // MARK: padding

    /// Every tile of every level: full-size, and outside the image exactly `padding`.
    static func checkPadded(
        _ manifest: PyramidManifest, folder: URL, padding: [UInt8], scratch: Scratch,
        tolerance: Int = 0
    ) throws {
        let geometry = try manifest.geometry()
        for level in geometry.levels {
            for row in 0..<level.rows {
                for column in 0..<level.columns {
                    let tile = TileCoordinate(level: level.level, row: row, column: column)
                    let raster = try Raster.read(folder.appendingPathComponent(manifest.tilePath(tile)).path, scratch: scratch)
                    #expect((raster.width, raster.height, raster.bands) == (256, 256, padding.count), "tile \(tile)")
                    let rect = geometry.rectInLevel(tile)
                    // Lossy tiles ring near the image's edge: skip one JPEG block (16 px) there.
                    let margin = tolerance > 0 ? 16 : 0
                    var worst = 0
                    for y in 0..<256 {
                        for x in 0..<256 where x >= rect.width + margin || y >= rect.height + margin {
                            for b in 0..<padding.count {
                                worst = max(worst, abs(Int(raster.pixels[(y * 256 + x) * padding.count + b]) - Int(padding[b])))
                            }
                        }
                    }
                    #expect(worst <= tolerance, "tile \(tile): padding is off by \(worst)")
                }
            }
        }
    }

    @Test func paddedEdgeTilesAreFullSizeAndFilledWithTheBackground() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try CutCommandTests.makeImage(input, width: 600, height: 300, bands: 3, scratch: scratch)
        let root = scratch.url.appendingPathComponent("tiles")
        let clipped = try Self.cut(input, root: root, id: "clipped")
        #expect(clipped.padded == nil && clipped.formatVersion == 1)

        // PNG: transparent by default, so the tiles gain an alpha band (opaque inside).
        let padded = try Self.cut(input, root: root, id: "padded", ["--pad"])
        #expect(padded.padded == true && padded.background == "#00000000" && padded.bands == 4)
        #expect(padded.formatVersion == 2)
        try Self.checkPadded(padded, folder: root.appendingPathComponent("padded"), padding: [0, 0, 0, 0], scratch: scratch)
        for z in padded.levels.map(\.level) {
            let inside = try CutCommandTests.level(z, of: padded, in: root.appendingPathComponent("padded"), scratch: scratch)
            let reference = try CutCommandTests.level(z, of: clipped, in: root.appendingPathComponent("clipped"), scratch: scratch)
            let same = inside.pixels.enumerated().allSatisfy { i, v in i % 4 == 3 ? v == 255 : v == reference.pixels[i / 4 * 3 + i % 4] }
            #expect(same, "level \(z): the image inside padded tiles differs from the clipped cut")
        }

        // An opaque colour keeps three bands.
        let red = try Self.cut(input, root: root, id: "red", ["--pad", "--background", "#f00"])
        #expect(red.bands == 3 && red.background == "#ff0000ff")
        try Self.checkPadded(red, folder: root.appendingPathComponent("red"), padding: [255, 0, 0], scratch: scratch)

        // JPEG: white by default (lossy, so near white).
        let jpeg = try Self.cut(input, root: root, id: "jpeg", ["--pad", "--format", "jpeg", "--quality", "95"])
        #expect(jpeg.background == "#ffffffff" && jpeg.bands == 3)
        try Self.checkPadded(
            jpeg, folder: root.appendingPathComponent("jpeg"), padding: [255, 255, 255], scratch: scratch,
            tolerance: 12)

        let refused = try run(
            try tilerBinary(),
            [
                "cut", input, "-o", root.path, "--pad", "--format", "jpeg",
                "--background", "transparent",
            ])
        #expect(refused.status == 64 && refused.stderr.contains("not opaque"), "\(refused.stderr)")
        #expect(try run(try tilerBinary(), ["cut", input, "-o", root.path, "--background", "teal"]).status == 64)
    }

    /// DeepZoom and IIIF clients expect clipped edge tiles: the server crops a padded
    /// pyramid's edge tiles for them, to the unpadded cut's pixels.
    @Test func deepZoomAndIIIFGetClippedTilesFromAPaddedPyramid() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try CutCommandTests.makeImage(input, width: 700, height: 300, bands: 3, scratch: scratch)
        let root = scratch.url.appendingPathComponent("tiles")
        let clipped = try Self.cut(input, root: root, id: "clipped")
        let padded = try Self.cut(input, root: root, id: "padded", ["--pad", "--background", "white"])
        let server = try ServeProcess([root.path, "--port", "0", "--threads", "1"])
        defer { server.stop() }

        let listing = try fetch(server.port, "/images/padded")
        #expect(listing.status == 200 && listing.json["padded"] as? Bool == true, "\(listing.text)")
        #expect(listing.json["background"] as? String == "#ffffffff", "\(listing.text)")
        #expect(try fetch(server.port, "/images/clipped").json["background"] == nil)
        // The XYZ route serves the stored, padded tile.
        let xyz = try fetch(server.port, "/images/padded/tiles/2/0/2.png")
        let xyzFile = scratch.path("xyz.png")
        try Data(xyz.body).write(to: URL(fileURLWithPath: xyzFile))
        let xyzRaster = try Raster.read(xyzFile, scratch: scratch)
        #expect((xyzRaster.width, xyzRaster.height) == (256, 256))

        let geometry = try padded.geometry()
        let dzMax = Int((log2(Double(700))).rounded(.up))
        var checked = 0
        for level in geometry.levels {
            for row in 0..<level.rows {
                for column in 0..<level.columns {
                    let tile = TileCoordinate(level: level.level, row: row, column: column)
                    let rect = geometry.rectInLevel(tile)
                    let reference = try Raster.read(root.appendingPathComponent("clipped/" + clipped.tilePath(tile)).path, scratch: scratch)
                    let full = geometry.rectInImage(tile)
                    let f = level.downscale
                    let dz = "/images/padded_files/\(dzMax - (geometry.maxLevel - level.level))/\(column)_\(row).png"
                    let iiifSize = rect.width == full.width && rect.height == full.height ? "max" : "\(rect.width),\(rect.height)"
                    let iiif = "/iiif/3/padded/\(full.x),\(full.y),\(full.width),\(full.height)/\(iiifSize)/0/default.png"
                    for path in [dz, iiif] {
                        let answer = try fetch(server.port, path)
                        try #require(answer.status == 200, "\(path): \(answer.status) \(answer.text.prefix(200))")
                        let file = scratch.path("answer.png")
                        try Data(answer.body).write(to: URL(fileURLWithPath: file))
                        let got = try Raster.read(file, scratch: scratch)
                        #expect((got.width, got.height) == (rect.width, rect.height), "\(path) is \(got.width)×\(got.height), f \(f)")
                        let same = got.pixels == reference.pixels
                        #expect(same, "\(path): pixels differ from the unpadded cut's tile")
                        checked += 1
                    }
                }
            }
        }
        #expect(checked == 2 * geometry.levels.map(\.tileCount).reduce(0, +))
    }

    // MARK: provenance

    @Test func theManifestSaysWhereThePyramidCameFrom() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let input = scratch.path("Holiday photo.png")
        try CutCommandTests.makeImage(input, width: 300, height: 200, bands: 3, scratch: scratch)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: input)[.size] as? Int)
        let root = scratch.url.appendingPathComponent("tiles")
        let before = Date()
        let manifest = try Self.cut(input, root: root, id: "holiday")
        #expect(manifest.source == PyramidManifest.Source(file: "Holiday photo.png", bytes: size))
        let version = try run(try tilerBinary(), ["--version"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(manifest.tilerVersion == version && !version.isEmpty)
        let created = try #require(
            manifest.created.flatMap { ISO8601DateFormatter().date(from: $0) }, "created: \(manifest.created ?? "nil")")
        #expect(created >= before.addingTimeInterval(-1) && created <= Date().addingTimeInterval(1))
    }
}

/// Where Debian's `libgs-common` puts Ghostscript's CMYK profile.
enum CMYKProfileLocation {
    static let ghostscript = "/usr/share/color/icc/ghostscript/default_cmyk.icc"
    static var installed: String? { FileManager.default.isReadableFile(atPath: ghostscript) ? ghostscript : nil }
}
