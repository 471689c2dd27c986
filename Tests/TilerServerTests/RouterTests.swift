import Synchronization
import Testing
import TilerHTTP
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
        #expect(named == ["", "index.html", "viewer", "healthz", "images", "iiif"])
    }

    private func head(_ target: String) throws -> HTTPRequestHead {
        var parser = HTTPRequestParser()
        let r = Array("GET \(target) HTTP/1.1\r\nHost: h\r\n\r\n".utf8).withUnsafeBytes { parser.parse($0) }
        try #require(r.status == .complete)
        return parser.head
    }
}
