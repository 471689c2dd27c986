import Foundation
import Testing
import TilerCore
import TilerImaging
import TilerTestSupport
@testable import TilerServer

@Suite struct IIIFRouteTests {
    let id = ValidatorImage.id

    @Test(arguments: RootKind.allCases) func baseRedirectAndInfo(_ kind: RootKind) throws {
        let port = try ViewerPyramids.port(kind)
        let redirect = try request(port, "GET", "/iiif/3/\(id)", headers: ["Host: example.org:8123"])
        #expect(redirect.status == 303)
        #expect(redirect.header("Location") == "http://example.org:8123/iiif/3/\(id)/info.json")

        let info = try request(port, "GET", "/iiif/3/\(id)/info.json", headers: ["Host: example.org:8123"])
        #expect(info.status == 200)
        #expect(info.header("Content-Type") == #"application/ld+json;profile="http://iiif.io/api/image/3/context.json""#)
        #expect(info.header("Vary") == "Accept, Host")
        #expect(info.header("Access-Control-Allow-Origin") == "*")
        let json = info.json
        #expect(json["id"] as? String == "http://example.org:8123/iiif/3/\(id)")
        #expect(json["type"] as? String == "ImageService3" && json["profile"] as? String == "level2")
        #expect(json["width"] as? Int == 1000 && json["height"] as? Int == 1000)
        let tiles = try #require(json["tiles"] as? [[String: Any]])
        #expect(tiles.first?["scaleFactors"] as? [Int] == [1, 2, 4])

        // An escaped identifier is decoded, and the id echoes what the client wrote.
        let escaped = id.replacingOccurrences(of: "-", with: "%2D")
        let info2 = try request(port, "GET", "/iiif/3/\(escaped)/info.json")
        #expect(info2.status == 200 && info2.json["id"] as? String == "http://127.0.0.1:\(port)/iiif/3/\(escaped)")
    }

    /// info.json is JSON-LD with the IIIF context as profile unless the client prefers
    /// plain JSON (Image API 3.0 §5.1); the body is the same either way.
    @Test(
        arguments: [
            (nil, true), ("application/json", false), ("application/ld+json", true), ("*/*", true),
            ("application/json, application/ld+json;q=0.9", false), ("application/*;q=0.5, application/json", false),
            ("application/ld+json;profile=\"http://iiif.io/api/image/3/context.json\", application/json;q=0.8", true),
            ("text/html, application/json;q=0.9, */*;q=0.8", false), ("image/png", true),
        ] as [(String?, Bool)])
    func infoIsNegotiated(accept: String?, jsonLD: Bool) throws {
        let port = try ViewerPyramids.port(.folders)
        let plain = try request(port, "GET", "/iiif/3/\(id)/info.json")
        let info = try request(port, "GET", "/iiif/3/\(id)/info.json", headers: accept.map { ["Accept: \($0)"] } ?? [])
        #expect(info.status == 200)
        let expected = jsonLD ? #"application/ld+json;profile="http://iiif.io/api/image/3/context.json""# : "application/json"
        #expect(info.header("Content-Type") == expected, "Accept: \(accept ?? "none")")
        #expect(info.header("Vary") == "Accept, Host")
        #expect(info.body == plain.body)
    }

    @Test(arguments: RootKind.allCases) func exactTilesAreTheStoredFiles(_ kind: RootKind) throws {
        let port = try ViewerPyramids.port(kind)
        let expected = try ViewerPyramids.expected(kind)
        // Scale factor 2 (our level 1): tile (1, 1) covers 512…999 in full-resolution pixels.
        for (region, size, file) in [
            ("512,512,488,488", "244,", "1/1/1.png"), ("512,512,488,488", "244,244", "1/1/1.png"),
            ("0,0,256,256", "256,", "2/0/0.png"), ("full", "250,", "0/0/0.png"),
            ("768,768,232,232", "max", "2/3/3.png"),
        ] {
            let r = try fetch(port, "/iiif/3/\(id)/\(region)/\(size)/0/default.png")
            #expect(r.status == 200 && r.header("Content-Type") == "image/png")
            expected.expect(r.body, servedAs: "\(id)/\(file)")
            #expect(r.header("Link")?.contains(#"<http://iiif.io/api/image/3/level2.json>;rel="profile""#) == true)
            #expect(r.header("ETag") != nil)
        }
    }

