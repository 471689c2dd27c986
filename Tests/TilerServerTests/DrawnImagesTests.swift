import Foundation
import Synchronization
import Testing
import TilerCore
import TilerImaging
import TilerTestSupport
@testable import TilerServer
#if canImport(Glibc)
    import Glibc
#endif

/// Drawn images (IIIF regions, DeepZoom levels below the pyramid) under faults on disk:
/// they read tiles with the same rooted, no-follow, regular-file-only, size-bounded open
/// as tiles served as stored, answer a damaged tile with a 500 that is not cached and
/// names no path, and never allocate from a request's arithmetic unchecked.
@Suite(.serialized) struct DrawnImagesTests {
    /// A real pyramid `a` (the IIIF validator's 1000 × 1000 image, PNG tiles, levels 0…2)
    /// in a fresh root, and a red one, `ext`, in another root outside it.
    func pyramids() throws -> (root: PyramidRoot, outside: PyramidRoot) {
        let root = try PyramidRoot(), outside = try PyramidRoot()
        try root.cut(ValidatorImage.path, as: "a")
        try outside.cut(try outside.solidImage("red", width: 1000, height: 1000, rgb: (255, 0, 0)), as: "ext")
        return (root, outside)
    }

    /// Issue #11 item 2: a tile that is a link out of ROOT, a level folder that is one,
    /// and a FIFO where a tile should be. Before, drawings followed the links (serving the
    /// red image from outside ROOT) and the FIFO hung a pool thread for good, so the server
    /// could not stop.
    @Test(.timeLimit(.minutes(10))) func drawingsReadOnlyRegularFilesBeneathRoot() throws {
        let (root, outside) = try pyramids()
        let fm = FileManager.default
        try fm.removeItem(atPath: root.path + "/a/2/0/0.png")
        try fm.createSymbolicLink(atPath: root.path + "/a/2/0/0.png", withDestinationPath: outside.path + "/ext/2/0/0.png")
        try fm.removeItem(atPath: root.path + "/a/1")
        try fm.createSymbolicLink(atPath: root.path + "/a/1", withDestinationPath: outside.path + "/ext/1")
        try fm.removeItem(atPath: root.path + "/a/0/0/0.png")
        #expect(mkfifo(root.path + "/a/0/0/0.png", 0o644) == 0)
        let log = CollectedLog()
        try withTileServer(root, log: log) { port in
            // Level 2 (full resolution) through the linked tile; level 1 through the linked
            // folder; level 0 (the FIFO) for a small size and a DeepZoom level below ours.
            for path in [
                "/iiif/3/a/0,0,300,300/200,/0/default.png", "/iiif/3/a/full/500,/0/default.png",
                "/iiif/3/a/full/100,/0/default.png", "/images/a_files/7/0_0.png",
            ] {
                let r = try fetch(port, path)
                #expect(r.status == 500, "\(path): \(r.status)")
                #expect(r.header("Cache-Control") == "no-store", "\(path)")
                #expect(r.errorMessage == "image 'a' cannot be drawn; the server log has details", "\(path): \(r.text)")
            }
            // Drawings that touch none of them still work, from the real tiles.
            let r = try fetch(port, "/iiif/3/a/700,700,300,300/250,/0/default.png")
            #expect(r.status == 200)
            let image = try DecodedImage(encoded: r.body)
            // Square (7, 7) of the validator's image is (105, 155, 100).
            let c = image.mean(x: 10, y: 10, width: 30, height: 30), want: [Double] = [105, 155, 100]
            #expect(zip(c, want).allSatisfy { abs($0 - $1) < 6 }, "\(c) vs \(want)")
        }
        // The details went to the log: the link and the FIFO, by path.
        let lines = log.messages.joined(separator: "\n")
        #expect(lines.contains(root.path + "/a/2/0/0.png") && lines.contains(root.path + "/a/0/0/0.png"), "\(lines)")
    }

    /// Issue #11 item 2: a tile linked to `/dev/zero`, and a sparse 3 GB file in place of a
    /// tile. Before, the first was read until memory ran out (RSS past 12 GB) and the
    /// second read whole.
    @Test(.timeLimit(.minutes(10))) func endlessAndHugeFilesAreNotRead() throws {
        let (root, _) = try pyramids()
        let fm = FileManager.default
        try fm.removeItem(atPath: root.path + "/a/2/3/3.png")
        try fm.createSymbolicLink(atPath: root.path + "/a/2/3/3.png", withDestinationPath: "/dev/zero")
        let huge = root.path + "/a/2/3/2.png"
        #expect(truncate(huge, 3 << 30) == 0)
        let log = CollectedLog()
        try withTileServer(root, log: log) { port in
            for path in [
                "/iiif/3/a/768,768,232,232/200,/0/default.png", "/iiif/3/a/512,768,256,232/200,/0/default.png",
                "/images/a/tiles/2/3/3.png", "/images/a/tiles/2/3/2.png",
            ] {
                let r = try fetch(port, path)
                // The link is refused like a missing tile (404); the huge file is there but
                // cannot be a tile: damage, 500 (it was a 404 when the event loop's read
                // took it for missing).
                #expect(r.status == (path == "/images/a/tiles/2/3/3.png" ? 404 : 500), "\(path): \(r.status)")
            }
        }
        #expect(log.messages.contains { $0.contains("a/2/3/2.png") && $0.contains("larger than allowed") }, "\(log.messages)")
        #expect(log.messages.contains { $0.contains("a/2/3/3.png") && $0.contains("symbolic link") }, "\(log.messages)")
    }

