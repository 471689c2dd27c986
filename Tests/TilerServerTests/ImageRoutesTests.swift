import Foundation
import Testing
import TilerCore
import TilerHTTP
import TilerTestSupport
@testable import TilerServer

@Suite struct ImageRoutesTests {
    /// 2100 × 1500: from sources, level 3 (1050 × 750) is cropped from the TIFF's second
    /// page or the JPEG's shrink-on-load, not made from level 4.
    @Test(arguments: RootKind.allCases) func tileBytesEqualTheFilesOnDisk(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        let manifest = try root.addPyramid("small", width: 2100, height: 1500)
        try withRunningTileServer(root, as: kind) { server throws in
            let port = server.port
            let served = try #require(root.served)
            if kind.isSources {
                let source = try #require(server.store.pyramids.first?.source as? SourceFileSource)
                #expect(source.pyramid.levelSources[3] != "from the level above", "\(source.pyramid.levelSources)")
            }
            let c = try RawHTTPClient(port: port)
            let geometry = try manifest.geometry()
            var count = 0
            for level in geometry.levels {
                for row in 0..<level.rows {
                    for column in 0..<level.columns {
                        let tile = TileCoordinate(level: level.level, row: row, column: column)
                        try c.request("/images/small/tiles/\(tile.level)/\(tile.row)/\(tile.column).png")
                        let r = try c.readResponse()
                        #expect(r.status == 200)
                        #expect(r.header("Content-Type") == "image/png")
                        served.expect(r.body, servedAs: "small/" + manifest.tilePath(tile))
                        #expect(r.header("ETag") != nil && r.header("Last-Modified") != nil)
                        #expect(r.header("Cache-Control") == "public, max-age=86400")
                        count += 1
                    }
                }
            }
            #expect(count == geometry.levels.map(\.tileCount).reduce(0, +))
        }
    }

    /// One format per server, as a `--sources` server makes every image in one.
    @Test(arguments: RootKind.allCases, [TileFormat.jpeg, .webp])
    func contentTypeFollowsTheFormatAndOtherExtensionsAre404(_ kind: RootKind, _ format: TileFormat) throws {
        let root = try PyramidRoot()
        try root.addPyramid("photo", width: 300, height: 300, format: format)
        try withTileServer(root, as: kind) { port throws in
            switch format {
            case .jpeg:
                let jpg = try fetch(port, "/images/photo/tiles/1/0/1.jpg")
                #expect(jpg.status == 200 && jpg.header("Content-Type") == "image/jpeg")
                #expect(try fetch(port, "/images/photo/tiles/1/0/1.jpeg").status == 200)
                #expect(try fetch(port, "/images/photo/tiles/1/0/1.webp").status == 404)
            default:
                let webp = try fetch(port, "/images/photo/tiles/0/0/0.webp")
                #expect(webp.status == 200 && webp.header("Content-Type") == "image/webp")
                #expect(try fetch(port, "/images/photo/tiles/0/0/0.jpg").status == 404)
            }
            for path in ["/images/photo/tiles/1/0/1.png", "/images/photo/tiles/1/0/1.gif", "/images/photo/tiles/1/0/1"] {
                #expect(try fetch(port, path).status == 404, "\(path)")
            }
        }
    }

