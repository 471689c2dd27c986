import Foundation
import Synchronization
import Testing
import TilerCore
import TilerTestSupport
@testable import TilerHTTP
import TilerServer
#if canImport(Glibc)
    import Glibc
#endif

/// The server under faults on disk and in the network: symbolic links out of ROOT, FIFOs,
/// truncated tiles and manifests, pyramids deleted and replaced while being served, and
/// more idle connections than the cap. It must keep serving, answer 404 (or the new
/// content), and never read outside ROOT.
@Suite(.serialized) struct ServeFaultTests {
    /// The rule: nothing below ROOT that is a symbolic link is followed, whether it points
    /// outside ROOT or inside it — pyramid folders, level and row folders, tiles,
    /// thumbnails and manifests. ROOT itself may be a link.
    @Test func symbolicLinksBelowRootAreNotFollowed() throws {
        let root = try PyramidRoot()
        let outside = try PyramidRoot()
        try root.addPyramid("a", width: 1000, height: 700)
        try root.addPyramid("c", width: 300, height: 300)
        try outside.addPyramid("ext", width: 1000, height: 700)
        try outside.addPyramid("c", width: 300, height: 300)
        let secret = outside.path + "/secret.png"
        try Data("SECRET".utf8).write(to: URL(fileURLWithPath: secret))
        let fm = FileManager.default
        // A whole pyramid folder that is a link, to a pyramid outside and to one inside.
        try fm.createSymbolicLink(atPath: root.path + "/ext", withDestinationPath: outside.path + "/ext")
        try fm.createSymbolicLink(atPath: root.path + "/alias", withDestinationPath: root.path + "/a")
        // A tile, a thumbnail and a level folder of `a` that are links out of ROOT.
        try fm.removeItem(atPath: root.path + "/a/2/0/0.png")
        try fm.createSymbolicLink(atPath: root.path + "/a/2/0/0.png", withDestinationPath: secret)
        try fm.removeItem(atPath: root.path + "/a/thumbnail.png")
        try fm.createSymbolicLink(atPath: root.path + "/a/thumbnail.png", withDestinationPath: secret)
        try fm.removeItem(atPath: root.path + "/a/1")
        try fm.createSymbolicLink(atPath: root.path + "/a/1", withDestinationPath: outside.path + "/ext/1")
        // A manifest that is a link to a valid manifest outside.
        try fm.removeItem(atPath: root.path + "/c/pyramid.json")
        try fm.createSymbolicLink(atPath: root.path + "/c/pyramid.json", withDestinationPath: outside.path + "/c/pyramid.json")
        // ROOT itself through a link is fine.
        let rootLink = root.path + "-link"
        try fm.createSymbolicLink(atPath: rootLink, withDestinationPath: root.path)
        defer { try? fm.removeItem(atPath: rootLink) }

        try withTileServer(root, { $0.root = rootLink }) { port in
            let list = try fetch(port, "/images")
            #expect(list.status == 200)
            let ids = (list.json["images"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
            #expect(ids == ["a"], "listed \(ids ?? [])")
            for path in [
                "/images/ext", "/images/ext/tiles/0/0/0.png", "/images/alias", "/images/alias/tiles/2/0/1.png",
                "/images/a/tiles/2/0/0.png", "/images/a/thumbnail.png", "/images/a/tiles/1/0/0.png",
                "/images/c", "/images/c/tiles/0/0/0.png",
            ] {
                let r = try fetch(port, path)
                #expect(r.status == 404, "\(path) answered \(r.status)")
                #expect(!r.text.contains("SECRET") && !r.text.contains("tile ext"), "\(path) leaked \(r.text.prefix(40))")
            }
            // The real files next to the links are still served.
            let tile = try fetch(port, "/images/a/tiles/2/0/1.png")
            #expect(tile.status == 200 && tile.body == PyramidRoot.tileBytes("a", TileCoordinate(level: 2, row: 0, column: 1)))
            #expect(try fetch(port, "/images/a/tiles/0/0/0.png").status == 200)
        }
    }

    /// A FIFO (or device) named like a tile must not block a loop on `open`.
    @Test(.timeLimit(.minutes(10))) func fifoInPlaceOfATileIs404() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 600, height: 600)
        try FileManager.default.removeItem(atPath: root.path + "/a/0/0/0.png")
        #expect(mkfifo(root.path + "/a/0/0/0.png", 0o644) == 0)
        try FileManager.default.removeItem(atPath: root.path + "/a/thumbnail.png")
        #expect(mkfifo(root.path + "/a/thumbnail.png", 0o644) == 0)
        try withTileServer(root, { $0.http.threads = 1 }) { (port: Int) throws -> Void in
            let fifoTile = try fetch(port, "/images/a/tiles/0/0/0.png")
            let fifoThumbnail = try fetch(port, "/images/a/thumbnail.png")
            let realTile = try fetch(port, "/images/a/tiles/1/0/0.png")
            #expect(fifoTile.status == 404 && fifoThumbnail.status == 404 && realTile.status == 200)
        }
    }

