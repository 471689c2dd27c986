import Foundation
import Testing
@testable import TilerCore

@Suite struct PyramidManifestTests {
    @Test func idValidation() {
        for good in ["a", "A9", "big-photo_2.v1", String(repeating: "x", count: 128)] { #expect(PyramidID(good) != nil, "\(good)") }
        for bad in [
            "", ".", "..", ".hidden", "-x", "_x", "a/b", "a\\b", "a b", "a%2fb", "é", "a\0b",
            String(repeating: "x", count: 129),
        ] {
            #expect(PyramidID(bad) == nil, "\(bad)")
        }
    }

    @Test func idDerivedFromFileName() {
        #expect(PyramidID(deriving: "/data/in/Big Photo (1).JPG")?.rawValue == "Big_Photo_1_")
        #expect(PyramidID(deriving: "scan.tiff")?.rawValue == "scan")
        #expect(PyramidID(deriving: "archive.tar.gz")?.rawValue == "archive.tar")
        #expect(PyramidID(deriving: "..weird.png")?.rawValue == "weird")
        #expect(PyramidID(deriving: "日本.png") == nil)
        #expect(PyramidID(deriving: "日本2.png")?.rawValue == "2")
        #expect(PyramidID(deriving: String(repeating: "y", count: 300) + ".png")?.rawValue.count == 128)
    }

    @Test func roundTripAndConsistency() throws {
        let g = try PyramidGeometry(width: 3001, height: 1999)
        let m = PyramidManifest(
            id: PyramidID("x")!, geometry: g, format: .png,
            thumbnail: .init(file: "thumbnail.png", width: 256, height: 171))
        let data = try JSONEncoder().encode(m)
        let back = try JSONDecoder().decode(PyramidManifest.self, from: data)
        #expect(back == m)
        #expect(try back.geometry() == g)
        #expect(m.tilePath(TileCoordinate(level: 3, row: 2, column: 1)) == "3/2/1.png")

        var tampered = m
        tampered.width = 5000
        #expect(throws: ManifestError.self) { try tampered.geometry() }
        var future = m
        future.formatVersion = 99
        #expect(throws: ManifestError.unsupportedVersion(99)) { try future.geometry() }
        let badID = String(decoding: data, as: UTF8.self).replacingOccurrences(of: "\"id\":\"x\"", with: "\"id\":\"..\"")
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(PyramidManifest.self, from: Data(badID.utf8)) }
    }

    /// `metadata` round-trips, stays format version 1, and a stored manifest whose
    /// metadata is past the bounds (a hostile `pyramid.json`) is refused.
    @Test func metadataRoundTripsAndIsBoundedOnLoad() throws {
        var m = PyramidManifest(
            id: PyramidID("x")!, geometry: try PyramidGeometry(width: 600, height: 300), format: .jpeg,
            thumbnail: .init(file: "thumbnail.jpg", width: 256, height: 128))
        m.metadata = PhotoMetadata(
            title: "Bridge", description: "Line\nline", dateTaken: "2024-05-01T14:03:22+02:00",
            location: .init(lat: 48.8584, lon: -2.2945), album: "Paris")
        let back = try JSONDecoder().decode(PyramidManifest.self, from: JSONEncoder().encode(m))
        #expect(back == m && back.formatVersion == 1)
        _ = try back.geometry()

        var hostile = m
        hostile.metadata?.title = String(repeating: "x", count: 100_000)
        let decoded = try JSONDecoder().decode(PyramidManifest.self, from: JSONEncoder().encode(hostile))
        #expect(throws: ManifestError.self) { try decoded.geometry() }
    }

