import Foundation
import ObjectStorage
import S3TestSupport
import Testing
import TilerCore
import TilerImaging
import TilerStorage
import TilerTestSupport
@testable import TilerServer
#if canImport(Glibc)
    import Glibc
#endif

/// Archives served from ROOT and from a bucket under faults: a damaged archive, one
/// replaced or truncated while it is served, object storage stopped, slowed and brought
/// back. (The routes themselves are checked over folders, archives and the bucket alike
/// by the parametrised route tests.)
@Suite(.serialized) struct ArchiveServeTests {
    /// `tiler cut --pad` stores edge tiles at the full tile size; DeepZoom and IIIF clients
    /// still get them clipped, drawn from the stored tile, whatever the root. (Over cut
    /// pyramids only: a `--sources` server makes unpadded tiles, as `tiler cut` by default.)
    @Test(arguments: RootKind.cutPyramids) func paddedEdgeTilesAreClippedForDeepZoomAndIIIF(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        guard let vips = findExecutable(["vips"]) else { throw ClientError("the vips command is missing: run scripts/install-deps") }
        let step = { (i: Int) in "\(root.path)/step-\(i).v" }
        let source = "\(root.path)/source.png"
        try runTool(vips, ["xyz", step(0), "1537", "997"])
        try runTool(vips, ["remainder_const", step(0), step(1), "256"])
        try runTool(vips, ["cast", step(1), step(2), "uchar"])
        try runTool(vips, ["bandjoin_const", step(2), source, "128"])
        for i in 0...2 { try FileManager.default.removeItem(atPath: step(i)) }
        let options = CutOptions(format: .png, pad: true, background: BackgroundColour(parsing: "#0000ff"))
        let cut = try PyramidCutter(root: URL(fileURLWithPath: root.path), options: options).cut(source, id: PyramidID("padded")!)
        try FileManager.default.removeItem(atPath: source)
        #expect(cut.manifest.isPadded && cut.manifest.maxLevel == 3)
        try withTileServer(root, as: kind) { port in
            // Stored: level 3, row 3, column 6 is 1 × 229 pixels of image in a 256 × 256 tile.
            let stored = try DecodedImage(encoded: try fetch(port, "/images/padded/tiles/3/3/6.png").body)
            #expect(stored.width == 256 && stored.height == 256)
            // DeepZoom level 11 is level 3: the same tile, clipped to the image.
            let dz = try fetch(port, "/images/padded_files/11/6_3.png")
            #expect(dz.status == 200, "\(dz.text.prefix(200))")
            let clipped = try DecodedImage(encoded: dz.body)
            #expect(clipped.width == 1 && clipped.height == 229)
            // Image pixel (1536, 768): red 0, green 0, blue 128 (not the blue padding).
            let pixel = clipped.mean(x: 0, y: 0, width: 1, height: 1)
            #expect(abs(pixel[0]) <= 2 && abs(pixel[1]) <= 2 && abs(pixel[2] - 128) <= 2, "\(pixel)")
            let iiif = try fetch(port, "/iiif/3/padded/1536,768,1,229/max/0/default.png")
            #expect(iiif.status == 200 && iiif.body == dz.body)
        }
    }

