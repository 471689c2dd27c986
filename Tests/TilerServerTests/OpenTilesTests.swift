import Foundation
import Glibc
import Testing
import TilerCore
import TilerHTTP
import TilerSystem
import TilerTestSupport
@testable import TilerServer

/// Issue #15 item 4: folder tiles kept open and sent with `sendfile` (`OpenTiles`). The
/// response cache is off in these tests (`cacheBytes = 0`), so every answer after the
/// first comes from the open descriptor, and none can hide a stale one.
@Suite struct OpenTilesTests {
    static let tile = TileCoordinate(level: 2, row: 1, column: 2)
    static let path = "/images/a/tiles/2/1/2.png"
    static let file = "a/2/1/2.png"

    static func noResponseCache(_ c: inout ServerConfiguration) { c.cacheBytes = 0 }

    static func key(_ server: TileServer) throws -> (Pyramid, CachedItem) {
        let p = try #require(server.store.pyramids.first { $0.id.rawValue == "a" })
        return (p, .tile(generation: p.generation, level: 2, row: 1, column: 2))
    }

    static func version(_ n: Int) -> [UInt8] {
        // Versions of different lengths, so that a mix of two could not pass for either.
        PyramidRoot.fakeFile(.png, Array("version \(n) ".utf8) + [UInt8](repeating: UInt8(n % 251), count: 100 + n % 300))
    }

    /// Writes `bytes` to a new file and renames it over `relative` (what `tiler cut` does).
    static func replace(_ root: PyramidRoot, _ relative: String, with bytes: [UInt8]) throws {
        let temporary = root.path + "/" + relative + ".new"
        try Data(bytes).write(to: URL(fileURLWithPath: temporary))
        #expect(rename(temporary, root.path + "/" + relative) == 0)
    }

    /// Writes `relative`'s pages back, then drops them from the page cache (retried while
    /// the kernel keeps them), so that they are not all resident.
    static func dropFromPageCache(_ root: PyramidRoot, _ relative: String) throws {
        let dropped = TilerTestSupport.dropFromPageCache(root.path + "/" + relative)
        try #require(dropped, "the kernel kept the pages of \(relative)")
    }

