import Foundation
import Testing
import TilerTestSupport
#if canImport(Glibc)
    import Glibc
#endif

/// `tiler rm` against a running `tiler serve`, observed from outside as a client sees it.
///
/// **The property ("whole or gone").** A client fetches the manifest, thumbnail and tiles
/// of pyramid ID while it is removed. Then:
/// 1. every answer is either 200 carrying exactly the bytes the pyramid held, or 404;
/// 2. no request *sent after* any client *received* a 404 for ID is answered 200.
///
/// (2) says the pyramid disappears for everyone at one instant: before it, every part of
/// it is served whole; after it, none. A viewer that drew the manifest and asks for a
/// level's tiles therefore gets all of them or none, never the half an image that a
/// server answering its cached tiles 200 and the rest 404 would show. And at the end
/// every request for ID is 404.
@Suite(.serialized) struct RemoveWhileServingTests {
    /// One answer seen by a client, with monotonic times in nanoseconds.
    struct Observation {
        var path: String
        var sent: UInt64
        var received: UInt64
        var status: Int
        var whole: Bool
    }

    /// What breaks the property, one line each (empty when it holds).
    static func violations(_ observations: [Observation]) -> [String] {
        var found: [String] = []
        for o in observations where !(o.status == 200 && o.whole) && o.status != 404 {
            found.append("\(o.path): \(o.status)\(o.status == 200 ? " with other bytes" : "")")
        }
        if let gone = observations.filter({ $0.status == 404 }).min(by: { $0.received < $1.received }) {
            for o in observations where o.status == 200 && o.sent > gone.received {
                found.append("\(o.path): 200 sent \((o.sent - gone.received) / 1000) µs after \(gone.path) was answered 404")
            }
        }
        return found
    }

    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// The routes of pyramid `id` a viewer fetches, with the bytes each must carry (nil
    /// for the manifest, whose bytes the server writes).
    static func routes(root: String, id: String) throws -> [(path: String, bytes: [UInt8]?)] {
        var routes: [(String, [UInt8]?)] = [("/images/\(id)", nil)]
        routes.append(("/images/\(id)/thumbnail.png", try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(root)/\(id)/thumbnail.png")))))
        for (level, columns, rows) in [(0, 1, 1), (1, 2, 2), (2, 4, 3)] {
            for row in 0..<rows {
                for column in 0..<columns {
                    let file = "\(root)/\(id)/\(level)/\(row)/\(column).png"
                    routes.append(
                        ("/images/\(id)/tiles/\(level)/\(row)/\(column).png", try [UInt8](Data(contentsOf: URL(fileURLWithPath: file)))))
                }
            }
        }
        return routes
    }

    /// Fetches `routes` in turn on one keep-alive connection (a new one after an error).
    static func fetch(_ routes: [(path: String, bytes: [UInt8]?)], port: Int, client: inout RawHTTPClient?) -> [Observation] {
        var seen: [Observation] = []
        for route in routes {
            let sent = now()
            do {
                if client == nil { client = try RawHTTPClient(port: port) }
                try client!.request(route.path)
                let response = try client!.readResponse()
                seen.append(
                    Observation(
                        path: route.path, sent: sent, received: now(), status: response.status,
                        whole: route.bytes.map { $0 == response.body } ?? !response.body.isEmpty))
            } catch {
                client = nil
                seen.append(Observation(path: route.path, sent: sent, received: now(), status: -1, whole: false))
            }
        }
        return seen
    }

    /// A server on ROOT with `photo` (1000 × 700, 17 tiles) cut into it, half of whose
    /// tiles are in the server's cache.
    struct Setup {
        let scratch: Scratch
        let root: String
        let tiler: String
        let server: ServeProcess
        var port: Int { server.port }
        let routes: [(path: String, bytes: [UInt8]?)]

        init(_ name: String = #function, rescanInterval: String) throws {
            scratch = try Scratch(name)
            root = scratch.path("tiles")
            tiler = try tilerBinary()
            let input = scratch.path("photo.png")
            try CutCommandTests.makeImage(input, width: 1000, height: 700, bands: 3, scratch: scratch)
            let cut = try run(tiler, ["cut", input, "--format", "png", "-o", root, "--quiet"])
            guard cut.status == 0 else { throw SupportError(description: cut.stderr) }
            routes = try RemoveWhileServingTests.routes(root: root, id: "photo")
            server = try ServeProcess([root, "--port", "0", "--threads", "2", "--rescan-interval", rescanInterval])
            var client: RawHTTPClient?
            let warm = RemoveWhileServingTests.fetch(
                routes.enumerated().filter { $0.offset % 2 == 0 }.map(\.element),
                port: port, client: &client)
            guard warm.allSatisfy({ $0.status == 200 && $0.whole }) else {
                throw SupportError(description: "the server did not serve photo whole before the removal")
            }
        }

        func stop() {
            server.stop()
            scratch.cleanUp()
        }
    }

    /// Clients hammer every route of the pyramid while `tiler rm` removes it; the
    /// property holds, and at the end every route is 404.
    @Test func rmWhileServingNeverServesHalfAPyramid() throws {
        let setup = try Setup(rescanInterval: "0.2")
        defer { setup.stop() }
        let shared = Locked((observations: [Observation](), removed: false))
        let clients = DispatchGroup()
        for shift in 0..<2 {
            DispatchQueue.global().async(group: clients) {
                var client: RawHTTPClient?
                // Rotated so the two clients ask for different routes at once.
                let routes = Array(setup.routes[(shift * 9)...] + setup.routes[..<(shift * 9)])
                let deadline = Date().addingTimeInterval(60)
                var goneRounds = 0
                while Date() < deadline, goneRounds < 3 {
                    let round = Self.fetch(routes, port: setup.port, client: &client)
                    let finished = shared.withLock {
                        $0.observations += round
                        return $0.removed
                    }
                    goneRounds = finished && round.allSatisfy({ $0.status == 404 }) ? goneRounds + 1 : 0
                }
            }
        }
        // Let the clients get going, then remove: grace 1 s, five scans of the server.
        let deadline = Date().addingTimeInterval(30)
        while shared.withLock({ $0.observations.count }) < 4 * setup.routes.count, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.005)
        }
        let removal = try run(setup.tiler, ["rm", setup.root, "photo", "--grace", "1"])
        shared.withLock { $0.removed = true }
        clients.wait()
        #expect(removal.status == 0, "\(removal.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(setup.root)/photo"))

        let seen = shared.withLock { $0.observations }
        let problems = Self.violations(seen)
        #expect(problems.isEmpty, "\(problems.prefix(10).joined(separator: "\n"))")
        // The hammering covered the removal: answers of both kinds, and the last rounds 404.
        #expect(seen.contains { $0.status == 200 } && seen.contains { $0.status == 404 })
        #expect(seen.suffix(setup.routes.count).allSatisfy { $0.status == 404 })
        let ok = seen.filter { $0.status == 200 }, gone = seen.filter { $0.status == 404 }
        if let lastOK = ok.map(\.received).max(), let firstGone = gone.map(\.received).min() {
            print(
                "rm while serving: \(seen.count) answers, \(ok.count) × 200 then \(gone.count) × 404; the last 200 came "
                    + "\(Double(Int64(firstGone) - Int64(lastOK)) / 1e6) ms before the first 404")
        }
    }

    /// Why the grace period exists, and that the check above can fail: removing the
    /// folder at once (`--grace 0`) while a server has not rescanned yet serves the
    /// cached half of the pyramid 200 and the other half 404.
    @Test func removingAtOnceWouldServeHalfAPyramid() throws {
        let setup = try Setup(rescanInterval: "3600")
        defer { setup.stop() }
        let removal = try run(setup.tiler, ["rm", setup.root, "photo", "--grace", "0"])
        #expect(removal.status == 0, "\(removal.stderr)")
        var client: RawHTTPClient?
        let seen = Self.fetch(setup.routes, port: setup.port, client: &client)
        #expect(seen.contains { $0.status == 200 } && seen.contains { $0.status == 404 }, "\(seen.map(\.status))")
        #expect(!Self.violations(seen).isEmpty)
        print(
            "rm --grace 0 before the server's scan: \(seen.filter { $0.status == 200 }.count) × 200 (cached) and "
                + "\(seen.filter { $0.status == 404 }.count) × 404 among the pyramid's \(seen.count) routes")
    }
}
