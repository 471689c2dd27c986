import Foundation
import S3TestSupport
import Testing
import TilerCore
import TilerServer
import TilerTestSupport
#if canImport(Glibc)
    import Glibc
#endif

/// `tiler serve` over a bucket that misbehaves while the server starts (issue 31): a
/// listing that never ends, archive reads that hang. The server listens at once, answers
/// `/healthz`, and honours SIGTERM at any point.
@Suite(.serialized) struct ServeStartupTests {
    /// Issue 31 #6: a bucket of archives whose range reads hang. Before, `tiler serve`
    /// opened each archive in turn before listening (one `--storage-timeout` each) and
    /// read SIGTERM only then. Now it listens at once, `/healthz` answers 200 (saying the
    /// catalog is loading), SIGTERM ends it with exit 0 within moments, and once reads
    /// answer again every archive is served.
    @Test(.timeLimit(.minutes(10))) func sigtermDuringStartUpExitsAtOnce() throws {
        let storage = try S3TestServer(buckets: ["tiles"])
        defer { storage.shutdown() }
        let root = try PyramidRoot()
        let ids = (0..<12).map { "img\($0)" }
        for id in ids { try root.addPyramid(id, width: 300, height: 200) }
        let served = try root.serve(as: .bucket, on: storage)
        try storage.delay("RANGE", seconds: 1000)
        defer { try? storage.delay("RANGE", seconds: 0) }
        let arguments = [served.root, "--storage-timeout", "2", "--rescan-interval", "0.2", "--port", "0"]

        // SIGTERM while the first archives are being opened.
        let first = try ServeProcess(arguments, environment: storage.environment, seconds: 15)
        let health = try fetch(first.port, "/healthz")
        #expect(health.status == 200, "\(health.status) \(health.text)")
        let exit = first.terminate(within: 10)
        print(
            "SIGTERM during start-up (12 archives, range reads hung, --storage-timeout 2): exit after \(exit.map { String(format: "%.3f", $0) } ?? "more than 10") s"
        )
        #expect(exit != nil && exit! < 5, "\(String(describing: exit))")
        #expect(first.process.terminationReason == .exit && first.process.terminationStatus == 0)

        // Left running: it answers throughout, lists nothing it cannot open, and serves
        // every archive once reads answer again.
        let second = try ServeProcess(arguments, environment: storage.environment, seconds: 15)
        #expect(try fetch(second.port, "/healthz").status == 200)
        let listing = try fetch(second.port, "/images")
        #expect(listing.status == 200 || listing.status == 503, "\(listing.status) \(listing.text)")
        try storage.delay("RANGE", seconds: 0)
        #expect(try eventually(within: 60) { try fetch(second.port, "/images").json["total"] as? Int == ids.count })
        #expect(try fetch(second.port, "/images/img3/tiles/0/0/0.png").status == 200)
        #expect(try fetch(second.port, "/healthz").json["catalog"] == nil)
        #expect(second.terminate(within: 10) != nil)
    }

    /// Issue 31 #5: a store that gives the same `NextContinuationToken` on every page.
    /// Before, the listing never ended, so `tiler serve` never listened (and its memory
    /// grew with every page). Now the repeated token ends the listing with one log line;
    /// the server listens, answers `/healthz` and `/images`, and lists the archives once
    /// the store behaves.
    @Test(.timeLimit(.minutes(10))) func aListingThatRepeatsItsTokenDoesNotKeepTheServerFromListening() throws {
        let storage = try S3TestServer(buckets: ["tiles"])
        defer { storage.shutdown() }
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 300, height: 200)
        let served = try root.serve(as: .bucket, on: storage)
        try storage.loopListings(true)
        defer { try? storage.loopListings(false) }
        let server = try ServeProcess(
            [served.root, "--rescan-interval", "0.2", "--port", "0"], environment: storage.environment, seconds: 15)
        #expect(try fetch(server.port, "/healthz").status == 200)
        let listing = try fetch(server.port, "/images")
        #expect(listing.status == 200 && listing.json["total"] as? Int == 0, "\(listing.status) \(listing.text)")
        #expect(eventually { server.errorOutput.contains("continuation token the store had already sent") }, "\(server.errorOutput)")
        // Logged once, not once per scan.
        Thread.sleep(forTimeInterval: 1)
        #expect(server.errorOutput.components(separatedBy: "already sent").count == 2, "\(server.errorOutput)")
        try storage.loopListings(false)
        #expect(try eventually { try fetch(server.port, "/images").json["total"] as? Int == 1 })
        #expect(server.terminate(within: 10) != nil)
    }
}

extension ServeProcess {
    /// Sends SIGTERM and returns the seconds until the process ended (nil: not within
    /// `seconds`, then it is killed).
    func terminate(within seconds: Double) -> Double? {
        let sent = Date()
        kill(process.processIdentifier, SIGTERM)
        while process.isRunning && Date().timeIntervalSince(sent) < seconds { usleep(5_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        return Date().timeIntervalSince(sent)
    }
}
