import Foundation
import Testing
import TilerCore
import TilerImaging
import TilerTestSupport
@testable import TilerServer

@Suite struct IIIFRouteTests {
    let id = ValidatorImage.id

    @Test(arguments: RootKind.allCases, IIIFVersion.allCases) func baseRedirectAndInfo(_ kind: RootKind, _ version: IIIFVersion) throws {
        let port = try ViewerPyramids.port(kind)
        let v = version.rawValue
        let redirect = try request(port, "GET", "/iiif/\(v)/\(id)", headers: ["Host: example.org:8123"])
        #expect(redirect.status == 303)
        #expect(redirect.header("Location") == "http://example.org:8123/iiif/\(v)/\(id)/info.json")

        let info = try request(port, "GET", "/iiif/\(v)/\(id)/info.json", headers: ["Host: example.org:8123"])
        #expect(info.status == 200)
        // JSON-LD without an Accept in 3.0, plain JSON in 2.1.
        let contentType = version == .v3 ? #"application/ld+json;profile="http://iiif.io/api/image/3/context.json""# : "application/json"
        #expect(info.header("Content-Type") == contentType)
        #expect(info.header("Vary") == "Accept, Host")
        #expect(info.header("Access-Control-Allow-Origin") == "*")
        let json = info.json
        #expect(json["@context"] as? String == "http://iiif.io/api/image/\(v)/context.json")
        let idKey = version == .v3 ? "id" : "@id"
        #expect(json[idKey] as? String == "http://example.org:8123/iiif/\(v)/\(id)")
        switch version {
        case .v3: #expect(json["type"] as? String == "ImageService3" && json["profile"] as? String == "level2")
        case .v2: #expect((json["profile"] as? [Any])?.first as? String == "http://iiif.io/api/image/2/level2.json")
        }
        #expect(json["width"] as? Int == 1000 && json["height"] as? Int == 1000)
        let tiles = try #require(json["tiles"] as? [[String: Any]])
        #expect(tiles.first?["width"] as? Int == 256 && tiles.first?["scaleFactors"] as? [Int] == [1, 2, 4])

        // An escaped identifier is decoded, and the id echoes what the client wrote.
        let escaped = id.replacingOccurrences(of: "-", with: "%2D")
        let info2 = try request(port, "GET", "/iiif/\(v)/\(escaped)/info.json")
        #expect(info2.status == 200 && info2.json[idKey] as? String == "http://127.0.0.1:\(port)/iiif/\(v)/\(escaped)")
    }

    /// info.json is JSON-LD with the version's context as profile unless the client prefers
    /// plain JSON in 3.0 (§5.1), plain JSON unless the client prefers JSON-LD in 2.1 (§5);
    /// the body is the same either way.
    @Test(
        arguments: [
            (nil, true, false), ("application/json", false, false), ("application/ld+json", true, true), ("*/*", true, false),
            ("application/json, application/ld+json;q=0.9", false, false),
            ("application/*;q=0.5, application/json", false, false),
            ("application/ld+json;profile=\"http://iiif.io/api/image/3/context.json\", application/json;q=0.8", true, true),
            ("text/html, application/json;q=0.9, */*;q=0.8", false, false), ("image/png", true, false),
            ("application/json;q=0.5, application/ld+json", true, true),
        ] as [(String?, Bool, Bool)])
    func infoIsNegotiated(accept: String?, jsonLDIn3: Bool, jsonLDIn2: Bool) throws {
        let port = try ViewerPyramids.port(.folders)
        for (version, jsonLD) in [(IIIFVersion.v3, jsonLDIn3), (.v2, jsonLDIn2)] {
            let path = "/iiif/\(version.rawValue)/\(id)/info.json"
            let plain = try request(port, "GET", path)
            let info = try request(port, "GET", path, headers: accept.map { ["Accept: \($0)"] } ?? [])
            #expect(info.status == 200)
            let expected = jsonLD ? version.jsonLDMediaType : "application/json"
            #expect(info.header("Content-Type") == expected, "\(version.name), Accept: \(accept ?? "none")")
            #expect(info.header("Vary") == "Accept, Host")
            #expect(info.body == plain.body)
        }
    }

