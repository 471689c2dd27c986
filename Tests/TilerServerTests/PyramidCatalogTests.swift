import Foundation
import Testing
import TilerCore
import TilerTestSupport
@testable import TilerServer
#if canImport(Glibc)
    import Glibc
#endif

/// The catalog of pyramids under ROOT: kept in memory, scanned in the background, and
/// telling the operator about pyramids it cannot read.
@Suite(.serialized) struct PyramidCatalogTests {
    func ids(_ port: Int) throws -> [String] {
        let list = try fetch(port, "/images?limit=1000").json
        return (list["images"] as? [[String: Any]])?.compactMap { $0["id"] as? String } ?? []
    }

    /// Issue #11 item 11: `/images` and lookups of known pyramids are answered from memory;
    /// only the scan (or a lookup of an unknown id, on the blocking pool) reads ROOT. Before,
    /// every `/images` stat'ed every manifest on the event loop (0.2 s with 20,000
    /// pyramids) and a changed `pyramid.json` was read and decoded there: a pyramid added
    /// to ROOT was listed by the next `/images` at once, and a re-cut one served at once.
    @Test func listingAndKnownPyramidsComeFromMemoryUntilTheNextScan() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 600, height: 400)
        try withRunningTileServer(root, { $0.rescanInterval = 3600 }) { server in
            let port = server.port
            // Cut after the scan: not listed, since no request reads ROOT...
            try root.addPyramid("b", width: 300, height: 300)
            #expect(try ids(port) == ["a"])
            // ...but asked for by id it is found at once (on the blocking pool), and listed.
            #expect(try fetch(port, "/images/b").json["width"] as? Int == 300)
            #expect(try ids(port) == ["a", "b"])

            // Re-cut: served as loaded until the next scan reads the new manifest.
            try root.addPyramid("a", width: 1000, height: 400)
            #expect(try fetch(port, "/images/a").json["width"] as? Int == 600)
            server.store.rescan()
            #expect(try fetch(port, "/images/a").json["width"] as? Int == 1000)
            #expect(try fetch(port, "/images/a/tiles/2/1/3.png").status == 200)

            // Deleted: gone once the scan sees it.
            try FileManager.default.removeItem(atPath: root.path + "/b")
            server.store.rescan()
            #expect(try ids(port) == ["a"])
            #expect(try fetch(port, "/images/b").status == 404)
        }
    }

    /// Plain tile paths keep the pyramid they named last (`RecentPyramid`, one per event
    /// loop), but only while the catalog is unchanged: the request after a scan that re-cut
    /// or deleted the pyramid gets the new answer, on both loops, and alternating ids (one
    /// the other's prefix) never get each other's tiles.
    @Test func plainTilePathsSeeAScansChangeAtOnce() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 600, height: 400)
        try root.addPyramid("aa", width: 300, height: 300)
        try withRunningTileServer(root, { $0.rescanInterval = 3600 }) { server in
            let port = server.port
            /// `path` asked on eight connections (both loops get some): their statuses.
            func statuses(_ path: String) throws -> Set<Int> { Set(try (0..<8).map { _ in try fetch(port, path).status }) }
            func maxLevel(_ id: String) throws -> Int { try fetch(port, "/images/\(id)").json["maxLevel"] as! Int }
            let top = try maxLevel("a")
            // Column 3 of the full-size level exists at 1000 pixels wide, not at 600.
            let fourth = "/images/a/tiles/\(top)/0/3.png"
            #expect(try statuses("/images/a/tiles/\(top)/0/2.png") == [200])
            #expect(try statuses(fourth) == [404])
            // Another id, one byte longer, in between and back: each gets its own pyramid's tiles.
            #expect(try statuses("/images/aa/tiles/\(try maxLevel("aa"))/1/1.png") == [200])
            #expect(try statuses("/images/aa/tiles/\(try maxLevel("aa"))/0/2.png") == [404])
            #expect(try statuses("/images/a/tiles/\(top)/0/2.png") == [200])

            try root.addPyramid("a", width: 1000, height: 400)
            server.store.rescan()
            #expect(try maxLevel("a") == top)
            #expect(try statuses(fourth) == [200])

            try FileManager.default.removeItem(atPath: root.path + "/a")
            server.store.rescan()
            #expect(try statuses("/images/a/tiles/\(top)/0/2.png") == [404])
        }
    }

    /// The background scan runs by itself every `rescanInterval` seconds.
    @Test(.timeLimit(.minutes(10)), arguments: RootKind.allCases) func theBackgroundScanNoticesNewAndDeletedPyramids(_ kind: RootKind)
        throws
    {
        let root = try PyramidRoot()
        try withTileServer(root, as: kind, { $0.rescanInterval = 0.05 }) { port in
            #expect(try ids(port).isEmpty)
            try root.addPyramid("late", width: 300, height: 200)
            try root.publish()
            #expect(try eventually { try ids(port) == ["late"] })
            try FileManager.default.removeItem(atPath: root.path + "/late")
            try root.publish()
            #expect(try eventually { try ids(port).isEmpty })
        }
    }

    /// Issue #11 item 13 (the server's half): a pyramid folder the server may not open,
    /// and a manifest it may not read, are logged once per pyramid and change, however
    /// many requests and scans meet them. Before, they were listed nowhere and answered 404
    /// without a word. The server runs as another user (nobody) when the tests run as root,
    /// since root reads everything.
    @Test(.timeLimit(.minutes(10))) func unreadablePyramidsAreLoggedOncePerChange() throws {
        let root = try PyramidRoot()
        try root.addPyramid("ok", width: 300, height: 200)
        try root.addPyramid("locked", width: 300, height: 200)
        try root.addPyramid("sealed", width: 300, height: 200)
        let fm = FileManager.default
        // Readable by anyone (the manifest was written atomically, perhaps 0600), except…
        for file in try fm.subpathsOfDirectory(atPath: root.path) {
            let full = root.path + "/" + file
            var isDirectory: ObjCBool = false
            _ = fm.fileExists(atPath: full, isDirectory: &isDirectory)
            chmod(full, isDirectory.boolValue ? 0o755 : 0o644)
        }
        chmod(root.path, 0o755)
        chmod(root.path + "/locked", 0o000)
        chmod(root.path + "/sealed/pyramid.json", 0o000)
        defer { chmod(root.path + "/locked", 0o755) }

        let launcher = geteuid() == 0 ? ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] : []
        let server = try ServeProcess([root.path, "--port", "0", "--rescan-interval", "0.05"], launcher: launcher)
        func lines(_ about: String) -> [String] {
            server.errorOutput.split(separator: "\n").map(String.init).filter { $0.contains(about) }
        }
        for _ in 0..<3 {
            #expect(try fetch(server.port, "/images/locked").status == 404)
            let sealed = try fetch(server.port, "/images/sealed")
            #expect(sealed.status == 500 && sealed.errorMessage == "image 'sealed' cannot be read by the server")
        }
        #expect(try ids(server.port) == ["ok"])
        // Let scans pass, seen by pyramids they add to the listing.
        for marker in ["m1", "m2", "m3"] {
            try root.addPyramid(marker, width: 10, height: 10)
            chmod(root.path + "/\(marker)/pyramid.json", 0o644)
            #expect(try eventually { try ids(server.port).contains(marker) })
        }
        let locked = lines(root.path + "/locked")
        #expect(locked.count == 1 && locked[0].contains("permission denied"), "\(server.errorOutput)")
        let sealed = lines(root.path + "/sealed/pyramid.json")
        #expect(sealed.count == 1 && sealed[0].contains("permission denied"), "\(server.errorOutput)")

        // A change is a new fault: readable, then locked again, is logged again, once.
        chmod(root.path + "/locked", 0o755)
        #expect(try eventually { try ids(server.port).contains("locked") })
        chmod(root.path + "/locked", 0o000)
        #expect(try eventually { try !ids(server.port).contains("locked") })
        try root.addPyramid("m4", width: 10, height: 10)
        chmod(root.path + "/m4/pyramid.json", 0o644)
        #expect(try eventually { try ids(server.port).contains("m4") })
        #expect(lines(root.path + "/locked").count == 2, "\(server.errorOutput)")
    }
}