    @Test(arguments: RootKind.allCases) func drawnImages(_ kind: RootKind) throws {
        let port = try ViewerPyramids.port(kind)
        let r = try request(port, "GET", "/iiif/3/\(id)/113,213,74,74/37,/0/default.jpg")
        #expect(r.status == 200 && r.header("Content-Type") == "image/jpeg")
        #expect(
            r.header("Link") == #"<http://iiif.io/api/image/3/level2.json>;rel="profile", "#
                + #"<http://127.0.0.1:\#(port)/iiif/3/\#(id)/113,213,74,74/37,37/0/default.jpg>;rel="canonical""#)
        let img = try DecodedImage(encoded: r.body)
        #expect(img.width == 37 && img.height == 37)
        let c = img.mean(x: 4, y: 4, width: 29, height: 29)
        // Square (column 1, row 2) of the validator's image.
        #expect(abs(c[0] - 118) < 6 && abs(c[1] - 45) < 6 && abs(c[2] - 130) < 6, "\(c)")
        let gray = try DecodedImage(encoded: try fetch(port, "/iiif/3/\(id)/full/100,/90/gray.png").body)
        #expect(gray.bands == 1 && gray.width == 100)
        let webp = try fetch(port, "/iiif/3/panorama/full/^4800,/0/default.webp")
        #expect(webp.status == 200 && webp.header("Content-Type") == "image/webp")
        #expect(try DecodedImage(encoded: webp.body).width == 4800)
    }

    @Test(arguments: RootKind.allCases) func errors(_ kind: RootKind) throws {
        let port = try ViewerPyramids.port(kind)
        for (path, status) in [
            ("/iiif/3/nope/info.json", 404), ("/iiif/3/a/b/full/max/0/default.jpg", 404),
            ("/iiif/3/\(id)/full/max/0/default.gif", 400), ("/iiif/3/\(id)/full/2000,/0/default.jpg", 400),
            ("/iiif/3/\(id)/1000,0,10,10/max/0/default.jpg", 400), ("/iiif/3/\(id)/full/max/45x/default.jpg", 400),
            ("/iiif/3/\(id)/full/max/0/fancy.jpg", 400), ("/iiif/3/\(id)/full/^20000,/0/default.jpg", 400),
            ("/iiif/3/", 404), ("/iiif/2/\(id)/info.json", 404),
        ] {
            let r = try fetch(port, path)
            #expect(r.status == status, "\(path): \(r.status) \(r.text.prefix(200))")
            #expect(r.header("Content-Type") == "application/json")
            #expect(r.errorMessage?.isEmpty == false)
        }
    }

    /// The IIIF Image API validator (`pip install iiif-validator`), against a live server,
    /// every test up to compliance level 2.
    @Test(.timeLimit(.minutes(10)), arguments: RootKind.allCases) func officialValidatorAtLevel2(_ kind: RootKind) throws {
        guard let validator = findExecutable(["iiif-validate.py"]) else {
            Issue.record("iiif-validate.py is missing: run scripts/install-deps test (pip install iiif-validator)")
            return
        }
        let port = try ViewerPyramids.port(kind)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: validator)
        process.arguments = [
            "-s", "127.0.0.1:\(port)", "-p", "iiif/3", "-i", id,
            "--version=3.0", "--level=2",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try? text.write(
            to: testArtifacts.appendingPathComponent("iiif-validator-\(kind.testDescription).txt"), atomically: true, encoding: .utf8)
        #expect(process.terminationStatus == 0, "validator failed:\n\(text)")
        #expect(text.contains("Done (33 tests, 0 failures)"), "\(text)")
        #expect(!text.contains("FAIL"))
    }
}
