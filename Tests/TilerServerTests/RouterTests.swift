import Synchronization
import Testing
import TilerHTTP
import TilerTestSupport
@testable import TilerServer

@Suite struct RouterTests {
    /// A route that names the first segments of its paths is tried only for those; routes
    /// that name none are tried for every path; either way in the order they are listed,
    /// until one answers.
    @Test func routesAreTriedInOrderAndOnlyForTheirFirstSegments() throws {
        let root = try PyramidRoot()
        let store = TileStore(configuration: ServerConfiguration(root: root.path))
        defer { store.stopRescanning() }
        let tried = Mutex<[String]>([])
        func route(_ name: String, _ first: [String]?, answersFor answered: String? = nil) -> Route {
            Route(name, firstSegments: first) { request in
                tried.withLock { $0.append(name) }
                return answered != nil && request.segments.last == answered ? .json(Array(name.utf8)) : nil
            }
        }
        let router = Router(
            store: store,
            routes: [
                route("any", nil), route("a", ["a"], answersFor: "stop"), route("a or b", ["a", "b"]),
                route("any again", nil), route("root", [""]),
            ])
        let cases: [(path: String, tried: [String], answer: String?)] = [
            ("/a/x", ["any", "a", "a or b", "any again"], nil),
            ("/a/stop", ["any", "a"], "a"),
            ("/b?q=1", ["any", "a or b", "any again"], nil),
            ("/c/a", ["any", "any again"], nil),
            ("/", ["any", "any again", "root"], nil),
            ("/?a", ["any", "any again", "root"], nil),
            ("//a", ["any", "any again", "root"], nil),
        ]
        for c in cases {
            tried.withLock { $0 = [] }
            let response = router.respond(to: try head(c.path))
            #expect(tried.withLock { $0 } == c.tried, "\(c.path)")
            switch response {
            case let .bytes(_, _, body, _): #expect(String(decoding: body, as: UTF8.self) == c.answer, "\(c.path)")
            case .error(let e): #expect(c.answer == nil && e.status == 404, "\(c.path)")
            default: Issue.record("\(c.path): \(response)")
            }
        }
    }

    /// The standard routes, dispatched by first segment, still answer every kind of path.
    @Test func standardRoutesNameTheirFirstSegments() throws {
        let root = try PyramidRoot()
        let store = TileStore(configuration: ServerConfiguration(root: root.path))
        defer { store.stopRescanning() }
        let routes = Router.standardRoutes(store: store)
        #expect(routes.allSatisfy { $0.firstSegments != nil })
        let named = Set(routes.flatMap { $0.firstSegments ?? [] })
        #expect(named == ["", "index.html", "viewer", "embed", "healthz", "readyz", "images", "albums", "iiif"])
    }

