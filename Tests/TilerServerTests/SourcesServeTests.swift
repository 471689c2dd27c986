import Foundation
import Testing
import TilerCore
import TilerHTTP
import TilerTestSupport
@testable import TilerImaging
@testable import TilerServer

@Suite struct SourcesServeTests {
    /// The acceptance test: every route answers for a source as for the pyramid `tiler
    /// cut` makes of it; full-resolution tiles are the cut's bytes (same pixels, same
    /// encoder), lower levels within a mean absolute difference of 2.
    @Test(.timeLimit(.minutes(10)), arguments: SourceKind.allCases)
    func aSourceIsServedAsThePyramidTheCutWouldMake(_ kind: SourceKind) throws {
        let folder = try SourceFolder()
        let file = try folder.addPicture("picture", width: 2600, height: 1800, as: kind)
        let cut = try folder.cutPyramid(file, as: "picture")
        try withSourcesServer(folder) { server in
            let port = server.port
            let made = try #require(server.store.pyramids.first { $0.id.rawValue == "picture" })
            let source = try #require(made.source as? SourceFileSource)
            switch kind {
            case .pyramidalTIFF: #expect(source.pyramid.levelSources.contains { $0.hasPrefix("page") }, "\(source.pyramid.levelSources)")
            case .jpeg: #expect(source.pyramid.levelSources.contains { $0.hasPrefix("shrink") }, "\(source.pyramid.levelSources)")
            case .png: #expect(source.pyramid.levelSources.filter { $0 == "file" }.count == 1)
            }
            // The manifest: every field the cut wrote, but the time.
            var expected = cut
            expected.created = made.manifest.created
            #expect(made.manifest == expected)
            let listing = try fetch(port, "/images")
            #expect(listing.status == 200 && listing.text.contains("\"id\":\"picture\""))
            let document = try fetch(port, "/images/picture")
            #expect(document.status == 200 && document.text.contains("\"maxLevel\":\(cut.maxLevel)"))

            let geometry = try cut.geometry()
            let c = try RawHTTPClient(port: port)
            for level in geometry.levels {
                for row in 0..<level.rows {
                    for column in 0..<level.columns {
                        let tile = TileCoordinate(level: level.level, row: row, column: column)
                        try c.request("/images/picture/tiles/\(tile.level)/\(tile.row)/\(tile.column).png")
                        let r = try c.readResponse()
                        #expect(r.status == 200 && r.header("Content-Type") == "image/png")
                        let reference = folder.cut.file("picture/" + cut.tilePath(tile))
                        if level.level == geometry.maxLevel {
                            #expect(r.body == reference, "full-resolution tile \(tile) differs from the cut's")
                        } else {
                            let mad = try meanAbsoluteDifference(r.body, reference)
                            #expect(mad <= 2, "tile \(tile): mean absolute difference \(mad)")
                        }
                        #expect(r.header("ETag") != nil && r.header("Last-Modified") != nil)
                    }
                }
            }
            let thumbnail = try fetch(port, "/images/picture/thumbnail.png")
            #expect(thumbnail.status == 200)
            #expect(try meanAbsoluteDifference(thumbnail.body, folder.cut.file("picture/thumbnail.png")) <= 2)

            // DeepZoom and IIIF over the same tiles.
            let dzi = try fetch(port, "/images/picture.dzi")
            #expect(dzi.status == 200 && dzi.text.contains("Width=\"2600\""))
            let dzTop = try fetch(port, "/images/picture_files/12/0_0.png")  // ceil(log2(2600)) = 12
            #expect(dzTop.status == 200)
            #expect(dzTop.body == folder.cut.file("picture/\(cut.tilePath(TileCoordinate(level: geometry.maxLevel, row: 0, column: 0)))"))
            #expect(try fetch(port, "/iiif/3/picture/info.json").status == 200)
            #expect(try fetch(port, "/iiif/3/picture/0,0,512,512/256,/0/default.png").status == 200)

            // Errors and validators as for any pyramid.
            #expect(try fetch(port, "/images/picture/tiles/\(geometry.maxLevel + 1)/0/0.png").status == 404)
            #expect(try fetch(port, "/images/picture/tiles/0/0/x.png").status == 400)
            #expect(try fetch(port, "/images/picture/tiles/0/0/0.jpg").status == 404)
            let first = try fetch(port, "/images/picture/tiles/1/0/0.png")
            let etag = try #require(first.header("ETag"))
            #expect(try fetch(port, "/images/picture/tiles/1/0/0.png", headers: ["If-None-Match: \(etag)"]).status == 304)
            #expect(try fetch(port, "/images/picture/tiles/1/0/0.png", method: "HEAD").status == 200)
        }
    }