    @Test(arguments: RootKind.allCases) func tilesOutsideThePyramidAre404AndMalformedNumbers400(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try root.addPyramid("small", width: 1000, height: 700)  // maxLevel 2; level 2 is 4×3 tiles
        try withTileServer(root, as: kind) { port throws in
            for path in [
                "/images/small/tiles/3/0/0.png", "/images/small/tiles/2/3/0.png", "/images/small/tiles/2/0/4.png",
                "/images/small/tiles/0/1/0.png", "/images/small/tiles/99999999999999999999/0/0.png",
                "/images/nope/tiles/0/0/0.png",
            ] {
                let r = try fetch(port, path)
                #expect(r.status == 404, "\(path)")
                #expect(r.errorMessage != nil)
            }
            for path in [
                "/images/small/tiles/x/0/0.png", "/images/small/tiles/-1/0/0.png", "/images/small/tiles/0/+0/0.png",
                "/images/small/tiles/0/0/0x1.png", "/images/small/tiles/01/0/0.png", "/images/small/tiles/0/0/.png",
                "/images/small/tiles/1.5/0/0.png", "/images/small/tiles/0/0/0.png.", "/images/small/tiles/%31/0/0.png?",
            ] {
                let r = try fetch(port, path)
                if path.contains("%31") { #expect(r.status == 200, "\(path)") } else { #expect(r.status == 400, "\(path)") }
            }
        }
    }

    @Test(arguments: RootKind.allCases) func unknownImagesAre404WithTheContractsMessage(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try withTileServer(root, as: kind) { port throws in
            let r = try fetch(port, "/images/x")
            #expect(r.status == 404)
            #expect(r.header("Content-Type") == "application/json")
            #expect(r.text == #"{"error":{"status":404,"message":"no image named 'x'"}}"#)
            #expect(try fetch(port, "/nowhere").status == 404)
        }
    }

    @Test(arguments: RootKind.allCases) func foldersWithoutAManifestAreNotPyramids(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try root.addPyramid("partial", width: 300, height: 300, writeManifest: false)
        try withTileServer(root, as: kind) { port throws in
            #expect(try fetch(port, "/images/partial").status == 404)
            #expect(try fetch(port, "/images/partial/tiles/0/0/0.png").status == 404)
            #expect(try fetch(port, "/images").json["total"] as? Int == 0)
        }
    }

    @Test(arguments: RootKind.allCases) func thumbnails(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 300, height: 200)
        try withTileServer(root, as: kind) { port throws in
            let r = try fetch(port, "/images/a/thumbnail.png")
            #expect(r.status == 200)
            #expect(r.header("Content-Type") == "image/png")
            try #require(root.served).expect(r.body, servedAs: "a/thumbnail.png")
            #expect(r.header("ETag") != nil && r.header("Last-Modified") != nil)
            #expect(try fetch(port, "/images/a/thumbnail.jpg").status == 404)
            #expect(try fetch(port, "/images/b/thumbnail.png").status == 404)
        }
    }

