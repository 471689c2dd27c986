import Foundation
import Testing
import TilerCore
import TilerTestSupport
@testable import TilerServer

@Suite struct ConcurrentClientsTests {
    /// 32 keep-alive clients on real threads, each asking for many random tiles (and a few
    /// errors), every answer checked against the file on disk.
    @Test(arguments: RootKind.allCases) func thirtyTwoKeepAliveClientsGetTheRightTiles(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        let manifest = try root.addPyramid("c", width: 2000, height: 1500)
        let geometry = try manifest.geometry()
        let tiles = geometry.levels.flatMap { l in
            (0..<l.rows).flatMap { r in (0..<l.columns).map { TileCoordinate(level: l.level, row: r, column: $0) } }
        }
        try withTileServer(root, as: kind, { $0.cacheBytes = 40_000 }) { port throws in  // small cache: hits, misses and evictions
            let served = try #require(root.served)
            let failures = Failures()
            let group = DispatchGroup()
            for t in 0..<32 {
                group.enter()
                Thread {
                    defer { group.leave() }
                    do {
                        let c = try RawHTTPClient(port: port)
                        var rng = SystemRandomNumberGenerator()
                        for i in 0..<120 {
                            if i % 40 == 39 {
                                try c.request("/images/c/tiles/99/0/0.png")
                                let r = try c.readResponse()
                                if r.status != 404 { failures.add("client \(t): expected 404, got \(r.status)") }
                                continue
                            }
                            let tile = tiles.randomElement(using: &rng)!
                            try c.request("/images/c/tiles/\(tile.level)/\(tile.row)/\(tile.column).png")
                            let r = try c.readResponse()
                            if r.status != 200 || served.mismatch(r.body, for: "c/" + manifest.tilePath(tile)) != nil {
                                failures.add("client \(t) request \(i) \(tile): status \(r.status), \(r.body.count) bytes")
                            }
                        }
                    } catch {
                        failures.add("client \(t): \(error)")
                    }
                }.start()
            }
            group.wait()
            #expect(failures.all.isEmpty, "\(failures.all.prefix(5))")
        }
    }

    @Test(arguments: RootKind.allCases) func pipelinedTileRequestsMixedWithErrors(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try root.addPyramid("p", width: 600, height: 600)
        try withTileServer(root, as: kind) { port throws in
            let c = try RawHTTPClient(port: port)
            let paths = [
                "/images/p/tiles/2/0/0.png", "/images/p/tiles/9/0/0.png", "/images/p", "/images/p/tiles/x/0/0.png",
                "/images/p/tiles/2/2/2.png", "/images/p/visible?x=0&y=0&width=10&height=10&scale=1", "/healthz",
            ]
            try c.send(paths.map { "GET \($0) HTTP/1.1\r\nHost: x\r\n\r\n" }.joined())
            let statuses = try paths.map { _ in try c.readResponse().status }
            #expect(statuses == [200, 404, 200, 400, 200, 200, 200])
            try c.request("/images/p/tiles/2/2/2.png", method: "HEAD")
            let head = try c.readResponse(bodyless: true)
            try c.request("/images/p/tiles/2/2/2.png")
            let get = try c.readResponse()
            #expect(head.header("Content-Length") == String(get.body.count))
            try #require(root.served).expect(get.body, servedAs: "p/2/2/2.png")
        }
    }
}