    /// EXIF orientations 5–8 (those that swap width and height) on sources with stored
    /// levels: a pyramidal TIFF whose pages carry the tag, and a JPEG read with
    /// shrink-on-load. Served tiles are `vips autorot` of the source: at full resolution
    /// exactly, below within a mean absolute difference of 2 of `vips shrink` of it. The
    /// source is 2561 × 1794 as stored: odd across, so the TIFF's second page (1280 wide)
    /// is a pixel short of its level (1281), whose last tile row or column is one pixel of
    /// that missing edge; and a stored level is used only where its pixel grid is the
    /// level's (not when autorotation reverses the odd axis: orientations 7 and 8). Before,
    /// that one-pixel row was a 500 (a region outside the stored level), and so was every
    /// tile made from it, upright too (orientation 1).
    @Test(.timeLimit(.minutes(10)), arguments: [SourceKind.pyramidalTIFF, .jpeg], [1, 5, 6, 7, 8])
    func orientedSourcesAreServedAsVipsAutorotTurnsThem(_ kind: SourceKind, _ orientation: Int) throws {
        let folder = try SourceFolder()
        let vips = folder.pictures.vips
        let work = folder.sources.path + "/.work"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        try folder.pictures.writePicture(width: 2561, height: 1794, to: "\(work)/plain.jpg", as: .jpeg, work: work)
        let oriented = "\(work)/oriented.jpg"
        let plain = try Array(Data(contentsOf: URL(fileURLWithPath: "\(work)/plain.jpg")))
        try Data(jpegWithOrientation(plain, UInt16(orientation))).write(to: URL(fileURLWithPath: oriented))
        let staged = "\(work)/turned.\(kind.fileExtension)"
        if kind == .jpeg {
            #expect(rename(oriented, staged) == 0)
        } else {
            try folder.pictures.save(oriented, to: staged, as: kind)
        }
        #expect(try runTool("/usr/bin/env", ["vipsheader", "-f", "orientation", staged]).hasPrefix("\(orientation)"))
        let file = "\(folder.sources.path)/turned.\(kind.fileExtension)"
        #expect(rename(staged, file) == 0)
        try runTool(vips, ["autorot", file, "\(work)/upright.v"])

        try withSourcesServer(folder) { server in
            let pyramid = try #require(server.store.pyramids.first)
            let source = try #require(pyramid.source as? SourceFileSource)
            let geometry = pyramid.geometry
            #expect(
                orientation == 1 ? (geometry.width, geometry.height) == (2561, 1794) : (geometry.width, geometry.height) == (1794, 2561))
            let aligned = [1, 5, 6].contains(orientation)
            #expect(
                source.pyramid.levelSources[geometry.maxLevel - 1]
                    == (aligned ? (kind == .jpeg ? "shrink 2" : "page 1") : "from the level above"),
                "\(source.pyramid.levelSources)")
            for level in geometry.levels {
                let k = geometry.maxLevel - level.level
                let reference = "\(work)/level-\(k).v"
                if k == 0 {
                    try runTool(vips, ["copy", "\(work)/upright.v", reference])
                } else {
                    try runTool(vips, ["shrink", "\(work)/upright.v", reference, "\(1 << k)", "\(1 << k)", "--ceil"])
                }
                let expected = try VipsImageHandle.openSequential(path: reference)
                #expect((expected.width, expected.height) == (level.width, level.height))
                let pixels = try expected.pixels(), bands = expected.bands
                for row in 0..<level.rows {
                    for column in 0..<level.columns {
                        let tile = TileCoordinate(level: level.level, row: row, column: column)
                        let r = try fetch(server.port, "/images/turned/tiles/\(tile.level)/\(tile.row)/\(tile.column).png")
                        guard r.status == 200 else {
                            Issue.record("tile \(tile): \(r.status) \(r.text.prefix(200))")
                            continue
                        }
                        let got = try decodedPixels(r.body)
                        let rect = geometry.rectInLevel(tile)
                        guard (got.width, got.height, got.bands) == (rect.width, rect.height, bands) else {
                            Issue.record(
                                "tile \(tile) is \(got.width)×\(got.height)×\(got.bands), not \(rect.width)×\(rect.height)×\(bands)")
                            continue
                        }
                        var sum = 0
                        for y in 0..<rect.height {
                            for x in 0..<rect.width * bands {
                                sum += abs(
                                    Int(got.pixels[y * rect.width * bands + x])
                                        - Int(pixels[((rect.y + y) * level.width + rect.x) * bands + x]))
                            }
                        }
                        let mad = Double(sum) / Double(got.pixels.count)
                        if k == 0 {
                            #expect(sum == 0, "orientation \(orientation): full-resolution tile \(tile) is not vips autorot's (MAD \(mad))")
                        } else {
                            #expect(mad <= 2, "orientation \(orientation): tile \(tile): mean absolute difference \(mad)")
                        }
                    }
                }
            }
        }
    }

    /// A level is made the same way whatever is cached: asking coarse levels first (made
    /// from the source or from the level above, nothing cached) and fine levels first
    /// (the level above cached) gives the same bytes.
    @Test(.timeLimit(.minutes(10)), arguments: SourceKind.allCases)
    func pixelsDoNotDependOnRequestOrder(_ kind: SourceKind) throws {
        let folder = try SourceFolder()
        try folder.addPicture("order", width: 1100, height: 700, as: kind)
        func everyTile(coarseFirst: Bool) throws -> [TileCoordinate: [UInt8]] {
            var tiles: [TileCoordinate: [UInt8]] = [:]
            try withSourcesServer(folder, { $0.cacheBytes = 0 }) { server in
                let geometry = try #require(server.store.pyramids.first).geometry
                let levels = coarseFirst ? Array(geometry.levels) : geometry.levels.reversed()
                for level in levels {
                    for row in 0..<level.rows {
                        for column in 0..<level.columns {
                            let t = TileCoordinate(level: level.level, row: row, column: column)
                            let r = try fetch(server.port, "/images/order/tiles/\(t.level)/\(t.row)/\(t.column).png")
                            #expect(r.status == 200)
                            tiles[t] = r.body
                        }
                    }
                }
            }
            return tiles
        }
        let coarse = try everyTile(coarseFirst: true)
        let fine = try everyTile(coarseFirst: false)
        #expect(coarse.count == fine.count)
        for (t, bytes) in coarse { #expect(fine[t] == bytes, "tile \(t) depends on the order of requests") }
    }

    /// 64 clients at once ask for every tile of the deepest level of one source, in
    /// different orders: each gets the right bytes, and each tile is made once.
    @Test(.timeLimit(.minutes(10))) func sixtyFourClientsOnTheDeepestLevelMakeEachTileOnce() throws {
        let folder = try SourceFolder()
        let file = try folder.addPicture("large", width: 3000, height: 2000, as: .pyramidalTIFF)
        let cut = try folder.cutPyramid(file, as: "large")
        let geometry = try cut.geometry()
        let deepest = geometry.level(geometry.maxLevel)
        let tiles = (0..<deepest.rows).flatMap { row in
            (0..<deepest.columns).map { TileCoordinate(level: deepest.level, row: row, column: $0) }
        }
        // As `tiler serve --sources` sets it: the 64 requests fit in the render queue.
        try withSourcesServer(
            folder,
            {
                $0.http.threads = 2; $0.http.maximumQueuedRenders = ServerConfiguration.sourcesQueuedRenders
            }
        ) { server in
            let source = try #require(server.store.pyramids.first?.source as? SourceFileSource)
            let failures = Failures()
            // Real threads (not GCD's pool, which other tests in this process share).
            let group = DispatchGroup()
            let referenceBytes = Dictionary(uniqueKeysWithValues: tiles.map { ($0, folder.cut.file("large/" + cut.tilePath($0))) })
            for client in 0..<64 {
                group.enter()
                Thread {
                    defer { group.leave() }
                    do {
                        let c = try RawHTTPClient(port: server.port)
                        var order = tiles
                        var generator = SeededGenerator(seed: UInt64(client + 1))
                        order.shuffle(using: &generator)
                        for t in order {
                            try c.request("/images/large/tiles/\(t.level)/\(t.row)/\(t.column).png")
                            let r = try c.readResponse()
                            if r.status != 200 || r.body != referenceBytes[t] {
                                failures.add("client \(client): \(t): \(r.status)")
                            }
                        }
                    } catch {
                        failures.add("client \(client): \(error)")
                    }
                }.start()
            }
            group.wait()
            #expect(failures.all.isEmpty, "\(failures.all.prefix(5))")
            #expect(source.pyramid.tilesMade == tiles.count, "\(source.pyramid.tilesMade) tiles made for \(tiles.count)")
        }
    }

    /// A file truncated, replaced or deleted while served: no crash, no mixed pixels, the
    /// other sources keep serving, and the catalog follows the folder.
    @Test(.timeLimit(.minutes(10))) func sourcesTruncatedReplacedAndDeletedWhileServed() throws {
        let folder = try SourceFolder()
        let steady = try folder.addPicture("steady", width: 800, height: 600, as: .jpeg)
        let changing = try folder.addPicture("changing", width: 1200, height: 800, as: .pyramidalTIFF)
        let steadyCut = try folder.cutPyramid(steady, as: "steady")
        let log = CollectedLog()
        try withSourcesServer(folder, log: log, { $0.cacheBytes = 0 }) { server in
            let port = server.port
            let steadyTile = "/images/steady/tiles/\(steadyCut.maxLevel)/0/0.png"
            let reference = folder.cut.file("steady/" + steadyCut.tilePath(TileCoordinate(level: steadyCut.maxLevel, row: 0, column: 0)))
            #expect(try fetch(port, "/images/changing/tiles/0/0/0.png").status == 200)

            // Truncated in place: answers are 200 (what was read before) or 500, never a
            // crash; after the scan the image is a new generation.
            let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: changing)))
            let handle = try #require(FileHandle(forWritingAtPath: changing))
            try handle.truncate(atOffset: UInt64(bytes.count / 3))
            try handle.close()
            for path in ["/images/changing/tiles/3/2/3.png", "/images/changing/tiles/2/1/1.png", "/images/changing/thumbnail.png"] {
                let status = try fetch(port, path).status
                #expect([200, 404, 500].contains(status), "\(path): \(status)")
            }
            #expect(try fetch(port, steadyTile).body == reference)

            // Replaced by another picture (a rename): after the scan, the new one's pixels.
            let before = try fetch(port, "/images/changing/tiles/0/0/0.png")
            let other = try SourceFolder()
            let replacement = try other.addPicture("changing", width: 1000, height: 1000, as: .pyramidalTIFF, seed: 3)
            let otherCut = try other.cutPyramid(replacement, as: "changing")
            try Data(contentsOf: URL(fileURLWithPath: replacement)).write(to: URL(fileURLWithPath: changing + ".new"))
            #expect(rename(changing + ".new", changing) == 0)
            #expect(try eventually { try fetch(port, "/images/changing").text.contains("\"width\":1000") })
            let top = TileCoordinate(level: otherCut.maxLevel, row: 1, column: 1)
            let fresh = try fetch(port, "/images/changing/tiles/\(top.level)/\(top.row)/\(top.column).png")
            #expect(fresh.body == other.cut.file("changing/" + otherCut.tilePath(top)))
            #expect(try fetch(port, "/images/changing/tiles/0/0/0.png").header("ETag") != before.header("ETag"))

            // Deleted: 404 once the scan has seen it; the other image still serves.
            #expect(unlink(changing) == 0)
            #expect(try eventually { try fetch(port, "/images/changing").status == 404 })
            #expect(try fetch(port, steadyTile).body == reference)
        }
    }

    /// A decompression bomb (a tiny PNG that claims 60000 × 60000 pixels) is refused from
    /// its header before any pixel is decoded: 500 for it, every other image served.
    @Test(.timeLimit(.minutes(10))) func aDecompressionBombIsRefusedAndOthersKeepServing() throws {
        let folder = try SourceFolder()
        try folder.addPicture("fine", width: 600, height: 400, as: .png)
        try Data(Self.pngClaiming(width: 60000, height: 60000)).write(to: URL(fileURLWithPath: folder.sources.path + "/bomb.png"))
        let log = CollectedLog()
        try withSourcesServer(folder, log: log) { server in
            let bomb = try fetch(server.port, "/images/bomb/tiles/0/0/0.png")
            #expect(bomb.status == 500)
            #expect(try fetch(server.port, "/images/bomb").status == 500)
            #expect(!(try fetch(server.port, "/images").text.contains("bomb")))
            #expect(try fetch(server.port, "/images/fine/tiles/0/0/0.png").status == 200)
            #expect(log.messages.filter { $0.contains("bomb.png") && $0.contains("--max-pixels") }.count == 1)
        }
        // A lower --max-pixels refuses a file the default accepts.
        try withSourcesServer(folder, { $0.sources?.maxPixels = 100_000 }) { server in
            let refused = try fetch(server.port, "/images/fine/tiles/0/0/0.png")
            #expect(refused.status == 500)
        }
    }

    /// The start of a PNG whose header claims `width × height` 8-bit RGB pixels, with a
    /// few bytes of image data: all a decoder reads before it allocates.
    static func pngClaiming(width: Int, height: Int) -> [UInt8] {
        func crc(_ bytes: [UInt8]) -> [UInt8] {
            var c: UInt32 = 0xFFFF_FFFF
            for b in bytes {
                c ^= UInt32(b)
                for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
            }
            c ^= 0xFFFF_FFFF
            return [UInt8(c >> 24), UInt8(c >> 16 & 0xFF), UInt8(c >> 8 & 0xFF), UInt8(c & 0xFF)]
        }
        func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            let n = UInt32(data.count)
            let body = Array(type.utf8) + data
            return [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + body + crc(body)
        }
        func be(_ v: Int) -> [UInt8] { [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        let header = be(width) + be(height) + [8, 2, 0, 0, 0]
        // zlib: one final stored block of 5 zero bytes (a fraction of the first row).
        let data: [UInt8] = [0x78, 0x01, 0x01, 0x05, 0x00, 0xFA, 0xFF, 0, 0, 0, 0, 0]
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", header) + chunk("IDAT", data) + chunk("IEND", [])
    }

    /// `--keep`: tiles made are written into ROOT/ID/ with a partial manifest; a later
    /// server without `--sources` serves exactly those tiles and 404s the others. While
    /// sources are served, the kept folder does not win over its source.
    @Test(.timeLimit(.minutes(10))) func keptTilesAreServedWithoutTheSource() throws {
        let folder = try SourceFolder()
        try folder.addPicture("kept", width: 900, height: 700, as: .jpeg)
        let root = try PyramidRoot()
        var served: [String: [UInt8]] = [:]
        let asked = ["/images/kept/tiles/2/0/0.png", "/images/kept/tiles/2/1/2.png", "/images/kept/tiles/0/0/0.png"]
        try withSourcesServer(folder, root: root, { $0.sources?.keep = true }) { server in
            for path in asked {
                let r = try fetch(server.port, path)
                #expect(r.status == 200)
                served[path] = r.body
            }
            // The kept folder (partial) appears in ROOT, and the source still wins.
            server.store.rescan()
            #expect(server.store.pyramids.first { $0.id.rawValue == "kept" }?.source is SourceFileSource)
            #expect(try fetch(server.port, "/images/kept/tiles/1/0/1.png").status == 200)
        }
        let manifest = try JSONDecoder().decode(PyramidManifest.self, from: Data(root.file("kept/pyramid.json")))
        #expect(manifest.partial == true && manifest.width == 900)
        try withTileServer(root) { port throws in
            for path in asked { #expect(try fetch(port, path).body == served[path]) }
            #expect(try fetch(port, "/images/kept/tiles/2/2/3.png").status == 404)
        }
    }

    /// The command: `TILER_SOURCES` (or `--sources`) serves the folder, with
    /// `--sources-format jpeg`; a `--sources` that is not a folder is refused.
    @Test(.timeLimit(.minutes(10))) func theCommandServesTheSourcesFolder() throws {
        let folder = try SourceFolder()
        try folder.addPicture("by-env", width: 700, height: 500, as: .jpeg)
        let root = try PyramidRoot()
        let server = try ServeProcess(
            [root.path, "--port", "0", "--sources-format", "jpeg"], environment: ["TILER_SOURCES": folder.sources.path])
        defer { server.stop() }
        #expect(server.startLine.contains("serving"))
        let tile = try fetch(server.port, "/images/by-env/tiles/2/0/0.jpg")
        #expect(tile.status == 200 && tile.header("Content-Type") == "image/jpeg")
        #expect(try fetch(server.port, "/images/by-env_files/10/0_0.jpg").status == 200)

        let refused = Process()
        refused.executableURL = URL(fileURLWithPath: try tilerBinary())
        refused.arguments = ["serve", root.path, "--port", "0", "--sources", root.path + "/missing"]
        refused.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        refused.standardError = errors
        try refused.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        refused.waitUntilExit()
        #expect(refused.terminationStatus != 0 && text.contains("is not a folder"))
    }

    /// Issue 31 #7: sources without random access (PNG here) are decoded whole by libvips
    /// to a deleted temporary file in `TMPDIR` before their tiles are made. Before, each
    /// stayed open for as long as the server ran, without a bound (three 16000² PNGs:
    /// 3 GB). Now they share `--sources-spill-mb`: three PNGs of 12 MB decoded each, one
    /// tile of each asked in turn, under a 20 MiB budget: the temporary disk the server
    /// holds (measured from its open descriptors) never passes the budget, every tile is
    /// served, a PNG needing more than the whole budget is a 500 (the others still
    /// served), and deleting the files frees the disk.
    @Test(.timeLimit(.minutes(10))) func decodingSourcesStaysWithinTheSpillBudget() throws {
        let folder = try SourceFolder()
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let temporary = scratch.path("tmp")
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        let ids = ["s0", "s1", "s2"]
        for id in ids {
            try runTool(folder.pictures.vips, ["black", "\(folder.sources.path)/\(id).png", "2000", "2000", "--bands", "3"])
        }
        try runTool(folder.pictures.vips, ["black", "\(folder.sources.path)/huge.png", "3000", "2700", "--bands", "3"])
        let root = try PyramidRoot()
        let budget = 20 << 20
        let server = try ServeProcess(
            [
                root.path, "--port", "0", "--sources", folder.sources.path, "--sources-spill-mb", "20", "--rescan-interval", "0.2",
                "--sources-format", "png",
            ],
            environment: ["TMPDIR": temporary])
        defer { server.stop() }
        let port = server.port
        // The bytes of the server's open files under `temporary` (libvips' deleted ones).
        let pid = server.process.processIdentifier
        @Sendable func spill() -> Int {
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
            var total = 0
            for fd in fds {
                let link = "/proc/\(pid)/fd/\(fd)"
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: link), target.hasPrefix(temporary) else {
                    continue
                }
                var info = stat()
                if stat(link, &info) == 0 { total += Int(info.st_size) }
            }
            return total
        }
        let peak = Locked((bytes: 0, sampling: true))
        let sampler = Thread {
            while peak.withLock({ $0.sampling }) {
                let now = spill()
                peak.withLock { $0.bytes = max($0.bytes, now) }
                usleep(2_000)
            }
        }
        sampler.start()
        var sizes: [Int] = []
        for round in 0..<2 {
            for id in ids {
                let tile = try fetch(port, "/images/\(id)/tiles/3/\(round)/0.png")
                #expect(tile.status == 200, "\(id): \(tile.status) \(tile.text)")
                sizes.append(spill())
            }
        }
        let huge = try fetch(port, "/images/huge/tiles/3/0/0.png")
        #expect(huge.status == 500, "\(huge.status) \(huge.text)")
        #expect(try fetch(port, "/images/s1/tiles/2/0/0.png").status == 200)
        peak.withLock { $0.sampling = false }
        while !sampler.isFinished { usleep(1_000) }
        let highest = peak.withLock { $0.bytes }
        print("spill after each tile: \(sizes.map { $0 >> 20 }) MiB; peak \(highest) bytes, budget \(budget)")
        #expect(sizes.allSatisfy { $0 > 0 && $0 <= budget }, "\(sizes)")
        #expect(highest <= budget, "peak \(highest)")
        for id in ids { try FileManager.default.removeItem(atPath: "\(folder.sources.path)/\(id).png") }
        #expect(eventually { spill() == 0 }, "\(spill())")
    }

    /// A cut pyramid with the same id wins over a source; files no loader reads are skipped.
    @Test func aCutPyramidWinsAndOtherFilesAreSkipped() throws {
        let folder = try SourceFolder()
        let file = try folder.addPicture("both", width: 500, height: 300, as: .png)
        try Data("not an image".utf8).write(to: URL(fileURLWithPath: folder.sources.path + "/notes.txt"))
        let root = try PyramidRoot()
        try root.addPyramid("both", width: 2000, height: 100)
        _ = file
        try withSourcesServer(folder, root: root) { server throws in
            #expect(try fetch(server.port, "/images/both").text.contains("\"width\":2000"))
            #expect(try fetch(server.port, "/images/notes").status == 404)
        }
    }
}

/// A reproducible random order.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return state ^ (state >> 29)
    }
}