    @Test(arguments: RootKind.allCases) func manifestDocument(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        var m = try root.addPyramid("big", width: 20000, height: 20000, tilesThrough: 0)
        // Provenance, as a cut records it (a name to escape among it). A source served on
        // the fly has its own (the `sources` kinds make their pictures from such tiles).
        if !kind.isSources {
            m.source = PyramidManifest.Source(file: #"scan "7".tif"#, bytes: 123_456_789)
            m.tilerVersion = "9.8.7"
            m.created = "2026-11-28T04:30:00Z"
            try root.write(m)
        }
        try withTileServer(root, as: kind) { port throws in
            let r = try fetch(port, "/images/big")
            #expect(r.status == 200)
            #expect(r.header("Content-Type") == "application/json")
            #expect(r.header("ETag") != nil && r.header("Last-Modified") != nil)
            let j = r.json
            #expect(j["id"] as? String == "big")
            #expect(j["width"] as? Int == 20000 && j["height"] as? Int == 20000)
            #expect(j["tileSize"] as? Int == 256 && j["maxLevel"] as? Int == 7)
            #expect(j["format"] as? String == "png")
            #expect(j["url"] as? String == "/images/big")
            #expect(j["tiles"] as? String == "/images/big/tiles/{level}/{row}/{column}.png")
            let thumb = j["thumbnail"] as? [String: Any]
            #expect(thumb?["url"] as? String == "/images/big/thumbnail.png")
            let expected = try #require(root.served).manifest("big").thumbnail
            #expect(thumb?["width"] as? Int == expected.width && thumb?["height"] as? Int == expected.height)
            let levels = j["levels"] as? [[String: Int]] ?? []
            #expect(levels.count == 8)
            #expect(levels.first == ["level": 0, "width": 157, "height": 157, "columns": 1, "rows": 1])
            #expect(levels.last == ["level": 7, "width": 20000, "height": 20000, "columns": 79, "rows": 79])
            #expect(levels.map { $0["columns"]! } == m.levels.map(\.columns))
            if !kind.isSources {
                #expect(j["created"] as? String == "2026-11-28T04:30:00Z" && j["tilerVersion"] as? String == "9.8.7")
                let source = j["source"] as? [String: Any]
                #expect(source?["file"] as? String == #"scan "7".tif"# && source?["bytes"] as? Int == 123_456_789)
            }
            // Manifests answer conditional requests too.
            let again = try fetch(port, "/images/big", headers: ["If-None-Match: \(r.header("ETag")!)"])
            #expect(again.status == 304)
            let since = try fetch(port, "/images/big", headers: ["If-Modified-Since: \(r.header("Last-Modified")!)"])
            #expect(since.status == 304)
        }
    }

    @Test(arguments: RootKind.allCases) func listingIsSortedPagedAndValidated(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        for id in ["delta", "alpha", "Charlie", "bravo", "echo.2", "img10", "img2"] { try root.addPyramid(id, width: 100, height: 100) }
        try FileManager.default.createDirectory(atPath: root.path + "/not-a-pyramid", withIntermediateDirectories: true)
        try withTileServer(root, as: kind) { port throws in
            let all = try fetch(port, "/images").json
            #expect(all["total"] as? Int == 7)
            #expect(all["offset"] as? Int == 0 && all["limit"] as? Int == 50)
            let images = all["images"] as? [[String: Any]] ?? []
            // Natural order: without case, numbers by value (not `Charlie` first, not `img10` before `img2`).
            #expect(images.map { $0["id"] as? String } == ["alpha", "bravo", "Charlie", "delta", "echo.2", "img2", "img10"])
            let first = images.first ?? [:]
            for key in ["id", "width", "height", "tileSize", "format", "maxLevel", "url", "thumbnail"] {
                #expect(first[key] != nil, "\(key)")
            }
            #expect(first["url"] as? String == "/images/alpha")
            #expect((first["thumbnail"] as? [String: Any])?["url"] as? String == "/images/alpha/thumbnail.png")

            let page = try fetch(port, "/images?offset=1&limit=2").json
            #expect((page["images"] as? [[String: Any]])?.map { $0["id"] as? String } == ["bravo", "Charlie"])
            #expect(page["total"] as? Int == 7 && page["offset"] as? Int == 1 && page["limit"] as? Int == 2)
            #expect((try fetch(port, "/images?offset=10").json["images"] as? [Any])?.isEmpty == true)
            // find=ID: the page that holds it, in this order (not by the id's bytes).
            for (id, offset) in [("alpha", 0), ("Charlie", 2), ("img2", 4), ("img10", 6)] {
                let found = try fetch(port, "/images?find=\(id)&limit=2")
                #expect(found.status == 200 && found.json["offset"] as? Int == offset, "\(id): \(found.text)")
                #expect((found.json["images"] as? [[String: Any]])?.contains { $0["id"] as? String == id } == true, "\(id)")
            }
            #expect(try fetch(port, "/images?find=nothing-here").status == 404)
            #expect(try fetch(port, "/images?find=..%2Fx").status == 400)

            for query in ["offset=-1", "offset=x", "limit=0", "limit=1001", "limit=", "limit=2.5", "offset=%zz"] {
                let r = try fetch(port, "/images?\(query)")
                #expect(r.status == 400, "\(query)")
                #expect(r.errorMessage != nil)
            }
        }
    }

    @Test(arguments: RootKind.allCases) func healthz(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try withTileServer(root, as: kind) { port throws in
            let r = try fetch(port, "/healthz")
            #expect(r.status == 200)
            #expect(r.json["status"] as? String == "ok")
            // A bucket root also says whether storage answers.
            #expect(r.json["storage"] as? String == (kind == .bucket ? "ok" : nil))
            let head = try fetch(port, "/healthz", method: "HEAD")
            #expect(head.status == 200 && head.header("Content-Length") == String(r.body.count))
        }
    }

    @Test(arguments: RootKind.allCases) func headOptionsAnd405OnRealRoutes(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 300, height: 200)
        try withTileServer(root, as: kind) { port throws in
            let get = try fetch(port, "/images/a/tiles/0/0/0.png")
            let head = try fetch(port, "/images/a/tiles/0/0/0.png", method: "HEAD")
            #expect(head.status == 200)
            #expect(head.header("Content-Length") == get.header("Content-Length"))
            #expect(head.header("ETag") == get.header("ETag"))
            let options = try fetch(port, "/images/a/tiles/0/0/0.png", method: "OPTIONS")
            #expect(options.status == 204 && options.header("Access-Control-Allow-Origin") == "*")
            let post = try fetch(port, "/images/a", method: "POST")
            #expect(post.status == 405 && post.header("Allow") == "GET, HEAD, OPTIONS")
        }
    }