    /// Issue #11 item 9: a tile cut short, or damaged in its middle, drawn into a region:
    /// 500, not cached, a message without paths or libvips' words; the detail logged once.
    /// Before, the truncated tile was drawn as grey and answered 200 with a day of caching.
    /// (Over cut pyramids only: sources have no tile files to damage; a damaged source is
    /// `SourcesServeTests.sourcesTruncatedReplacedAndDeletedWhileServed`.)
    @Test(arguments: RootKind.cutPyramids) func damagedTilesMakeDrawingsFailWithoutLeakingDetails(_ kind: RootKind) throws {
        let (root, _) = try pyramids()
        let whole = root.file("a/2/1/1.png")
        try Data(whole.prefix(whole.count / 2)).write(to: URL(fileURLWithPath: root.path + "/a/2/1/1.png"))
        // Same first and last bytes, garbage in the middle: passes the cheap check.
        var scrambled = root.file("a/2/2/2.png")
        for i in 100..<(scrambled.count - 100) { scrambled[i] = UInt8(truncatingIfNeeded: i &* 31) }
        try Data(scrambled).write(to: URL(fileURLWithPath: root.path + "/a/2/2/2.png"))
        let log = CollectedLog()
        try withTileServer(root, as: kind, log: log) { port in
            for path in ["/iiif/3/a/256,256,256,256/200,/0/default.png", "/iiif/3/a/512,512,256,256/200,/0/default.jpg"] {
                for _ in 0..<3 {
                    let r = try fetch(port, path)
                    #expect(r.status == 500 && r.header("Cache-Control") == "no-store", "\(path): \(r.status)")
                    let message = r.errorMessage ?? ""
                    #expect(message == "image 'a' cannot be drawn; the server log has details", "\(path): \(r.text)")
                    #expect(!r.text.contains(root.path) && !r.text.lowercased().contains("vips"))
                }
            }
            // Served as stored: the truncated one is refused (its end is missing); the
            // scrambled one cannot be told from a good one without decoding it.
            let truncated = try fetch(port, "/images/a/tiles/2/1/1.png")
            #expect(truncated.status == 500 && truncated.header("Cache-Control") == "no-store")
            #expect(truncated.errorMessage == "tile 2/1/1 of image 'a' is damaged on the server")
            #expect(try fetch(port, "/images/a/tiles/2/2/2.png").status == 200)
        }
        // A folder's fault names the tile's file; an archive's names the archive and the tile.
        let about11 = log.messages.filter { $0.contains(kind == .folders ? root.path + "/a/2/1/1.png" : "a.pmtiles: tile 2/1/1") }
        let about22 = log.messages.filter { $0.contains("2/2/2") }
        // One line for the drawing that met the truncated tile, one for the raw request;
        // one for the scrambled tile's drawing: each fault once, not once per request.
        #expect(about11.count == 2, "\(about11)")
        #expect(about22.count == 1, "\(about22)")
    }

    /// Issue #11 item 3: a drawing whose memory estimate is larger than the whole budget is
    /// a 400 that says so, before anything is read; smaller ones are drawn.
    /// Identical drawings asked for at once are drawn once: the others wait for it (and
    /// later ones find it cached). Before, every request that came while the first was
    /// being drawn drew it again.
    @Test(.timeLimit(.minutes(10))) func identicalDrawingsAtOnceAreDrawnOnce() throws {
        let (root, _) = try pyramids()
        try withRunningTileServer(root, { $0.http.renderThreads = 4 }) { server in
            let path = "/iiif/3/a/120,80,777,555/!400,400/0/default.jpg"
            let bodies = Mutex<[[UInt8]]>([])
            let failures = Mutex<[String]>([])
            let group = DispatchGroup()
            let start = DispatchSemaphore(value: 0)
            for _ in 0..<16 {
                group.enter()
                Thread {
                    start.wait()
                    do {
                        let r = try fetch(server.port, path)
                        if r.status == 200 { bodies.withLock { $0.append(r.body) } } else { failures.withLock { $0.append("\(r.status)") } }
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                    group.leave()
                }.start()
            }
            for _ in 0..<16 { start.signal() }
            group.wait()
            #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
            let all = bodies.withLock { $0 }
            #expect(all.count == 16 && Set(all).count == 1)
            #expect(server.store.drawingsMade == 1, "drawn \(server.store.drawingsMade) times")
        }
    }

    @Test(arguments: RootKind.allCases) func drawingsLargerThanTheBudgetAre400(_ kind: RootKind) throws {
        let (root, _) = try pyramids()
        try withTileServer(root, as: kind, { $0.renderMemoryBytes = 48 << 20 }) { port in
            let big = try fetch(port, "/iiif/3/a/full/1000,1000/45/default.webp")
            #expect(big.status == 400, "\(big.status) \(big.text)")
            #expect(big.errorMessage?.contains("more than this server allows for drawing (48 MiB)") == true, "\(big.text)")
            #expect(try fetch(port, "/iiif/3/a/full/200,/45/default.webp").status == 200)
        }
    }
}