    /// A manifest written by an earlier tiler (version 1, before provenance and padding)
    /// still reads; a padded one is version 2; a newer version is refused.
    @Test func oldManifestsStayReadableAndPaddedOnesAreVersion2() throws {
        let old = #"""
            {"bands":3,"created":"2026-11-20T10:00:00Z","format":"png","formatVersion":1,"height":300,"id":"old",
             "levels":[{"columns":1,"downscale":4,"height":75,"level":0,"rows":1,"width":150},
                       {"columns":2,"downscale":2,"height":150,"level":1,"rows":1,"width":300},
                       {"columns":3,"downscale":1,"height":300,"level":2,"rows":2,"width":600}],
             "maxLevel":2,"thumbnail":{"file":"thumbnail.png","height":128,"width":256},"tileSize":256,"width":600}
            """#
        let m = try JSONDecoder().decode(PyramidManifest.self, from: Data(old.utf8))
        #expect(try m.geometry() == PyramidGeometry(width: 600, height: 300))
        #expect(!m.isPadded && m.source == nil && m.tilerVersion == nil)
        #expect(m.metadata == nil)

        var padded = m
        padded.source = .init(file: "a.png", bytes: 12)
        padded.tilerVersion = TilerVersion.current
        #expect(padded.formatVersion == 1, "provenance alone needs no new version")
        padded.setPadded(background: "#00000000")
        #expect(padded.formatVersion == 2 && padded.isPadded)
        let back = try JSONDecoder().decode(PyramidManifest.self, from: JSONEncoder().encode(padded))
        #expect(back == padded)
        #expect(try back.geometry() == PyramidGeometry(width: 600, height: 300))
        var newer = padded
        newer.formatVersion = PyramidManifest.currentFormatVersion + 1
        #expect(throws: ManifestError.unsupportedVersion(3)) { try newer.geometry() }
    }

    /// Issue #11 item 5: a manifest may be self-consistent and still absurd. The limits:
    /// at most 2^31 − 1 columns and rows, bands 1...4, quality 1...100.
    @Test func manifestsOutsideTheLimitsAreRefused() throws {
        let thumbnail = PyramidManifest.Thumbnail(file: "thumbnail.png", width: 256, height: 1)
        let wide16 = PyramidManifest(
            id: PyramidID("w")!, geometry: try PyramidGeometry(width: 1 << 40, height: 1, tileSize: 16),
            format: .png, thumbnail: thumbnail)
        #expect(throws: ManifestError.self) { try wide16.geometry() }
        // 2^30 columns of 1024 px: within the limits.
        let wide = PyramidManifest(
            id: PyramidID("w")!, geometry: try PyramidGeometry(width: 1 << 40, height: 1, tileSize: 1024),
            format: .png, thumbnail: thumbnail)
        #expect(try wide.geometry().level(wide.maxLevel).columns == 1 << 30)
        for (bands, quality) in [(0, 80), (5, 80), (3, 0), (3, 101)] {
            var m = wide
            m.bands = bands
            m.quality = quality
            #expect(throws: ManifestError.self, "bands \(bands), quality \(quality)") { try m.geometry() }
        }
        var negative = wide
        negative.thumbnail.width = -1
        #expect(throws: ManifestError.self) { try negative.geometry() }
    }

    /// Issue #11 item 9: the cheap check of a stored tile's first and last bytes.
    @Test func looksCompleteChecksSignatureEndAndLength() throws {
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/67352ccc-d1b0-11e1-89ae-279075081939.png")
        let png = Array(try Data(contentsOf: fixture))
        #expect(TileFormat.png.looksComplete(png))
        #expect(TileFormat.png.looksComplete(png[...]))
        #expect(!TileFormat.png.looksComplete(Array(png.dropLast())))
        #expect(!TileFormat.png.looksComplete(Array(png.prefix(png.count / 2))))
        #expect(!TileFormat.png.looksComplete([]))
        #expect(!TileFormat.jpeg.looksComplete(png) && !TileFormat.webp.looksComplete(png))

        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3, 0xFF, 0xD9]
        #expect(TileFormat.jpeg.looksComplete(jpeg))
        #expect(!TileFormat.jpeg.looksComplete(Array(jpeg.dropLast())))
        #expect(!TileFormat.png.looksComplete(jpeg))

        let payload = Array("VP8L".utf8) + [UInt8](repeating: 7, count: 16)
        let length = UInt8(4 + payload.count)
        let webp = Array("RIFF".utf8) + [length, 0, 0, 0] + Array("WEBP".utf8) + payload
        #expect(TileFormat.webp.looksComplete(webp))
        #expect(!TileFormat.webp.looksComplete(Array(webp.dropLast(2))))
        #expect(!TileFormat.webp.looksComplete(webp + [0, 0]))
    }

    @Test func formats() {
        #expect(TileFormat(fileExtension: "JPG") == .jpeg)
        #expect(TileFormat.webp.mimeType == "image/webp")
        #expect(TileFormat(fileExtension: "gif") == nil)
    }

    /// Extensions are read byte by byte with ASCII letters folded: every spelling of the
    /// three formats in any case, and nothing that only folds or packs to the same bits.
    @Test func fileExtensionsInAnyCaseAndNothingElse() {
        for (text, format) in [("png", TileFormat.png), ("jpg", .jpeg), ("jpeg", .jpeg), ("webp", .webp)] {
            for mask in 0..<(1 << text.count) {
                let spelled = String(
                    text.enumerated().map { i, c in mask & (1 << i) != 0 ? Character(c.uppercased()) : c })
                #expect(TileFormat(fileExtension: spelled) == format, "\(spelled)")
                #expect(TileFormat(fileExtension: Substring("x." + spelled).dropFirst(2)) == format)
            }
        }
        for text in ["", "p", "pn", "pngg", ".png", "png ", "\0png", "\0jpg", "jpe", "webpp", "jpegs", "PnG\0", "ｐng", "pñg", "tif"] {
            #expect(TileFormat(fileExtension: text) == nil, "\(text.debugDescription)")
        }
    }
}