    /// Issue 31 #8c: every answer says `X-Content-Type-Options: nosniff`, so that no
    /// browser sniffs an error's JSON (which echoes the request) as HTML: tiles on the
    /// plain path, first and from the cache, 304s, HEAD, errors, OPTIONS, the listing,
    /// protocol errors, with and without CORS.
    @Test(arguments: [RootKind.folders, .archives]) func everyAnswerSaysNoSniff(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 300, height: 200)
        for cors in [true, false] {
            try withTileServer(root, as: kind, { if !cors { $0.http.corsAllowOrigin = nil } }) { port throws in
                let tile = try fetch(port, "/images/a/tiles/1/0/1.png")
                let etag = try #require(tile.header("ETag"))
                var answers: [(String, RawResponse)] = [("tile", tile)]
                answers.append(("cached tile", try fetch(port, "/images/a/tiles/1/0/1.png")))
                answers.append(("304", try fetch(port, "/images/a/tiles/1/0/1.png", headers: ["If-None-Match: \(etag)"])))
                answers.append(("HEAD", try fetch(port, "/images/a/tiles/1/0/1.png", method: "HEAD")))
                for path in [
                    "/images/a", "/images", "/healthz", "/", "/images/%3Cscript%3E", "/images/a/tiles/9/0/0.png",
                    "/images/a/tiles/x/0/0.png", "/iiif/3/a/info.json", "/images/a.dzi",
                ] {
                    answers.append((path, try fetch(port, path)))
                    answers.append((path + " again", try fetch(port, path)))
                }
                answers.append(("OPTIONS", try fetch(port, "/images/a", method: "OPTIONS")))
                answers.append(("POST", try fetch(port, "/images/a", method: "POST")))
                let c = try RawHTTPClient(port: port)
                try c.send("GET /\(String(repeating: "x", count: 20_000)) HTTP/1.1\r\nHost: x\r\n\r\n")
                answers.append(("414", try c.readResponse()))
                for (what, r) in answers {
                    #expect(r.header("X-Content-Type-Options") == "nosniff", "\(what): \(r.status)")
                }
                #expect(Set(answers.map(\.1.status)) == [200, 204, 304, 400, 404, 405, 414])
            }
        }
    }

    @Test(arguments: RootKind.allCases) func conditionalTileRequests(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 300, height: 200)
        try withTileServer(root, as: kind) { port throws in
            let r = try fetch(port, "/images/a/tiles/1/0/1.png")
            let etag = try #require(r.header("ETag"))
            let lastModified = try #require(r.header("Last-Modified"))
            #expect(try fetch(port, "/images/a/tiles/1/0/1.png", headers: ["If-None-Match: \(etag)"]).status == 304)
            #expect(try fetch(port, "/images/a/tiles/1/0/1.png", headers: ["If-Modified-Since: \(lastModified)"]).status == 304)
            #expect(try fetch(port, "/images/a/tiles/1/0/0.png", headers: ["If-None-Match: \(etag)"]).status == 200)
            #expect(try fetch(port, "/images/a/thumbnail.png", headers: ["If-Modified-Since: \(lastModified)"]).status == 304)
        }
    }

    @Test(arguments: RootKind.allCases) func traversalAttemptsNeverReachFilesOutsideRoot(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 300, height: 200)
        // A file beside ROOT that a traversal would reach.
        let outside = root.path + "-secret"
        try Data("secret".utf8).write(to: URL(fileURLWithPath: outside))
        defer { try? FileManager.default.removeItem(atPath: outside) }
        let secretName = (outside as NSString).lastPathComponent
        try withTileServer(root, as: kind) { port throws in
            let attempts = [
                "/images/../etc/passwd", "/images/%2e%2e/etc/passwd", "/images/%2E%2E/%2E%2E/etc/passwd",
                "/images/a%2fb/tiles/0/0/0.png", "/images/a%2F..%2F..%2Fetc/thumbnail.png",
                "/images/%252e%252e/tiles/0/0/0.png", "/images/..%252f..%252fetc/thumbnail.png",
                "/images/../\(secretName)", "/images/..%2f\(secretName)", "/images/a/../../\(secretName)",
                "/images/a%00/tiles/0/0/0.png", "/images/a/tiles/0/0/0.png%00.png", "/images/.%2e/tiles/0/0/0.png",
                "/images/a/..%5c..%5cetc/thumbnail.png", "/images/a/tiles/../../../etc/passwd",
                "/images/%2e/tiles/0/0/0.png", "/images/.hidden/tiles/0/0/0.png", "/images/a%",
                "/images/a/thumbnail.png/..", "/images//etc/passwd",
            ]
            let c = try RawHTTPClient(port: port)
            for path in attempts {
                try c.request(path)
                let r = try c.readResponse()
                #expect((400..<500).contains(r.status), "\(path) → \(r.status)")
                #expect(!r.text.contains("secret") && !r.text.contains("root:"), "\(path)")
            }
            // Still serving afterwards, on the same connection.
            try c.request("/images/a/tiles/0/0/0.png")
            #expect(try c.readResponse().status == 200)
        }
    }

    @Test(arguments: RootKind.allCases) func pyramidsCutWhileRunningAreServedAndDeletedOnesAre404(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try withTileServer(root, as: kind) { port throws in
            #expect(try fetch(port, "/images/late").status == 404)
            #expect(try fetch(port, "/images").json["total"] as? Int == 0)
            let m = try root.addPyramid("late", width: 600, height: 400)
            try root.publish()
            // In a folder (of folders or archives) an unknown name is looked up at once; a
            // bucket is listed, and a sources folder read, every rescan interval.
            if !kind.findsNewPyramidsAtOnce { #expect(try eventually { try fetch(port, "/images/late").status == 200 }) }
            let r = try fetch(port, "/images/late")
            #expect(r.status == 200 && r.json["width"] as? Int == 600)
            try #require(root.served).expect(try fetch(port, "/images/late/tiles/2/1/2.png").body, servedAs: "late/2/1/2.png")
            #expect(try fetch(port, "/images").json["total"] as? Int == 1)

            // Re-cut with another size: noticed after the manifest check interval (the
            // manifest is a new file: another inode, whatever its mtime).
            try root.addPyramid("late", width: 2000, height: 400)
            try root.publish()
            #expect(try eventually { try fetch(port, "/images/late").json["width"] as? Int == 2000 })
            #expect(try fetch(port, "/images/late/tiles/3/1/7.png").status == 200)
            _ = m

            // Deleted: 404, never a crash.
            try FileManager.default.removeItem(atPath: root.path + "/late")
            try root.publish()
            #expect(try eventually { try fetch(port, "/images/late").status == 404 })
            #expect(try fetch(port, "/images/late/tiles/0/0/0.png").status == 404)
            #expect(try fetch(port, "/images").json["total"] as? Int == 0)
        }
    }

    @Test func brokenManifestsDoNotTakeTheServerDown() throws {
        let root = try PyramidRoot()
        try root.addPyramid("good", width: 300, height: 300)
        try FileManager.default.createDirectory(atPath: root.path + "/bad", withIntermediateDirectories: true)
        try Data("{not json".utf8).write(to: URL(fileURLWithPath: root.path + "/bad/pyramid.json"))
        try withTileServer(root) { port throws in
            let r = try fetch(port, "/images/bad")
            #expect(r.status == 500)
            #expect(r.errorMessage?.contains("pyramid.json") == true)
            let list = try fetch(port, "/images").json
            #expect(list["total"] as? Int == 1)
            #expect(try fetch(port, "/images/good/tiles/0/0/0.png").status == 200)
        }
    }
}