    /// An archive that is truncated or damaged makes that one image a 500 with one clear
    /// log line naming the archive and the fault; the other images are served, and the
    /// server notices when it is replaced by a good one again.
    @Test(.timeLimit(.minutes(10)), arguments: [RootKind.archives, .bucket])
    func damagedArchivesAffectOnlyTheirImage(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try root.addPyramid("good", width: 600, height: 400)
        try root.addPyramid("cut", width: 600, height: 400)
        try root.addPyramid("bent", width: 600, height: 400)
        let log = CollectedLog()
        try withTileServer(root, as: kind, log: log) { port in
            let served = try #require(root.served)
            #expect(try fetch(port, "/images/cut/tiles/2/1/1.png").status == 200)
            let whole = try served.archive("cut")
            // Replaced by a copy cut short, and by one with a damaged header.
            try served.replaceArchive("cut", with: Array(whole.prefix(whole.count / 2)))
            var bent = try served.archive("bent")
            for i in 0..<7 { bent[i] = 0x58 }  // the "PMTiles" signature
            try served.replaceArchive("bent", with: bent)
            #expect(try eventually { try fetch(port, "/images/cut").status == 500 && fetch(port, "/images/bent").status == 500 })
            for name in ["cut", "bent"] {
                for path in [
                    "/images/\(name)", "/images/\(name)/tiles/0/0/0.png", "/images/\(name)/thumbnail.png",
                    "/iiif/3/\(name)/info.json", "/images/\(name).dzi",
                ] {
                    let r = try fetch(port, path)
                    #expect(r.status == 500 && r.errorMessage == "image '\(name)' has a damaged archive", "\(path): \(r.text)")
                }
            }
            let list = try fetch(port, "/images").json
            #expect((list["images"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["good"])
            #expect(
                try fetch(port, "/images/good/tiles/2/1/1.png").body
                    == PyramidRoot.tileBytes("good", TileCoordinate(level: 2, row: 1, column: 1)))
            // One line each, naming the archive and what is wrong with it.
            let cutLines = log.messages.filter { $0.contains("cut.pmtiles") }
            #expect(cutLines.count == 1 && cutLines[0].contains("truncated"), "\(cutLines)")
            let bentLines = log.messages.filter { $0.contains("bent.pmtiles") }
            #expect(bentLines.count == 1 && bentLines[0].contains("PMTiles"), "\(bentLines)")
            // Put back: served again.
            try served.replaceArchive("cut", with: whole)
            #expect(try eventually { try fetch(port, "/images/cut/tiles/2/1/1.png").status == 200 })
        }
    }

    /// A local archive truncated in place while it is served (same file, same inode): the
    /// tiles past its new end are 500s with one log line each, the tiles before it and the
    /// other images still serve, and the next scan makes the whole image a 500.
    @Test(.timeLimit(.minutes(10))) func anArchiveTruncatedWhileServedIs500NotACrash() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 1000, height: 700)
        try root.addPyramid("b", width: 300, height: 200)
        let log = CollectedLog()
        try withRunningTileServer(
            root, as: .archives, log: log,
            {
                $0.rescanInterval = 3600; $0.cacheBytes = 0
            }
        ) { server in
            let port = server.port
            let path = try #require(root.served?.archivePath("a"))
            #expect(try fetch(port, "/images/a/tiles/2/2/3.png").status == 200)
            // Tile data is in tile-id order: level 2's tiles lie after levels 0 and 1.
            let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
            #expect(truncate(path, off_t(size - 2000)) == 0)
            let late = try fetch(port, "/images/a/tiles/2/2/3.png")
            #expect(late.status == 500 && late.errorMessage == "tile 2/2/3 of image 'a' is damaged on the server", "\(late.text)")
            _ = try fetch(port, "/images/a/tiles/2/2/3.png")
            #expect(log.messages.filter { $0.contains("a.pmtiles") && $0.contains("2/2/3") }.count == 1, "\(log.messages)")
            #expect(try fetch(port, "/images/a/tiles/0/0/0.png").status == 200)
            #expect(try fetch(port, "/images/b/tiles/0/0/0.png").status == 200)
            server.store.rescan()
            #expect(try fetch(port, "/images/a/tiles/0/0/0.png").status == 500)
            #expect(try fetch(port, "/images/b/tiles/0/0/0.png").status == 200)
        }
    }

    /// An archive replaced while clients read it (`pack --force`, a new upload): every
    /// answer is whole from one version. A tile's ETag always comes with the same bytes,
    /// the bytes are the old or the new version's, and once the server has the new
    /// version it never answers with the old one again.
    @Test(.timeLimit(.minutes(10)), arguments: [RootKind.archives, .bucket])
    func anArchiveReplacedWhileServedNeverMixesVersions(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        let manifest = try root.addPyramid("r", width: 2000, height: 1500)
        let geometry = try manifest.geometry()
        let tiles = geometry.levels.flatMap { l in
            (0..<l.rows).flatMap { r in (0..<l.columns).map { TileCoordinate(level: l.level, row: r, column: $0) } }
        }
        @Sendable func version2(_ t: TileCoordinate) -> [UInt8] { PyramidRoot.fakeFile(.png, Array("version 2 of \(t)".utf8)) }
        // A small cache: most answers are reads from the archive, not from memory.
        try withTileServer(
            root, as: kind,
            {
                $0.cacheBytes = 100_000; $0.rescanInterval = 0.05
            }
        ) { port in
            let failures = Failures()
            let seen = Locked((bodies: [String: [UInt8]](), sawNew: Set<Int>()))
            let stop = ManagedFlag()
            let group = DispatchGroup()
            for client in 0..<4 {
                group.enter()
                Thread {
                    defer { group.leave() }
                    do {
                        let c = try RawHTTPClient(port: port)
                        var rng = SystemRandomNumberGenerator()
                        var newSeen = false
                        while !stop.isSet {
                            let t = tiles.randomElement(using: &rng)!
                            try c.request("/images/r/tiles/\(t.level)/\(t.row)/\(t.column).png")
                            let r = try c.readResponse()
                            guard r.status == 200, let etag = r.header("ETag") else {
                                failures.add("\(t): \(r.status) \(r.text.prefix(200))")
                                continue
                            }
                            let old = PyramidRoot.tileBytes("r", t), new = version2(t)
                            if r.body == new {
                                newSeen = true
                            } else if r.body == old {
                                // The new version was seen by this client (after a swap): never the old again.
                                if newSeen { failures.add("\(t): the old version after the new one") }
                            } else {
                                failures.add("\(t): \(r.body.count) bytes of neither version")
                            }
                            seen.withLock {
                                if let before = $0.bodies[etag], before != r.body { failures.add("\(t): ETag \(etag) with two bodies") }
                                $0.bodies[etag] = r.body
                                if newSeen { $0.sawNew.insert(client) }
                            }
                        }
                    } catch {
                        failures.add("client \(client): \(error)")
                    }
                }.start()
            }
            // Let the clients read version 1, then replace the whole pyramid.
            #expect(eventually { seen.withLock { $0.bodies.count >= 20 } })
            for t in tiles {
                try Data(version2(t)).write(to: URL(fileURLWithPath: root.path + "/r/" + manifest.tilePath(t)))
            }
            try root.publish()
            #expect(eventually { seen.withLock { $0.sawNew.count == 4 } })
            stop.set()
            group.wait()
            #expect(failures.all.isEmpty, "\(failures.all.prefix(5))")
        }
    }

    /// Object storage stopped, hung and brought back while the server runs: requests that
    /// need it get 503 (refused) or 504 (no answer within `storageTimeout`) and never hang;
    /// cached tiles, manifests and `/images` keep serving; `/healthz` stays 200 and says
    /// storage is unavailable; and the server serves again by itself once storage answers.
    @Test(.timeLimit(.minutes(10))) func storageStoppedOrHungGets503Or504AndTheServerRecovers() throws {
        let storage = try S3TestServer(buckets: ["tiles"])
        defer { storage.shutdown() }
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 2000, height: 1500)
        try root.addPyramid("b", width: 300, height: 200)
        let served = try root.serve(as: .bucket, on: storage)
        var config = ServerConfiguration(root: served.root)
        config.http.port = 0
        config.http.threads = 2
        config.rescanInterval = 0.2
        served.configure(&config)
        config.storageTimeout = 1.5
        let log = CollectedLog()
        let server = TileServer(configuration: config, log: log.logger)
        try server.start()
        defer {
            server.stop()
            server.wait()
        }
        let port = server.port
        func health() throws -> [String: Any] { try fetch(port, "/healthz").json }
        #expect(try fetch(port, "/images/a/tiles/0/0/0.png").status == 200)
        #expect(try fetch(port, "/images/a").status == 200)
        #expect(try health()["storage"] as? String == "ok")

        // Stopped: connections are refused. An uncached tile is a 503 with Retry-After.
        try storage.stop()
        let refused = try fetch(port, "/images/a/tiles/3/2/3.png")
        #expect(refused.status == 503 && refused.header("Retry-After") == "1", "\(refused.status) \(refused.text)")
        #expect(refused.errorMessage?.contains("object storage") == true)
        // Cached answers and the listing still serve; /healthz is 200 and tells.
        #expect(try fetch(port, "/images/a/tiles/0/0/0.png").status == 200)
        #expect(try fetch(port, "/images/a").status == 200)
        #expect((try fetch(port, "/images").json["total"] as? Int) == 2)
        let down = try health()
        #expect(down["status"] as? String == "ok" && down["storage"] as? String == "unavailable", "\(down)")
        // Drawn images that need storage: 503 or 504 too, not a 500.
        let drawn = try fetch(port, "/iiif/3/a/0,0,600,600/300,/0/default.jpg")
        #expect(drawn.status == 503 || drawn.status == 504, "\(drawn.status) \(drawn.text)")

        // Hung: the store takes every request and answers none for 1000 s. Each request
        // that needs it still gets its answer: 504 past storageTimeout (the one trying the
        // store), or 503 at once (the others, while it is known to be down).
        try storage.delay("*", seconds: 1000)
        try storage.start()
        var statuses: [Int] = []
        for (level, row, column) in [(3, 1, 1), (3, 1, 2), (3, 2, 1)] {
            let r = try fetch(port, "/images/a/tiles/\(level)/\(row)/\(column).png")
            statuses.append(r.status)
            #expect(r.status == 503 || r.status == 504, "\(r.status) \(r.text)")
        }
        // Wait until a probe has had its turn and failed as a timeout.
        #expect(
            try eventually {
                let r = try fetch(port, "/images/a/tiles/3/0/0.png")
                statuses.append(r.status)
                return r.status == 504
            })
        #expect(try fetch(port, "/images/a/tiles/0/0/0.png").status == 200)

        // Back: the server serves again without a restart.
        try storage.delay("*", seconds: 0)
        #expect(try eventually { try fetch(port, "/images/a/tiles/3/2/3.png").status == 200 })
        #expect(
            try fetch(port, "/images/a/tiles/3/5/7.png").body == PyramidRoot.tileBytes("a", TileCoordinate(level: 3, row: 5, column: 7)))
        #expect(try eventually { try health()["storage"] as? String == "ok" })
        #expect(log.messages.filter { $0.contains("object storage is unavailable") }.count >= 1, "\(log.messages)")
        #expect(log.messages.contains { $0.contains("object storage answers again") }, "\(log.messages)")
    }

    /// A server started while storage is down serves nothing yet, says so on `/healthz`
    /// (200), and lists the archives once storage answers.
    @Test(.timeLimit(.minutes(10))) func aServerStartedWhileStorageIsDownRecoversByItself() throws {
        let storage = try S3TestServer(buckets: ["tiles"])
        defer { storage.shutdown() }
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 600, height: 400)
        let served = try root.serve(as: .bucket, on: storage)
        try storage.stop()
        var config = ServerConfiguration(root: served.root)
        config.http.port = 0
        config.rescanInterval = 0.1
        served.configure(&config)
        config.storageTimeout = 1
        let server = TileServer(configuration: config)
        try server.start()
        defer {
            server.stop()
            server.wait()
        }
        #expect(try fetch(server.port, "/images").json["total"] as? Int == 0)
        let health = try fetch(server.port, "/healthz")
        #expect(health.status == 200 && health.json["storage"] as? String == "unavailable")
        try storage.start()
        #expect(try eventually { try fetch(server.port, "/images/a/tiles/2/1/1.png").status == 200 })
        #expect(try fetch(server.port, "/healthz").json["storage"] as? String == "ok")
    }
}
