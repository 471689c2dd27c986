import Foundation
import Testing
import TilerCore
import TilerTestSupport
@testable import TilerImaging
@testable import TilerServer

/// The render budget (issue #11 item 3): drawings are admitted against a byte budget,
/// first come first served, wait a bounded time for room, and the server's peak memory
/// stays within it.
@Suite(.serialized) struct RenderBudgetTests {
    @Test(.timeLimit(.minutes(10))) func admitsWhatFitsQueuesTheRestInOrderAndGivesUp() {
        let budget = RenderBudget(capacity: 100, wait: 30)
        #expect(budget.admit(60) == .admitted)
        #expect(budget.admit(101) == .tooLarge)
        let results = Tally()
        let group = DispatchGroup()
        // Each waiter on a thread of its own: Dispatch's global queue runs only as many
        // blocks as there are cores, and in a full test run other tests can hold them all.
        func onThread(_ body: @escaping @Sendable () -> Void) {
            group.enter()
            Thread {
                body(); group.leave()
            }.start()
        }
        // 50 does not fit beside 60: it waits.
        onThread { results.add("50: \(budget.admit(50))") }
        #expect(eventually { budget.waiting == 1 })
        // 30 would fit beside 60, but 50 came first: it waits behind it.
        onThread { results.add("30: \(budget.admit(30))") }
        #expect(eventually { budget.waiting == 2 })
        #expect(budget.bytesInUse == 60 && results.items.isEmpty)
        budget.release(60)
        group.wait()
        #expect(Set(results.items) == ["50: admitted", "30: admitted"])
        #expect(budget.bytesInUse == 80 && budget.waiting == 0)
        budget.release(80)
        #expect(budget.bytesInUse == 0)

        // With no time to wait, what does not fit is refused.
        let impatient = RenderBudget(capacity: 100, wait: 0)
        #expect(impatient.admit(80) == .admitted)
        #expect(impatient.admit(30) == .busy)
        #expect(impatient.admit(20) == .admitted)
    }

    /// Decoded tiles kept between drawings live in room no drawing uses: a tile is kept
    /// only when it fits beside the drawings in flight (and none waits), and a drawing
    /// that needs the room takes it back at once, so keeping tiles never makes a drawing
    /// wait, and drawings and kept tiles together never exceed the budget.
    @Test func keptTilesBorrowIdleRoomAndGiveItBack() throws {
        let budget = RenderBudget(capacity: 1_000_000, wait: 0)
        let cache = PixelCache(capacity: 1_000_000, lender: budget)
        budget.lend(to: cache)
        let tile = TilePixels(bytes: [UInt8](repeating: 7, count: 99_936), width: 100, height: 333)  // 100,000 with bookkeeping
        let kept = DecodedTiles(cache: cache, owner: 1)
        for column in 0..<3 { kept.keep(tile, of: TileCoordinate(level: 0, row: 0, column: column), denominator: 1) }
        #expect(budget.bytesLent == 300_000 && cache.bytesInUse == 300_000)
        #expect(kept.pixels(of: TileCoordinate(level: 0, row: 0, column: 1), denominator: 1)?.bytes == tile.bytes)
        #expect(kept.pixels(of: TileCoordinate(level: 0, row: 0, column: 1), denominator: 2) == nil)

        // A drawing of the whole budget is admitted at once (the wait is 0): the kept
        // tiles give their room back.
        #expect(budget.admit(1_000_000) == .admitted)
        #expect(budget.bytesLent == 0 && cache.bytesInUse == 0)
        // Nothing is kept while the budget is taken.
        kept.keep(tile, of: TileCoordinate(level: 0, row: 0, column: 0), denominator: 1)
        #expect(cache.bytesInUse == 0 && budget.bytesLent == 0)
        budget.release(1_000_000)

        // Beside a drawing of 850,000 only one tile fits; the one drawn next takes back
        // just what it needs, the least recently used tile first.
        #expect(budget.admit(850_000) == .admitted)
        kept.keep(tile, of: TileCoordinate(level: 0, row: 0, column: 0), denominator: 1)
        kept.keep(tile, of: TileCoordinate(level: 0, row: 0, column: 1), denominator: 1)
        #expect(budget.bytesLent == 100_000)
        budget.release(850_000)
        kept.keep(tile, of: TileCoordinate(level: 0, row: 0, column: 1), denominator: 1)
        kept.keep(tile, of: TileCoordinate(level: 0, row: 0, column: 2), denominator: 1)
        #expect(budget.bytesLent == 300_000)
        _ = kept.pixels(of: TileCoordinate(level: 0, row: 0, column: 0), denominator: 1)  // used most recently
        #expect(budget.admit(800_000) == .admitted)
        #expect(budget.bytesLent == 200_000 && budget.bytesInUse == 800_000)
        #expect(kept.pixels(of: TileCoordinate(level: 0, row: 0, column: 0), denominator: 1) != nil)
        #expect(kept.pixels(of: TileCoordinate(level: 0, row: 0, column: 1), denominator: 1) == nil)
        budget.release(800_000)
    }