    /// Issue #11 item 9: a tile file that is empty, cut short or of another format, and an
    /// empty thumbnail, are answered 500 with `no-store` and a short message naming no
    /// path; each is logged once, however often it is asked for. Before, they were served
    /// as 200 with a day of caching. The connection stays usable; good tiles are served.
    @Test func damagedTileFilesAre500AndNotCached() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 600, height: 600)
        let whole = root.file("a/2/0/1.png")
        try Data(whole.prefix(whole.count - 5)).write(to: URL(fileURLWithPath: root.path + "/a/2/0/1.png"))
        try Data().write(to: URL(fileURLWithPath: root.path + "/a/2/1/1.png"))
        try Data(PyramidRoot.fakeFile(.jpeg, Array("a JPEG".utf8))).write(to: URL(fileURLWithPath: root.path + "/a/2/1/0.png"))
        try Data().write(to: URL(fileURLWithPath: root.path + "/a/thumbnail.png"))
        let log = CollectedLog()
        try withTileServer(root, log: log) { port in
            let c = try RawHTTPClient(port: port)
            for _ in 0..<3 {
                for (path, message) in [
                    ("/images/a/tiles/2/0/1.png", "tile 2/0/1 of image 'a' is damaged on the server"),
                    ("/images/a/tiles/2/1/1.png", "tile 2/1/1 of image 'a' is damaged on the server"),
                    ("/images/a/tiles/2/1/0.png", "tile 2/1/0 of image 'a' is damaged on the server"),
                    ("/images/a/thumbnail.png", "'thumbnail.png' of image 'a' is damaged on the server"),
                ] {
                    try c.request(path)
                    let r = try c.readResponse()
                    #expect(r.status == 500 && r.header("Cache-Control") == "no-store", "\(path): \(r.status)")
                    #expect(r.errorMessage == message, "\(path): \(r.text)")
                    #expect(!r.text.contains(root.path))
                }
                try c.request("/images/a/tiles/2/0/0.png")
                let good = try c.readResponse()
                #expect(good.status == 200 && good.body == root.file("a/2/0/0.png"))
            }
        }
        for file in ["a/2/0/1.png", "a/2/1/1.png", "a/2/1/0.png", "a/thumbnail.png"] {
            let lines = log.messages.filter { $0.contains(root.path + "/" + file) }
            #expect(lines.count == 1, "\(file): \(lines)")
        }
    }

    /// Issue #11 item 5: manifests that are self-consistent but absurd, and requests whose
    /// arithmetic overflows. Before, `/iiif/3/wide16/full/max/0/default.png` aborted the
    /// server (`reserveCapacity` of 549,755,813,920 bytes), and sizes such as `pct:` with 24
    /// digits trapped converting to `Int`. Now a manifest outside the limits makes its image
    /// a 500, a drawing too large for the render budget is a 400, an overflowing size is a
    /// 400, and the server answers the next request.
    @Test(.timeLimit(.minutes(10))) func absurdManifestsAndOverflowingRequestsDoNotKillTheServer() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 600, height: 600)
        func manifest(_ id: String, _ width: Int, _ height: Int, tileSize: Int, bands: Int? = nil) throws {
            try FileManager.default.createDirectory(atPath: root.path + "/" + id, withIntermediateDirectories: true)
            let g = try PyramidGeometry(width: width, height: height, tileSize: tileSize)
            try root.write(
                PyramidManifest(
                    id: PyramidID(id)!, geometry: g, format: .png,
                    thumbnail: .init(file: "thumbnail.png", width: 256, height: 1), bands: bands))
        }
        try manifest("wide16", 1 << 40, 1, tileSize: 16)  // 2^36 columns: outside the limits
        try manifest("wide", 1 << 40, 1, tileSize: 1024)  // 2^30 columns: within them
        try manifest("tall", 1, 1 << 40, tileSize: 1024)
        try manifest("bands", 600, 600, tileSize: 256, bands: 9)
        try withTileServer(root) { port in
            for (path, status) in [
                ("/iiif/3/wide16/full/max/0/default.png", 500), ("/images/wide16", 500),
                ("/iiif/3/bands/full/max/0/default.png", 500),
                ("/iiif/3/wide/full/max/0/default.png", 400), ("/iiif/3/wide/full/max/90/default.webp", 400),
                ("/iiif/3/tall/full/999999999,/0/default.png", 400),
                ("/iiif/3/tall/full/!999999999,999999999/0/default.png", 400),
                ("/iiif/3/a/full/^pct:999999999999999999999999/0/default.png", 400),
                ("/iiif/3/a/pct:999999999999999999999999,0,10,10/max/0/default.png", 400),
                ("/iiif/3/a/pct:0,999999999999999999999999,10,10/max/0/default.png", 400),
                ("/images/wide/visible?x=0&y=0&width=1e12&height=1&scale=1", 400),
            ] {
                let r = try fetch(port, path)
                #expect(r.status == status, "\(path): \(r.status) \(r.text.prefix(200))")
                #expect(try fetch(port, "/healthz").status == 200, "after \(path)")
            }
            let broken = try fetch(port, "/images/wide16")
            #expect(broken.errorMessage == "image 'wide16' has an unreadable pyramid.json")
        }
    }

    /// ROOT on overlayfs (any container): `RWF_NOWAIT` is unsupported there, and tiles in
    /// the page cache must still be read on the event loop, not each sent to the read
    /// pool. The in-memory cache is off so that every request reads the file.
    @Test(.enabled(if: OverlayMount.isPossible, "needs permission to mount overlayfs"))
    func tilesOnOverlayfsAreReadWithoutThePool() throws {
        let overlay = try OverlayMount()
        defer { overlay.remove() }
        let root = try PyramidRoot(in: overlay.merged)
        try root.addPyramid("a", width: 1000, height: 700)
        var config = ServerConfiguration(root: root.path)
        config.http.port = 0
        config.http.threads = 1
        config.cacheBytes = 0
        let server = TileServer(configuration: config)
        try server.start()
        defer {
            server.stop()
            server.wait()
        }
        let c = try RawHTTPClient(port: server.port)
        for _ in 0..<2 {
            for row in 0..<3 {
                for column in 0..<4 {
                    try c.request("/images/a/tiles/2/\(row)/\(column).png")
                    let r = try c.readResponse()
                    #expect(r.status == 200 && r.body == PyramidRoot.tileBytes("a", TileCoordinate(level: 2, row: row, column: column)))
                }
            }
        }
        let reads = server.http.blockingStatistics(.read)
        #expect(reads.finished == 0 && reads.queued == 0, "\(reads.finished) cached tiles were read on the pool")
    }

    /// A corrupt or truncated `pyramid.json` makes that one image a 500 with a JSON error;
    /// the listing skips it and the others are served.
    @Test func corruptManifestAffectsOnlyItsImage() throws {
        let root = try PyramidRoot()
        try root.addPyramid("good", width: 600, height: 600)
        let m = try root.addPyramid("bad", width: 600, height: 600)
        let json = try JSONEncoder().encode(m)
        try json.prefix(json.count / 2).write(to: URL(fileURLWithPath: root.path + "/bad/pyramid.json"))
        try withTileServer(root) { port in
            let bad = try fetch(port, "/images/bad")
            #expect(bad.status == 500 && bad.errorMessage?.contains("'bad'") == true, "\(bad.status) \(bad.text)")
            #expect(try fetch(port, "/images/bad/tiles/0/0/0.png").status == 500)
            let list = try fetch(port, "/images")
            #expect(list.json["total"] as? Int == 1)
            #expect(try fetch(port, "/images/good/tiles/0/0/0.png").status == 200)
            #expect(try fetch(port, "/healthz").status == 200)
        }
    }

    /// Writes version `n` of pyramid `p` into a hidden folder and renames it into place
    /// (what `tiler cut` does); odd and even versions differ in size.
    static func installVersion(_ n: Int, root: PyramidRoot) throws -> PyramidGeometry {
        let geometry = try PyramidGeometry(width: n % 2 == 0 ? 1000 : 600, height: 700)
        let manifest = PyramidManifest(
            id: PyramidID("p")!, geometry: geometry, format: .png,
            thumbnail: .init(file: "thumbnail.png", width: 256, height: 179))
        let staging = root.path + "/.p.partial-\(n)"
        let fm = FileManager.default
        for l in geometry.levels {
            for r in 0..<l.rows {
                try fm.createDirectory(atPath: "\(staging)/\(l.level)/\(r)", withIntermediateDirectories: true)
                for c in 0..<l.columns {
                    let t = TileCoordinate(level: l.level, row: r, column: c)
                    try Data(versionedTile(n, t)).write(to: URL(fileURLWithPath: staging + "/" + manifest.tilePath(t)))
                }
            }
        }
        try Data(PyramidRoot.fakeFile(.png, Array("thumb".utf8))).write(to: URL(fileURLWithPath: staging + "/thumbnail.png"))
        try JSONEncoder().encode(manifest).write(to: URL(fileURLWithPath: staging + "/pyramid.json"))
        #expect(rename(staging, root.path + "/p") == 0)
        return geometry
    }

    static func versionedTile(_ n: Int, _ t: TileCoordinate) -> [UInt8] { PyramidRoot.fakeFile(.png, Array("v\(n) \(t)".utf8)) }

    @Test(.timeLimit(.minutes(10))) func pyramidDeletedAndReplacedWhileServedGives404OrContent() throws {
        let root = try PyramidRoot()
        _ = try Self.installVersion(0, root: root)
        try withTileServer(root, { $0.rescanInterval = 0.05 }) { port in
            let stop = ManagedFlag()
            let failures = Tally()
            let answered = Tally()
            let group = DispatchGroup()
            let paths = [
                "/images/p/tiles/2/0/0.png", "/images/p/tiles/2/1/3.png", "/images/p", "/images/p/tiles/0/0/0.png",
                "/images/p/visible?x=0&y=0&width=500&height=500&scale=1", "/images",
            ]
            for worker in 0..<3 {
                DispatchQueue.global().async(group: group) {
                    var client: RawHTTPClient?
                    var i = worker
                    while !stop.isSet {
                        do {
                            if client == nil { client = try RawHTTPClient(port: port) }
                            let path = paths[i % paths.count]
                            i += 1
                            try client!.request(path)
                            let r = try client!.readResponse()
                            answered.add(path)
                            if path.contains("/tiles/"), r.status == 200 {
                                let parts = path.split(separator: "/")
                                let t = TileCoordinate(
                                    level: Int(parts[3])!, row: Int(parts[4])!,
                                    column: Int(parts[5].dropLast(4))!)
                                if !(0...1000).contains(where: { Self.versionedTile($0, t) == r.body }) {
                                    failures.add("\(path): unexpected body \(r.text.prefix(30))")
                                }
                            } else if r.status != 200 && r.status != 404 {
                                failures.add("\(path): status \(r.status) \(r.text.prefix(100))")
                            }
                        } catch {
                            failures.add("\(error)")
                            client = nil
                        }
                    }
                }
            }
            // Delete (non-atomically, file by file) and re-install, over and over; each
            // state lasts until the clients have made a few requests against it.
            func letClientsSeeIt() {
                let seen = answered.count
                _ = eventually(within: 5) { answered.count >= seen + 6 }
            }
            var version = 0
            let deadline = Date().addingTimeInterval(3)
            // At least six versions, however slow the machine (a loaded run managed four in 3 s).
            while Date() < deadline || version <= 5 {
                try FileManager.default.removeItem(atPath: root.path + "/p")
                letClientsSeeIt()
                version += 1
                _ = try Self.installVersion(version, root: root)
                letClientsSeeIt()
            }
            stop.set()
            group.wait()
            #expect(failures.items.isEmpty, "\(failures.items.count) failures, first: \(failures.items.prefix(5))")
            #expect(version > 5)
            // Once the manifest is checked again (tiles are read by path, so a new tile can
            // come before the new manifest), the newest version is what is served.
            let t = TileCoordinate(level: 2, row: 1, column: 1)
            #expect(
                try eventually {
                    try fetch(port, "/images/p/tiles/2/1/1.png").body == Self.versionedTile(version, t)
                        && fetch(port, "/images/p").json["width"] as? Int == (version % 2 == 0 ? 1000 : 600)
                })
            try FileManager.default.removeItem(atPath: root.path + "/p")
            #expect(try eventually { try fetch(port, "/images/p/tiles/2/1/1.png").status == 404 })
            #expect(try eventually { try fetch(port, "/images").json["total"] as? Int == 0 })
        }
    }

    /// Many idle connections: below the cap service continues; past it new connections get
    /// 503 and close; when the idle ones go, service resumes. Idle sockets are closed after
    /// the idle timeout, and a half-sent request head after the head timeout (slowloris).
    @Test(.timeLimit(.minutes(10))) func idleConnectionsUpToAndPastTheCap() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 600, height: 600)
        try withRunningTileServer(
            root,
            {
                $0.http.maximumConnections = 64
                $0.http.idleTimeout = 30
                $0.http.requestHeadTimeout = 30
            }
        ) { server in
            let port = server.port
            var idle: [RawHTTPClient] = []
            for _ in 0..<50 { idle.append(try RawHTTPClient(port: port, timeout: 2)) }
            #expect(eventually { server.http.openConnections == 50 })
            // Below the cap: a normal request is served.
            #expect(try fetch(port, "/images/a/tiles/0/0/0.png").status == 200)
            #expect(eventually { server.http.openConnections == 50 })  // that one has closed
            for _ in 0..<50 { idle.append(try RawHTTPClient(port: port, timeout: 2)) }
            // Past the cap: exactly 100 − 64 of the idle sockets are answered 503 and closed.
            func answered(_ c: RawHTTPClient) -> Bool {
                var byte: UInt8 = 0
                return recv(c.fd, &byte, 1, Int32(MSG_DONTWAIT | MSG_PEEK)) > 0
            }
            #expect(eventually { idle.filter(answered).count >= 36 })
            // A refused connection is answered before it is closed and uncounted: the count
            // comes down to the cap a moment after the last 503 is readable.
            #expect(eventually { server.http.openConnections == 64 })
            let refused = idle.filter(answered)
            for c in refused {
                let r = try c.readResponse()
                #expect(r.status == 503 && r.header("Connection") == "close")
            }
            #expect(refused.count == 36)
            let over = try fetch(port, "/images/a/tiles/0/0/0.png")
            #expect(over.status == 503, "a request past the cap got \(over.status)")
            #expect(over.errorMessage?.contains("connection limit") == true)
            idle.removeAll()  // closes them
            #expect(eventually { server.http.openConnections == 0 })
            #expect(try fetch(port, "/images/a/tiles/0/0/0.png").status == 200)
        }
        try withTileServer(
            root,
            {
                $0.http.idleTimeout = 1
                $0.http.requestHeadTimeout = 1
            }
        ) { port in
            // 30 s bounds the wait for the 1 s timeouts to fire: a guard against a hang, with
            // room for a loaded machine (5 s left it 4 s of slack).
            let idle = try RawHTTPClient(port: port, timeout: 30)
            let slow = try RawHTTPClient(port: port, timeout: 30)
            try slow.send("GET /images/a HTTP/1.1\r\nHost: x\r\n")
            let slowAnswer = try slow.readResponse()
            #expect(slowAnswer.status == 408)
            #expect(idle.waitForClose())
            #expect(try fetch(port, "/healthz").status == 200)
        }
    }
}

/// A flag set once from one thread and read from others.
final class ManagedFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .sequentiallyConsistent) }
    func set() { value.store(true, ordering: .sequentiallyConsistent) }
}

/// Messages collected from several threads.
final class Tally: Sendable {
    private let list = Mutex<[String]>([])
    var items: [String] { list.withLock { $0 } }
    var count: Int { list.withLock { $0.count } }
    func add(_ s: String) { list.withLock { $0.append(s) } }
}