    /// Rewrites `relative` in place: truncated, then written (the same inode).
    static func rewrite(_ root: PyramidRoot, _ relative: String, with bytes: [UInt8]) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: root.path + "/" + relative))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data(bytes))
        try handle.close()
    }

    @Test func aTileAskedForAgainIsSentFromItsOpenFile() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 1000, height: 1000)
        try withRunningTileServer(root, Self.noResponseCache) { server in
            let first = try fetch(server.port, Self.path)
            #expect(first.status == 200 && first.body == root.file(Self.file))
            let openTiles = try #require(server.store.openTiles)
            #expect(openTiles.count == 1)
            let (pyramid, key) = try Self.key(server)
            guard case .ready(let response) = openTiles.answer(for: key), case .file(let range) = response.content else {
                Issue.record("tile not answered from its open file")
                return
            }
            #expect(range.offset == 0 && range.count == root.file(Self.file).count)
            guard case .prepared(let prepared) = try server.store.tileResponse(Self.tile, of: pyramid) else {
                Issue.record("the store did not answer a prepared response")
                return
            }
            #expect(prepared === response)
            // Over the wire: the same bytes and headers as the first answer; HEAD; 304.
            let again = try fetch(server.port, Self.path)
            #expect(again.status == 200 && again.body == first.body)
            for name in ["Content-Type", "Content-Length", "ETag", "Last-Modified", "Cache-Control"] {
                #expect(again.header(name) == first.header(name), "\(name)")
            }
            let head = try fetch(server.port, Self.path, method: "HEAD")
            #expect(head.status == 200 && head.body.isEmpty && head.header("Content-Length") == "\(first.body.count)")
            let etag = try #require(first.header("ETag"))
            #expect(try fetch(server.port, Self.path, headers: ["If-None-Match: \(etag)"]).status == 304)
            #expect(openTiles.count == 1)
        }
    }

    /// With the response cache on: a tile larger than `TileStore.sendFromFileAbove` is
    /// answered from its open file from the second request on, and never takes room in
    /// the cache; a small one is kept in the cache. Both come back as they are on disk.
    @Test func aLargeTileIsSentFromItsOpenFileAndASmallOneFromMemory() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 1000, height: 1000)
        let large = PyramidRoot.fakeFile(.png, (0..<(TileStore.sendFromFileAbove + 4096)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try Self.replace(root, Self.file, with: large)
        let small = "/images/a/tiles/2/0/0.png"
        // Writing the cold tile below changes the folder: no folder check may fall within
        // the test, or the open tile would be dropped rather than found not resident.
        try withRunningTileServer(root, { $0.rescanInterval = 600 }) { server in
            for _ in 0..<3 {
                let big = try fetch(server.port, Self.path)
                #expect(big.status == 200 && big.body == large)
                let little = try fetch(server.port, small)
                #expect(little.status == 200 && little.body == root.file("a/2/0/0.png"))
            }
            let (pyramid, key) = try Self.key(server)
            let smallKey = CachedItem.tile(generation: pyramid.generation, level: 2, row: 0, column: 0)
            #expect(server.store.cache.value(for: key) == nil)
            #expect(server.store.cache.value(for: smallKey) != nil)
            let openTiles = try #require(server.store.openTiles)
            guard case .ready(let response) = openTiles.answer(for: key), case .file(let range) = response.content else {
                Issue.record("the large tile is not answered from its open file")
                return
            }
            #expect(range.count == large.count)
            guard case .prepared(let prepared) = try server.store.tileResponse(Self.tile, of: pyramid) else {
                Issue.record("the store did not answer a prepared response")
                return
            }
            #expect(prepared === response)

            // Large tiles whose pages are not resident are read on the read lane, and still
            // not kept in memory: the open one, and one never asked for before (it is
            // opened at its next request, from the page cache).
            let cold = "a/2/1/1.png", coldPath = "/images/a/tiles/2/1/1.png"
            try Self.replace(root, cold, with: large)
            let coldKey = CachedItem.tile(generation: pyramid.generation, level: 2, row: 1, column: 1)
            for relative in [Self.file, cold] { try Self.dropFromPageCache(root, relative) }
            guard case .notResident = openTiles.answer(for: key) else {
                Issue.record("a large tile out of the page cache was about to be sent from the event loop")
                return
            }
            for _ in 0..<2 {
                #expect(try fetch(server.port, Self.path).body == large)
                #expect(try fetch(server.port, coldPath).body == large)
            }
            #expect(server.store.cache.value(for: key) == nil && server.store.cache.value(for: coldKey) == nil)
            guard case .ready = openTiles.answer(for: coldKey) else {
                Issue.record("a large tile read on the read lane was not opened at its next request")
                return
            }
        }
    }

    /// A tile replaced by a rename, rewritten in place (same length, other length),
    /// deleted and written again, each change followed at once by a request: every answer
    /// is the file as it is now, never the open descriptor's stale bytes.
    @Test func aTileChangedWhileOpenIsReadAgainAtItsNextRequest() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 1000, height: 1000)
        try withRunningTileServer(root, Self.noResponseCache) { server in
            #expect(try fetch(server.port, Self.path).body == root.file(Self.file))
            let v1 = Self.version(1)
            try Self.replace(root, Self.file, with: v1)
            #expect(try fetch(server.port, Self.path).body == v1, "replaced by a rename")
            #expect(try fetch(server.port, Self.path).body == v1)
            var same = v1
            same[same.count - 20] ^= 0xFF
            try Self.rewrite(root, Self.file, with: same)
            #expect(try fetch(server.port, Self.path).body == same, "rewritten in place, same length")
            let v2 = Self.version(2)
            try Self.rewrite(root, Self.file, with: v2)
            #expect(try fetch(server.port, Self.path).body == v2, "rewritten in place, another length")
            try FileManager.default.removeItem(atPath: root.path + "/" + Self.file)
            #expect(try fetch(server.port, Self.path).status == 404, "deleted")
            let v3 = Self.version(3)
            try Data(v3).write(to: URL(fileURLWithPath: root.path + "/" + Self.file))
            #expect(try fetch(server.port, Self.path).body == v3, "written again")
        }
    }

    /// A row folder renamed away keeps its files' names (and link counts): the tile's path
    /// is checked again after the rescan interval, so the new folder's tile is served
    /// within it, and every answer meanwhile is one whole version.
    @Test(.timeLimit(.minutes(10))) func aFolderRenamedAwayIsNoticedWithinTheRescanInterval() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 1000, height: 1000)
        let old = root.file(Self.file)
        try withRunningTileServer(root, Self.noResponseCache) { server in
            #expect(try fetch(server.port, Self.path).body == old)
            #expect(rename(root.path + "/a/2/1", root.path + "/a/2/1.old") == 0)
            try FileManager.default.createDirectory(atPath: root.path + "/a/2/1", withIntermediateDirectories: false)
            let new = Self.version(7)
            try Data(new).write(to: URL(fileURLWithPath: root.path + "/" + Self.file))
            var bodies: [[UInt8]] = []
            #expect(
                try eventually(within: 10) {
                    let body = try fetch(server.port, Self.path).body
                    bodies.append(body)
                    return body == new
                })
            #expect(bodies.allSatisfy { $0 == old || $0 == new })
        }
    }

    /// Clients fetching a tile while it is replaced 60 times (by renames, with versions of many
    /// lengths) over and over: every answer is one whole version, and once the writer
    /// stops, the last one is what is served.
    @Test(.timeLimit(.minutes(10))) func concurrentReplacementsNeverServeMixedBytes() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 1000, height: 1000)
        let versions = (0..<60).map(Self.version)
        let original = root.file(Self.file)
        try withRunningTileServer(root, Self.noResponseCache) { server in
            let stop = ManagedFlag()
            let failures = Tally()
            let answered = Tally()
            let group = DispatchGroup()
            // Each client on a thread of its own: Dispatch's global queue runs only as many
            // blocks as there are cores, and in a full run other tests can hold them all (the
            // writer then waited 5 s for answers after each of its 60 versions).
            for _ in 0..<3 {
                group.enter()
                Thread {
                    defer { group.leave() }
                    do {
                        let client = try RawHTTPClient(port: server.port)
                        while !stop.isSet {
                            try client.request(Self.path)
                            let r = try client.readResponse()
                            answered.add("")
                            if r.status != 200 || !(r.body == original || versions.contains(r.body)) {
                                failures.add("status \(r.status), \(r.body.count) bytes: \(r.text.prefix(40))")
                            }
                        }
                    } catch {
                        failures.add("\(error)")
                    }
                }.start()
            }
            for v in versions {
                try Self.replace(root, Self.file, with: v)
                let seen = answered.count
                _ = eventually(within: 5) { answered.count >= seen + 2 }
            }
            stop.set()
            group.wait()
            #expect(failures.items.isEmpty, "\(failures.items.count) failures, first: \(failures.items.prefix(3))")
            #expect(try fetch(server.port, Self.path).body == versions.last!)
        }
    }

    /// An open tile whose pages left the page cache is not sent from the event loop (where
    /// `sendfile` would wait for the disk): `answer` says so, and the request is read on
    /// the read lane, with the right bytes.
    @Test func anOpenTileNotInThePageCacheIsReadOnTheReadLane() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 1000, height: 1000)
        try withRunningTileServer(root, Self.noResponseCache) { server in
            #expect(try fetch(server.port, Self.path).body == root.file(Self.file))
            let openTiles = try #require(server.store.openTiles)
            let (_, key) = try Self.key(server)
            guard case .ready = openTiles.answer(for: key) else {
                Issue.record("not open after a first request")
                return
            }
            // Written back, then dropped from the page cache (the expected bytes are read
            // first: reading them brings the page back).
            let expected = root.file(Self.file)
            try Self.dropFromPageCache(root, Self.file)
            guard case .notResident = openTiles.answer(for: key) else {
                Issue.record("a tile out of the page cache was about to be sent from the event loop")
                return
            }
            #expect(try fetch(server.port, Self.path).body == expected)
        }
    }

    /// The tiles of one folder share one check of its path: after the rescan interval, a
    /// row folder renamed away drops every open tile in it at its next request (on a
    /// clock passed in, no sleep), and a tile of another folder stays open.
    @Test func theTilesOfOneFolderShareOneCheckOfItsPath() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 1000, height: 1000)
        let paths = ["/images/a/tiles/2/1/2.png", "/images/a/tiles/2/1/0.png", "/images/a/tiles/2/0/0.png"]
        // An interval no slow run reaches: the clock passed in says when it ends.
        let configure: (inout ServerConfiguration) -> Void = {
            $0.cacheBytes = 0
            $0.rescanInterval = 600
        }
        try withRunningTileServer(root, configure) { server in
            for path in paths { #expect(try fetch(server.port, path).status == 200) }
            let openTiles = try #require(server.store.openTiles)
            #expect(openTiles.count == 3 && openTiles.folderCount == 2)
            let (pyramid, _) = try Self.key(server)
            let keys = [(1, 2), (1, 0), (0, 0)].map { row, column in
                CachedItem.tile(generation: pyramid.generation, level: 2, row: row, column: column)
            }
            #expect(rename(root.path + "/a/2/1", root.path + "/a/2/1.old") == 0)
            // Within the interval nothing is walked: the files are unchanged, still open.
            let now = SystemClock.monotonicMilliseconds()
            for key in keys {
                guard case .ready = openTiles.answer(for: key, now: now) else {
                    Issue.record("\(key) dropped before the interval ended")
                    return
                }
            }
            let later = now + openTiles.revalidateAfter
            guard case .notOpen = openTiles.answer(for: keys[0], now: later),
                case .notOpen = openTiles.answer(for: keys[1], now: later),
                case .ready = openTiles.answer(for: keys[2], now: later)
            else {
                Issue.record("the renamed folder's tiles are still open, or the other folder's tile is not")
                return
            }
            #expect(openTiles.count == 1)
            #expect(try fetch(server.port, paths[0]).status == 404)
        }
    }

    /// A level folder renamed away and replaced, with a new tile at the old path: the row
    /// folder's path now leads to another folder, so the new tile is served.
    @Test func aFolderFurtherUpRenamedAwayIsNoticedToo() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 1000, height: 1000)
        try withRunningTileServer(root, Self.noResponseCache) { server in
            #expect(try fetch(server.port, Self.path).body == root.file(Self.file))
            #expect(rename(root.path + "/a/2", root.path + "/a/2.old") == 0)
            try FileManager.default.createDirectory(atPath: root.path + "/a/2/1", withIntermediateDirectories: true)
            let new = Self.version(9)
            try Data(new).write(to: URL(fileURLWithPath: root.path + "/" + Self.file))
            let openTiles = try #require(server.store.openTiles)
            let (_, key) = try Self.key(server)
            guard case .notOpen = openTiles.answer(for: key, now: SystemClock.monotonicMilliseconds() + openTiles.revalidateAfter)
            else {
                Issue.record("a tile whose level folder was replaced is still open")
                return
            }
            #expect(try fetch(server.port, Self.path).body == new)
        }
    }

    /// A folder changed under its open tiles (a name added to it) counts as replaced at
    /// its next check: its tiles are opened again by name, once, and served as they are.
    /// That is what catches a tile replaced where its own `fstat` cannot tell (a file of
    /// an overlayfs lower layer replaced by a rename keeps its link count and times).
    @Test func aFolderChangedUnderItsOpenTilesHasThemOpenedAgain() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 1000, height: 1000)
        try withRunningTileServer(root, Self.noResponseCache) { server throws in
            #expect(try fetch(server.port, Self.path).body == root.file(Self.file))
            let openTiles = try #require(server.store.openTiles)
            let (_, key) = try Self.key(server)
            let before = try #require(openTiles.folder(of: key))
            try Data("x".utf8).write(to: URL(fileURLWithPath: root.path + "/a/2/1/notes.txt"))
            let later = SystemClock.monotonicMilliseconds() + openTiles.revalidateAfter
            guard case .notOpen = openTiles.answer(for: key, now: later) else {
                Issue.record("a tile of a changed folder is still open")
                return
            }
            #expect(try fetch(server.port, Self.path).body == root.file(Self.file))
            let after = try #require(openTiles.folder(of: key))
            #expect(after !== before && !after.isReplaced.load(ordering: .relaxed))
        }
    }

    /// A tile renamed within its folder is noticed at its next request, without waiting
    /// for the folder's check: the rename moved the file's change time.
    @Test func aTileRenamedWithinItsFolderIsNoticedAtOnce() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 1000, height: 1000)
        try withRunningTileServer(root, Self.noResponseCache) { server throws in
            #expect(try fetch(server.port, Self.path).status == 200)
            #expect(rename(root.path + "/" + Self.file, root.path + "/" + Self.file + ".old") == 0)
            #expect(try fetch(server.port, Self.path).status == 404)
        }
    }

    /// The folders kept for open tiles stay bounded: with room for 4 descriptors, tiles
    /// of 140 folders opened in turn leave at most twice the limit's floor of folders,
    /// and a folder whose tile stays open (asked for between the others) survives every
    /// pruning: a second tile opened in it shares it.
    @Test func theFoldersKeptStayBounded() throws {
        let root = try PyramidRoot()
        let openTiles = OpenTiles(capacity: 4, revalidateAfter: 60)
        func write(_ folder: String, _ name: String) throws {
            try FileManager.default.createDirectory(
                atPath: root.path + "/" + folder, withIntermediateDirectories: true)
            let bytes = PyramidRoot.fakeFile(.png, Array("\(folder)/\(name)".utf8))
            try Data(bytes).write(to: URL(fileURLWithPath: root.path + "/\(folder)/\(name)"))
        }
        func keep(_ folder: String, _ name: String, as column: Int) throws {
            if !FileManager.default.fileExists(atPath: root.path + "/\(folder)/\(name)") { try write(folder, name) }
            guard
                case let .file(fd, info, folderInfo?) = RootedFiles.open(
                    root: root.path, [folder, name], maximumBytes: 1 << 20, describingFolder: true)
            else {
                Issue.record("\(folder)/\(name) did not open")
                return
            }
            openTiles.keep(
                fd, info, in: folderInfo, root: root.path, path: [folder, name], contentType: "image/png",
                validators: Validators(info), cacheControl: "no-cache", vary: nil, for: Self.key(column))
        }
        // Both tiles of the folder written first: a name added to it later changes it.
        try write("kept", "t.png")
        try write("kept", "u.png")
        try keep("kept", "t.png", as: 1000)
        let kept = try #require(openTiles.folder(of: Self.key(1000)))
        for i in 0..<140 {
            guard case .ready = openTiles.answer(for: Self.key(1000)) else {
                Issue.record("the tile asked for between the others was dropped at \(i)")
                return
            }
            try keep("f\(i)", "t.png", as: i)
            #expect(openTiles.count <= 4)
            #expect(openTiles.folderCount <= 32)
        }
        try keep("kept", "u.png", as: 1001)
        #expect(openTiles.folder(of: Self.key(1001)) === kept)
    }

    static func key(_ column: Int) -> CachedItem { .tile(generation: 1, level: 0, row: 0, column: Int32(column)) }

    @Test func openTilesStayWithinTheFileLimit() {
        var c = ServerConfiguration(root: "/nonexistent")
        #expect(c.openTileLimit(fileLimit: 1 << 20) == 8192)
        // 20,000 descriptors: 8,192 connections, 256 spare, the rest for tiles.
        c.openTiles = 100_000
        #expect(c.openTileLimit(fileLimit: 20_000) == 20_000 - 8192 - 256)
        // 1,024: the connections take it all.
        #expect(c.openTileLimit(fileLimit: 1024) == 0)
        c.http.maximumConnections = 100
        #expect(c.openTileLimit(fileLimit: 1024) == 1024 - 100 - 256)
    }
}