    /// Plain tile paths are answered before any route is tried (`plainTileResponse`), and
    /// the routes are tried only for their first segments. For every target, tile-like or
    /// not, the router answers as trying every route in order does: the same tile, or the
    /// same error with the same message.
    @Test func plainTilesAnsweredDirectlyAreAnsweredAsTheRoutesWould() throws {
        let root = try PyramidRoot()
        let a = try root.addPyramid("a", width: 900, height: 700)
        let j = try root.addPyramid("j.dzi", width: 300, height: 200, format: .jpeg)
        let part = try root.addPyramid("part", width: 600, height: 600, tilesThrough: 8)
        let store = TileStore(configuration: ServerConfiguration(root: root.path))
        defer { store.stopRescanning() }
        let direct = Router(store: store, routes: nil, answersPlainTilesDirectly: true)
        let routesOnly = Router(store: store, routes: nil, answersPlainTilesDirectly: false)
        // And every route tried for every path, as before routes named their first segments.
        let everyRoute = Router(
            store: store, routes: Router.standardRoutes(store: store).map { Route($0.name, firstSegments: nil, $0.respond) },
            answersPlainTilesDirectly: false)
        #expect(Router(store: store).answersPlainTilesDirectly)
        #expect(!Router(store: store, routes: []).answersPlainTilesDirectly)

        var rng = SystemRandomNumberGenerator()
        func any(_ choices: [String]) -> String { choices.randomElement(using: &rng)! }
        let numbers = ["0", "1", "2", "3", "01", "00", "-1", "x", "", "1e3", "2147483647", "2147483648", "99999999999999999"]
        var targets = ["/images/a/tiles/0/0/0.png", "/images/a/tiles/3/2/3.png", "/images/j.dzi/tiles/2/0/1.jpg"]
        for _ in 0..<2500 {
            // Plain tile paths of the three pyramids near their deepest levels, inside them
            // or not ("part" has no tiles past level 8).
            let (id, ext, maxLevel) = [("a", ".png", a.maxLevel), ("j.dzi", ".jpg", j.maxLevel), ("part", ".png", part.maxLevel)]
                .randomElement(using: &rng)!
            let n = { String(Int.random(in: 0...4, using: &rng)) }
            let level = String(maxLevel - Int.random(in: 0...2, using: &rng)), row = n(), column = n()
            // Most as they are; some with one change that the routes answer otherwise.
            let mutation: (String, String, String, String, String) =
                switch Int.random(in: 0..<12, using: &rng) {
                case 0: (level, row, column, any([".jpg", ".png", ".webp", ".jpeg"]), "")
                case 1: ("0" + level, row, column, ext, "")
                case 2: (level, row, "0" + column, ext, "")
                case 3: (level, row, column, ext.uppercased(), "")
                case 4: (level, row, column, ext, "?x=1")
                case 5: (level, "%3" + row, column, ext, "")
                case 6: (level, row, column + ext, "/", "")
                default: (level, row, column, ext, "")
                }
            targets.append(
                "/images/\(id)/tiles/\(mutation.0)/\(mutation.1)/\(mutation.2)\(mutation.3)\(mutation.4)")
        }
        for _ in 0..<3000 {
            var t = any(["/images/", "/images/", "/images/", "/Images/", "/images//", "/image/", "/iiif/3/", "/iiif/2/"])
            t += any(["a", "a", "j.dzi", "part", "nope", ".", "..", "a%2e", "%61", "a\\b", "j"])
            t += any(["/tiles/", "/tiles/", "/tiles/", "/TILES/", "/tiles//", "_files/", "/thumbnail.png"])
            t += any(numbers) + "/" + any(numbers) + "/" + any(numbers)
            t += any([".png", ".png", ".PNG", ".jpg", ".jpeg", ".webp", ".", "", ".png.png", ".png/", "/x.png"])
            t += any(["", "", "", "?x=1", "#f", "%20"])
            targets.append(t)
        }
        // IIIF documents and exact tiles of both versions, which no fast path may answer.
        for v in [2, 3] {
            targets += [
                "/iiif/\(v)/a", "/iiif/\(v)/a/info.json", "/iiif/\(v)/a/0,0,256,256/max/0/default.png", "/iiif/\(v)/nope/info.json",
            ]
        }
        var directAnswers = 0
        for target in targets {
            let h = try head(target)
            let expected = describe(everyRoute.respond(to: h))
            #expect(describe(routesOnly.respond(to: h)) == expected, "\(target)")
            #expect(describe(direct.respond(to: h)) == expected, "\(target)")
            if plainTileResponse(to: h, from: store, recent: RecentPyramid()) != nil { directAnswers += 1 }
        }
        // Enough of the targets took the direct way for the comparison to mean something.
        #expect(directAnswers > 100, "\(directAnswers)")
    }