    /// Three rotated WebP drawings at once, each estimated at about 330 MB, against a
    /// 350 MiB budget: they are drawn one after another, and the server's peak RSS grows by
    /// no more than the budget. Then the memory goes back to the system. Before, the three
    /// ran together (and nothing was handed back: issue #11 saw 5.5 GB for four larger ones).
    @Test(.timeLimit(.minutes(10))) func concurrentDrawingsStayWithinTheBudget() throws {
        let root = try PyramidRoot()
        try Self.noisePyramid(root, id: "n", width: 4000, height: 4000, level: 3)
        let server = try ServeProcess([root.path, "--port", "0", "--render-memory-mb", "350", "--render-wait", "120"])
        let start = server.rss("VmRSS")
        let statuses = Tally()
        let group = DispatchGroup()
        for angle in [44, 45, 46] {
            DispatchQueue.global().async(group: group) {
                do {
                    let c = try RawHTTPClient(port: server.port, timeout: 120)
                    try c.request("/iiif/3/n/full/2000,2000/\(angle)/default.webp")
                    statuses.add("\(try c.readResponse().status)")
                } catch {
                    statuses.add("\(error)")
                }
            }
        }
        group.wait()
        let peak = server.rss("VmHWM")
        #expect(statuses.items == ["200", "200", "200"], "\(statuses.items)")
        #expect(peak - start <= 350, "peak RSS \(peak) MB from \(start) MB at start")
        #expect(eventually { server.rss("VmRSS") <= start + 100 }, "RSS stayed at \(server.rss("VmRSS")) MB")
    }

    /// A `width × height` pyramid whose level `level` is real tiles (one 256 px PNG of RGB
    /// noise, the worst case for compression, copied) and whose other levels are absent.
    static func noisePyramid(_ root: PyramidRoot, id: String, width: Int, height: Int, level: Int) throws {
        guard let vips = findExecutable(["vips"]) else { throw ClientError("the vips command is missing") }
        let noise = root.path + "/noise.v", grey = root.path + "/grey.v", tile = root.path + "/tile.png"
        try runTool(vips, ["gaussnoise", noise, "256", "256", "--mean", "128", "--sigma", "40"])
        try runTool(vips, ["cast", noise, grey, "uchar"])
        try runTool(vips, ["bandjoin", "\(grey) \(grey) \(grey)", tile])
        let bytes = try Data(contentsOf: URL(fileURLWithPath: tile))
        let geometry = try PyramidGeometry(width: width, height: height)
        let manifest = PyramidManifest(
            id: PyramidID(id)!, geometry: geometry, format: .png,
            thumbnail: .init(file: "thumbnail.png", width: 256, height: 256), bands: 3)
        let l = geometry.level(level)
        for row in 0..<l.rows {
            try FileManager.default.createDirectory(atPath: "\(root.path)/\(id)/\(level)/\(row)", withIntermediateDirectories: true)
            for column in 0..<l.columns {
                let t = TileCoordinate(level: level, row: row, column: column)
                try bytes.write(to: URL(fileURLWithPath: "\(root.path)/\(id)/\(manifest.tilePath(t))"))
            }
        }
        try root.write(manifest)
    }
}

extension ServeProcess {
    /// A memory figure of the server from `/proc/PID/status` (`VmRSS`, `VmHWM`), in MB.
    func rss(_ field: String) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8) else { return -1 }
        for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
            return (Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0) / 1024
        }
        return -1
    }
}