    @Test(arguments: RootKind.allCases, IIIFVersion.allCases) func exactTilesAreTheStoredFiles(_ kind: RootKind, _ version: IIIFVersion)
        throws
    {
        let port = try ViewerPyramids.port(kind)
        let expected = try ViewerPyramids.expected(kind)
        // Scale factor 2 (our level 1): tile (1, 1) covers 512…999 in full-resolution pixels.
        var requests = [
            ("512,512,488,488", "244,", "1/1/1.png"), ("512,512,488,488", "244,244", "1/1/1.png"),
            ("0,0,256,256", "256,", "2/0/0.png"), ("full", "250,", "0/0/0.png"),
            ("768,768,232,232", "max", "2/3/3.png"),
        ]
        if version == .v2 { requests += [("768,768,232,232", "full", "2/3/3.png"), ("0,0,512,512", ",256", "1/0/0.png")] }
        for (region, size, file) in requests {
            let r = try fetch(port, "/iiif/\(version.rawValue)/\(id)/\(region)/\(size)/0/default.png")
            #expect(r.status == 200 && r.header("Content-Type") == "image/png")
            expected.expect(r.body, servedAs: "\(id)/\(file)")
            #expect(r.header("Link")?.contains("<\(version.profileURI)>;rel=\"profile\"") == true)
            #expect(r.header("ETag") != nil)
        }
    }