    /// The same with private images (`--access`): for callers with no token, a refused one,
    /// one that opens some pyramids and one that opens all (as a header, a cookie or in the
    /// query), the plain-tile fast path answers exactly as the routes do: the same tile,
    /// or the same 401 or 403 with the same challenge, whichever comes first.
    @Test(.timeLimit(.minutes(10))) func privatePlainTilesAnsweredDirectlyAreAnsweredAsTheRoutesWould() throws {
        let setup = try AccessTests.Setup()
        defer { setup.scratch.cleanUp() }
        try AccessTests.Setup.policy(rules: [("j*", "public"), ("*", "token")])
            .write(toFile: setup.policyPath, atomically: true, encoding: .utf8)
        let root = try PyramidRoot()
        let a = try root.addPyramid("a", width: 900, height: 700)
        let j = try root.addPyramid("j.dzi", width: 300, height: 200, format: .jpeg)
        let part = try root.addPyramid("part", width: 600, height: 600, tilesThrough: 8)
        let store = TileStore(configuration: ServerConfiguration(root: root.path), access: try setup.access())
        defer { store.stopRescanning() }
        let direct = Router(store: store, routes: nil, answersPlainTilesDirectly: true)
        let everyRoute = Router(
            store: store, routes: Router.standardRoutes(store: store).map { Route($0.name, firstSegments: nil, $0.respond) },
            answersPlainTilesDirectly: false)
        let tokens = try setup.keys.tokens([
            TokenSpec(alg: "HS256", kid: "site", claims: AccessTests.Setup.claims(["a"])),
            TokenSpec(alg: "ES256", kid: "ec", claims: AccessTests.Setup.claims(["*"])),
            TokenSpec(alg: "HS256", kid: "site", claims: AccessTests.Setup.claims(["*"], ["exp": "-1"])),
        ])
        let callers: [[String]] = [
            [], ["Authorization: Bearer \(tokens[0])"], ["Cookie: tiler_token=\(tokens[1])"],
            ["Authorization: Bearer \(tokens[2])"], ["Authorization: Bearer not.a.token"],
        ]
        var rng = SystemRandomNumberGenerator()
        var targets: [String] = []
        for _ in 0..<600 {
            let (id, ext, maxLevel) = [("a", ".png", a.maxLevel), ("j.dzi", ".jpg", j.maxLevel), ("part", ".png", part.maxLevel)]
                .randomElement(using: &rng)!
            let n = { String(Int.random(in: 0...4, using: &rng)) }
            let level = String(maxLevel - Int.random(in: 0...2, using: &rng))
            let suffix = [
                "", "", "", "?x=1", "?token=\(tokens[1])", "?token=\(tokens[0])", "?token=\(tokens[2])", "?token=a%2Eb", "?token=",
                // A token among other parameters, with bytes a token has not, a second `?`,
                // a fragment, a path that ends where a query would, a long query.
                "?token=\(tokens[1])&x=1", "?x=1&token=\(tokens[1])", "?token=\(tokens[1])+/=", "?token=a?b", "?token=\(tokens[1])#f",
                "?token=\(tokens[1])\\", "?tokens=\(tokens[1])", "?" + String(repeating: "t", count: 300),
            ]
            .randomElement(using: &rng)!
            targets.append("/images/\([id, id, "nope"].randomElement(using: &rng)!)/tiles/\(level)/\(n())/\(n())\(ext)\(suffix)")
        }
        var statuses: Set<Int> = []
        for target in targets {
            for headers in callers {
                var parser = HTTPRequestParser()
                let text = "GET \(target) HTTP/1.1\r\nHost: h\r\n" + headers.map { $0 + "\r\n" }.joined() + "\r\n"
                let r = Array(text.utf8).withUnsafeBytes { parser.parse($0) }
                try #require(r.status == .complete)
                let expected = describe(everyRoute.respond(to: parser.head))
                #expect(describe(direct.respond(to: parser.head)) == expected, "\(target) \(headers.map { $0.prefix(30) })")
                if case let .error(e) = direct.respond(to: parser.head) { statuses.insert(e.status) }
            }
        }
        // Every kind of answer was compared: refusals of both kinds and missing tiles.
        #expect(statuses.isSuperset(of: [401, 403, 404]), "\(statuses)")
    }

    /// A response as text: status, headers and body for bytes and prepared files, the
    /// outcome of blocking work.
    private func describe(_ response: HTTPResponse) -> String {
        switch response {
        case .prepared(let p):
            let body: String =
                switch p.content {
                case .bytes(let b): "\(b.count) bytes \(b.prefix(16)) \(b.suffix(16))"
                case .file(let range): "file \(range.offset) \(range.count)"
                }
            return "prepared \(String(decoding: p.etag, as: UTF8.self)) \(p.lastModified ?? -1) \(body) \(p.headerText)"
        case let .bytes(status, contentType, body, cacheControl):
            return "bytes \(status) \(contentType) \(cacheControl ?? "") \(String(decoding: body, as: UTF8.self))"
        case .error(let e):
            return "error \(e.status) \(e.message) \(e.challenge ?? "")"
        case let .withHeaders(fields, inner):
            return "\(fields.map { "\($0.name): \($0.value)" }) \(describe(inner))"
        case let .blocking(kind, make):
            return "blocking \(kind): \(describe(make()))"
        }
    }

    private func head(_ target: String) throws -> HTTPRequestHead {
        var parser = HTTPRequestParser()
        let r = Array("GET \(target) HTTP/1.1\r\nHost: h\r\n\r\n".utf8).withUnsafeBytes { parser.parse($0) }
        try #require(r.status == .complete)
        return parser.head
    }
}
