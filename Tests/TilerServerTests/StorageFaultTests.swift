import Foundation
import S3TestSupport
import Testing
import TilerCore
import TilerTestSupport
@testable import TilerServer

/// Object storage that refuses the server's credentials, fails in passing, or ignores
/// `If-Match` (issue #31 items 3, 4 and 8a), through the S3 test server's fault hooks.
@Suite(.serialized) struct StorageFaultTests {
    /// A server on `storage`'s bucket with pyramid `a` (2000 × 1500: 48 tiles at level 3),
    /// its log collected.
    static func withBucketServer(
        _ storage: S3TestServer, log: CollectedLog, _ configure: (inout ServerConfiguration) -> Void = { _ in },
        _ body: (Int, PyramidRoot) throws -> Void
    ) throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 2000, height: 1500)
        let served = try root.serve(as: .bucket, on: storage)
        var config = ServerConfiguration(root: served.root)
        config.http.port = 0
        config.http.threads = 2
        config.rescanInterval = 0.2
        served.configure(&config)
        config.storageTimeout = 5
        configure(&config)
        let server = TileServer(configuration: config, log: log.logger)
        try server.start()
        defer {
            server.stop()
            server.wait()
        }
        try body(server.port, root)
    }

    /// Item 3: revoked, wrong or expired credentials (and a policy that stops allowing
    /// the reads) were taken for a damaged archive: every uncached tile a 500 "damaged …
    /// until it is replaced" with `no-store`, `/healthz` saying `"storage":"ok"`. Now they
    /// are what storage being down is: 503 with `Retry-After`, `/healthz` says storage is
    /// unavailable and why, cached tiles still serve, and the server serves again by itself
    /// once the credentials work.
    @Test(.timeLimit(.minutes(10))) func refusedCredentialsAre503UntilTheyWorkAgain() throws {
        let storage = try S3TestServer(buckets: ["tiles"])
        defer { storage.shutdown() }
        let log = CollectedLog()
        try Self.withBucketServer(storage, log: log) { port, _ in
            func health() throws -> [String: Any] { try fetch(port, "/healthz").json }
            #expect(try fetch(port, "/images/a/tiles/0/0/0.png").status == 200)
            var row = 0
            for (status, code) in [
                (403, "InvalidAccessKeyId"), (403, "SignatureDoesNotMatch"), (400, "ExpiredToken"), (403, "AccessDenied"),
            ] {
                try storage.fail("*", status: status, code: code)
                let refused = try fetch(port, "/images/a/tiles/3/\(row)/0.png")
                #expect(refused.status == 503 && refused.header("Retry-After") == "1", "\(code): \(refused.status) \(refused.text)")
                #expect(refused.errorMessage?.contains("object storage") == true, "\(code): \(refused.text)")
                let down = try health()
                #expect(down["storage"] as? String == "unavailable", "\(code): \(down)")
                #expect((down["storageError"] as? String)?.contains(code) == true, "\(code): \(down)")
                #expect(try fetch(port, "/images/a/tiles/0/0/0.png").status == 200, "a cached tile")
                try storage.fail("*", status: 0)
                #expect(try eventually { try fetch(port, "/images/a/tiles/3/\(row)/1.png").status == 200 }, "\(code)")
                #expect(try eventually { try health()["storage"] as? String == "ok" }, "\(code)")
                row += 1
            }
        }
        let messages = log.messages
        #expect(!messages.contains { $0.contains("damaged") || $0.contains("until it is replaced") }, "\(messages)")
        #expect(messages.contains { $0.contains("refuses the server's credentials") && $0.contains("InvalidAccessKeyId") }, "\(messages)")
        #expect(messages.contains { $0.contains("object storage answers again") }, "\(messages)")
    }

    /// Item 8a: faults of the store that pass (a 500, S3's own `400 RequestTimeout`, an
    /// answer no store should give) were logged as permanent damage, "answers 500 … until
    /// it is replaced". Now they are 503 with `Retry-After` and logged as storage faults,
    /// and the tile is served once the store answers again.
    @Test(.timeLimit(.minutes(10))) func passingStorageFaultsAreNotLoggedAsDamage() throws {
        let storage = try S3TestServer(buckets: ["tiles"])
        defer { storage.shutdown() }
        let log = CollectedLog()
        try Self.withBucketServer(storage, log: log) { port, _ in
            #expect(try fetch(port, "/images/a/tiles/0/0/0.png").status == 200)
            var row = 0
            for (status, code) in [(500, "InternalError"), (400, "RequestTimeout"), (404, "NoSuchBucket"), (501, "NotImplemented")] {
                try storage.fail("GET", status: status, code: code)
                let failed = try fetch(port, "/images/a/tiles/3/\(row)/0.png")
                #expect(failed.status == 503 && failed.header("Retry-After") == "1", "\(code): \(failed.status) \(failed.text)")
                try storage.fail("GET", status: 0)
                #expect(try eventually { try fetch(port, "/images/a/tiles/3/\(row)/0.png").status == 200 }, "\(code)")
                row += 1
            }
        }
        let messages = log.messages
        #expect(!messages.contains { $0.contains("damaged") || $0.contains("until it is replaced") }, "\(messages)")
        #expect(messages.contains { $0.contains("object storage is unavailable") && $0.contains("RequestTimeout") }, "\(messages)")
    }

    /// Item 4: a store (or a proxy in front of it) that ignores `If-Match` answered the
    /// range reads of a replaced object from the new version: every tile read after the
    /// replacement was bytes of the new object at the old directory's offsets, neither
    /// version, and cached for a day. Now each answer's ETag is compared with the one the
    /// archive was opened with: another one is "the object changed", the new version is
    /// opened and answers, and nothing mixed is served or cached.
    @Test(.timeLimit(.minutes(10))) func aStoreThatIgnoresIfMatchNeverMixesVersions() throws {
        let storage = try S3TestServer(buckets: ["tiles"])
        defer { storage.shutdown() }
        try storage.ignoreIfMatch(true)
        let log = CollectedLog()
        // No rescan: only the reads can find the new version.
        try Self.withBucketServer(storage, log: log, { $0.rescanInterval = 3600 }) { port, root in
            let manifest = try root.served!.manifest("a")
            let geometry = try manifest.geometry()
            #expect(try fetch(port, "/images/a/tiles/0/0/0.png").status == 200)
            func version2(_ t: TileCoordinate) -> [UInt8] {
                PyramidRoot.fakeFile(.png, Array("version 2, longer than the first, of \(t)".utf8))
            }
            let level = geometry.levels[3]
            let tiles = (0..<level.rows).flatMap { r in (0..<level.columns).map { TileCoordinate(level: 3, row: r, column: $0) } }
            for t in tiles {
                try Data(version2(t)).write(to: URL(fileURLWithPath: root.path + "/a/" + manifest.tilePath(t)))
            }
            try root.publish()
            var mixed: [String] = [], new = 0
            for t in tiles.prefix(20) {
                let path = "/images/a/tiles/3/\(t.row)/\(t.column).png"
                let r = try fetch(port, path)
                if r.status == 200 && r.body == version2(t) {
                    new += 1
                } else if r.status != 200 || r.body != PyramidRoot.tileBytes("a", t) {
                    mixed.append("\(path): \(r.status), \(r.body.count) bytes")
                }
                // Whatever was served is what a second request gets (from the cache or not).
                #expect(try fetch(port, path).body == r.body)
            }
            #expect(mixed.isEmpty, "\(mixed.count) of 20: \(mixed.prefix(5))")
            #expect(new == 20)
        }
        #expect(log.messages.contains { $0.contains("the store ignored If-Match") }, "\(log.messages)")
    }
}