    @Test(arguments: RootKind.allCases, IIIFVersion.allCases) func drawnImages(_ kind: RootKind, _ version: IIIFVersion) throws {
        let port = try ViewerPyramids.port(kind)
        let v = version.rawValue
        let r = try request(port, "GET", "/iiif/\(v)/\(id)/113,213,74,74/37,/0/default.jpg")
        #expect(r.status == 200 && r.header("Content-Type") == "image/jpeg")
        let canonicalSize = version == .v3 ? "37,37" : "37,"
        #expect(
            r.header("Link") == "<\(version.profileURI)>;rel=\"profile\", "
                + "<http://127.0.0.1:\(port)/iiif/\(v)/\(id)/113,213,74,74/\(canonicalSize)/0/default.jpg>;rel=\"canonical\"")
        let img = try DecodedImage(encoded: r.body)
        #expect(img.width == 37 && img.height == 37)
        let c = img.mean(x: 4, y: 4, width: 29, height: 29)
        // Square (column 1, row 2) of the validator's image.
        #expect(abs(c[0] - 118) < 6 && abs(c[1] - 45) < 6 && abs(c[2] - 130) < 6, "\(c)")
        let gray = try DecodedImage(encoded: try fetch(port, "/iiif/\(v)/\(id)/full/100,/90/gray.png").body)
        #expect(gray.bands == 1 && gray.width == 100)
        // Upscaling: 3.0 after ^, 2.1 for any explicit size.
        let webp = try fetch(port, "/iiif/\(v)/panorama/full/\(version == .v3 ? "^" : "")4800,/0/default.webp")
        #expect(webp.status == 200 && webp.header("Content-Type") == "image/webp")
        #expect(try DecodedImage(encoded: webp.body).width == 4800)
    }

    /// The versions draw the same pixels from the same renderer, but their drawn images are
    /// kept apart (their own ETags, each revalidating to 304 only for itself).
    @Test(arguments: RootKind.allCases) func versionsShareThePixelsButNotTheCache(_ kind: RootKind) throws {
        let port = try ViewerPyramids.port(kind)
        for parameters in ["100,100,300,200/150,100/!90/default.png", "full/pct:25/22.5/bitonal.png", "square/200,/0/color.jpg"] {
            let three = try fetch(port, "/iiif/3/\(id)/\(parameters)")
            let two = try fetch(port, "/iiif/2/\(id)/\(parameters)")
            #expect(three.status == 200 && two.status == 200, "\(parameters)")
            #expect(two.body == three.body, "\(parameters): the same pixels")
            let (tag2, tag3) = (try #require(two.header("ETag")), try #require(three.header("ETag")))
            #expect(tag2 != tag3, "\(parameters)")
            #expect(try fetch(port, "/iiif/2/\(id)/\(parameters)", headers: ["If-None-Match: \(tag2)"]).status == 304)
            #expect(try fetch(port, "/iiif/2/\(id)/\(parameters)", headers: ["If-None-Match: \(tag3)"]).status == 200)
            #expect(try fetch(port, "/iiif/3/\(id)/\(parameters)", headers: ["If-None-Match: \(tag2)"]).status == 200)
            let head = try request(port, "HEAD", "/iiif/2/\(id)/\(parameters)")
            #expect(head.status == 200 && head.body.isEmpty && head.header("ETag") == tag2)
        }
    }

    @Test(arguments: RootKind.allCases, IIIFVersion.allCases) func errors(_ kind: RootKind, _ version: IIIFVersion) throws {
        let port = try ViewerPyramids.port(kind)
        let v = version.rawValue
        var cases = [
            ("/iiif/\(v)/nope/info.json", 404), ("/iiif/\(v)/nope/full/max/0/default.jpg", 404),
            ("/iiif/\(v)/a/b/full/max/0/default.jpg", 404),
            ("/iiif/\(v)/\(id)/full/max/0/default.gif", 400), ("/iiif/\(v)/\(id)/1000,0,10,10/max/0/default.jpg", 400),
            ("/iiif/\(v)/\(id)/full/max/45x/default.jpg", 400), ("/iiif/\(v)/\(id)/full/max/0/fancy.jpg", 400),
            ("/iiif/\(v)/\(id)/full/max/0/default.tif", 400), ("/iiif/\(v)/\(id)/full/max/0/grey.jpg", 400),
            ("/iiif/\(v)/", 404), ("/iiif/1/\(id)/info.json", 404), ("/iiif/4/\(id)/info.json", 404),
        ]
        switch version {
        case .v3:
            cases += [
                ("/iiif/3/\(id)/full/2000,/0/default.jpg", 400), ("/iiif/3/\(id)/full/^20000,/0/default.jpg", 400),
                ("/iiif/3/\(id)/full/full/0/default.jpg", 400),
            ]
        case .v2:
            // No ^ in 2.1; an explicit size may upscale, but not past the limits.
            cases += [
                ("/iiif/2/\(id)/full/^2000,/0/default.jpg", 400), ("/iiif/2/\(id)/full/^max/0/default.jpg", 400),
                ("/iiif/2/\(id)/full/20000,/0/default.jpg", 400), ("/iiif/2/\(id)/full/pct:1000/0/default.jpg", 400),
            ]
        }
        for (path, status) in cases {
            let r = try fetch(port, path)
            #expect(r.status == status, "\(path): \(r.status) \(r.text.prefix(200))")
            #expect(r.header("Content-Type") == "application/json")
            #expect(r.errorMessage?.isEmpty == false)
        }
    }

    /// The tests of the IIIF validator's suite up to compliance level 2, by the version it
    /// is told (`--version=2.0` for 2.x: its `2.1` mode has no test below level 3).
    static let validatorTests: [IIIFVersion: [String]] = {
        let shared = [
            "baseurl_redirect", "cors", "format_error_random", "format_jpg", "format_png", "id_basic", "id_error_escapedslash",
            "id_error_random", "id_error_unescaped", "id_escaped", "id_squares", "info_json", "jsonld", "quality_bitonal",
            "quality_color", "quality_error_random", "quality_grey", "region_error_random", "region_percent", "region_pixels",
            "rot_error_random", "rot_full_basic", "rot_region_basic", "size_bwh", "size_ch", "size_error_random", "size_percent",
            "size_region", "size_wc", "size_wh",
        ]
        return [.v2: shared, .v3: (shared + ["region_square", "size_nofull", "size_noup"]).sorted()]
    }()

    /// The IIIF Image API validator (`pip install iiif-validator`), against a live server,
    /// every test of the version's suite up to compliance level 2: each one named, run and
    /// passed after checking something (its list of checks not empty), none skipped.
    @Test(.timeLimit(.minutes(10)), arguments: RootKind.allCases, IIIFVersion.allCases)
    func officialValidatorAtLevel2(_ kind: RootKind, _ version: IIIFVersion) throws {
        guard let validator = findExecutable(["iiif-validate.py"]) else {
            Issue.record("iiif-validate.py is missing: run scripts/install-deps test (pip install iiif-validator)")
            return
        }
        let port = try ViewerPyramids.port(kind)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: validator)
        process.arguments = [
            "-s", "127.0.0.1:\(port)", "-p", "iiif/\(version.rawValue)", "-i", id,
            "--version=\(version == .v3 ? "3.0" : "2.0")", "--level=2", "--verbose",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try? text.write(
            to: testArtifacts.appendingPathComponent("iiif-validator-\(version.rawValue)-\(kind.testDescription).txt"),
            atomically: true, encoding: .utf8)
        let expected = try #require(Self.validatorTests[version])
        #expect(process.terminationStatus == 0, "validator failed:\n\(text)")
        #expect(text.contains("Done (\(expected.count) tests, 0 failures)"), "\(text)")
        #expect(!text.contains("FAIL"))
        // `[n] test NAME PASS`, then (verbose) its URLs and the checks it made.
        var passed: [String: String] = [:]
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for (i, line) in lines.enumerated() where line.hasPrefix("[") && line.hasSuffix(" PASS") {
            let name = line.split(separator: " ")[2]
            let checks = lines[(i + 1)..<min(i + 3, lines.count)].first { $0.hasPrefix("  tests: ") } ?? ""
            passed[String(name)] = String(checks.dropFirst("  tests: ".count))
        }
        #expect(passed.keys.sorted() == expected.sorted(), "\(text)")
        for (name, checks) in passed {
            #expect(!checks.isEmpty && checks != "[]", "\(name) passed without checking anything: \(text)")
        }
    }
}
