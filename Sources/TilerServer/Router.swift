import TilerCore
import TilerHTTP

/// A request as routes see it: the parsed head, and the path split on `/` into
/// percent-decoded segments.
///
/// Decoding happens per segment after splitting, so `%2F` can never create a separator;
/// a segment that decodes to `.` or `..`, or contains `/` or NUL, or a malformed `%`
/// escape, is refused with 400 before any route runs.
public struct Request: Sendable {
    public let head: HTTPRequestHead
    /// `/images/a/tiles/0/0/0.png` → `["images", "a", "tiles", "0", "0", "0.png"]`;
    /// `/` → `[]`; a trailing slash gives a trailing empty segment.
    public let segments: [String]
    /// Whether the request is being answered where blocking is allowed (the blocking
    /// pool), so a route may read the disk; false on an event loop.
    public let mayBlock: Bool

    /// Splits and decodes the target's path.
    public init(head: HTTPRequestHead, mayBlock: Bool = false) throws(HTTPError) {
        self.head = head
        self.mayBlock = mayBlock
        let end = head.pathLength
        segments = try head.target.withUnsafeBufferPointer { target throws(HTTPError) in
            try Self.split(UnsafeBufferPointer(rebasing: target[..<end]))
        }
    }

    /// `path` split on `/` and decoded: its segments counted first, so that the array is
    /// allocated once, then each one checked and decoded.
    private static func split(_ path: UnsafeBufferPointer<UInt8>) throws(HTTPError) -> [String] {
        let end = path.count
        if end <= 1 { return [] }
        var segments: [String] = []
        segments.reserveCapacity(path.count(where: { $0 == UInt8(ascii: "/") }))
        var start = 1  // after the leading '/'
        for i in 1...end where i == end || path[i] == UInt8(ascii: "/") {
            segments.append(try decodeSegment(UnsafeBufferPointer(rebasing: path[start..<i])))
            start = i + 1
        }
        return segments
    }

    private static func decodeSegment(_ raw: UnsafeBufferPointer<UInt8>) throws(HTTPError) -> String {
        var percent = false
        var backslash = false
        for b in raw {
            if b == UInt8(ascii: "%") { percent = true } else if b == UInt8(ascii: "\\") { backslash = true }
        }
        if !percent {
            // Fast path, no copy: the parser already refused NUL and control bytes.
            if backslash { throw HTTPError(400, "the path contains a backslash") }
            let dot = UInt8(ascii: ".")
            if (raw.count == 1 && raw[0] == dot) || (raw.count == 2 && raw[0] == dot && raw[1] == dot) {
                throw HTTPError(400, "the path contains a '.' or '..' segment")
            }
            return String(decoding: raw, as: UTF8.self)
        }
        guard let bytes = percentDecodedBytes(raw) else { throw HTTPError(400, "malformed percent-encoding in the path") }
        if bytes.contains(0) || bytes.contains(UInt8(ascii: "/")) || bytes.contains(UInt8(ascii: "\\")) {
            throw HTTPError(400, "the path contains an encoded slash, backslash or NUL")
        }
        if bytes == [UInt8(ascii: ".")] || bytes == [UInt8(ascii: "."), UInt8(ascii: ".")] {
            throw HTTPError(400, "the path contains a '.' or '..' segment")
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The query's bytes, after `?` and before any `#`, not decoded; empty for none.
    public var rawQuery: ArraySlice<UInt8> {
        let target = head.target
        guard let q = target.firstIndex(of: UInt8(ascii: "?")) else { return [] }
        let end = target[q...].firstIndex(of: UInt8(ascii: "#")) ?? target.count
        return target[(q + 1)..<end]
    }

    /// The query's `name=value` pairs, percent-decoded (`+` is kept as is), in order.
    public func queryItems() throws(HTTPError) -> [(name: String, value: String)] {
        var items: [(name: String, value: String)] = []
        for part in rawQuery.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let eq = part.firstIndex(of: UInt8(ascii: "=")) ?? part.endIndex
            let name = try Self.decodeQuery(part[part.startIndex..<eq])
            let value = eq < part.endIndex ? try Self.decodeQuery(part[(eq + 1)...]) : ""
            items.append((name, value))
        }
        return items
    }

    private static func decodeQuery(_ raw: ArraySlice<UInt8>) throws(HTTPError) -> String {
        guard let bytes = percentDecodedBytes(raw) else { throw HTTPError(400, "malformed percent-encoding in the query") }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// One route: given a request, its response, or nil when the request is not for it (the
/// router then tries the next route). Routes throw `HTTPError` for 4xx/5xx answers.
public struct Route: Sendable {
    public let name: String
    /// The first path segment of every path the route answers (`images` for
    /// `/images/…`; `""` for `/` itself), so that the router tries it only for those;
    /// nil for a route that looks at every path.
    public let firstSegments: [String]?
    public let respond: @Sendable (Request) throws(HTTPError) -> HTTPResponse?

    public init(
        _ name: String, firstSegments: [String]? = nil,
        _ respond: @escaping @Sendable (Request) throws(HTTPError) -> HTTPResponse?
    ) {
        self.name = name
        self.firstSegments = firstSegments
        self.respond = respond
    }
}

/// Turns requests into responses by trying each route in order; no route → 404.
///
/// ## Adding routes
/// Routes are listed in `Router.standardRoutes(store:)` below, in the order they are
/// tried. To add one, write a function returning `[Route]` in its own file of this
/// module, e.g. `func deepZoomRoutes(store: TileStore) -> [Route]`, and add it to that
/// list; a route that writes URLs takes the `PublicAddress` and builds them with it. A
/// route matches on `request.segments`, returns nil when the request is not its own,
/// names the first segments of the paths it answers (`firstSegments`, so that the
/// router skips it for others), and uses `TileStore` for pyramids and files (never building
/// paths from request text itself). Put routes whose paths overlap the image API (such
/// as `/images/ID.dzi`, where `ID.dzi` is also a valid image id) *before* `imageRoutes`.
public final class Router: HTTPHandler {
    public let store: TileStore
    public let routes: [Route]
    /// For each first path segment some route names, the routes to try, in order: those
    /// that name it and those that look at every path.
    private let routesByFirstSegment: [String: [Route]]
    /// The routes to try for any other first segment: those that look at every path.
    private let routesForOtherPaths: [Route]
    /// Whether plain tile paths are answered before any route (`plainTileResponse`): with
    /// the standard routes, where that is the answer the `images` route would give.
    let answersPlainTilesDirectly: Bool
    /// The pyramid plain tile paths named last (one `Router` per event loop).
    private let recentPyramid = RecentPyramid()
    /// Warnings about a proxy set up half-way (shared by the server's routers).
    let proxyHints: ProxyHints

    public convenience init(store: TileStore, routes: [Route]? = nil) {
        self.init(store: store, routes: routes, answersPlainTilesDirectly: routes == nil)
    }

    init(store: TileStore, routes: [Route]?, answersPlainTilesDirectly: Bool, proxyHints: ProxyHints? = nil) {
        self.store = store
        self.answersPlainTilesDirectly = answersPlainTilesDirectly
        let routes = routes ?? Router.standardRoutes(store: store)
        self.routes = routes
        let named = Set(routes.flatMap { $0.firstSegments ?? [] })
        self.proxyHints = proxyHints ?? Router.proxyHints(store: store, routes: routes)
        routesByFirstSegment = Dictionary(
            uniqueKeysWithValues: named.map { first in
                (first, routes.filter { $0.firstSegments?.contains(first) ?? true })
            })
        routesForOtherPaths = routes.filter { $0.firstSegments == nil }
    }

    /// Every route the server answers, in the order tried. The URLs they write come from
    /// one `PublicAddress` (`--base-url`, `--trust-proxy`).
    public static func standardRoutes(store: TileStore) -> [Route] {
        let c = store.configuration
        let address = PublicAddress(base: c.baseURL, trustProxy: c.trustProxy, http: c.http)
        var routes: [Route] = []
        routes += healthRoutes(store: store)
        // Before the image API: `/images/ID.dzi` is also a valid image id.
        routes += viewerRoutes(address: address, maxZoomPercent: c.viewerMaxZoomPercent) + deepZoomRoutes(store: store)
        routes += embedRoutes(store: store, address: address)
        routes += iiifAuthRoutes(store: store, address: address)
        routes += iiifPresentationRoutes(store: store, address: address) + iiifRoutes(store: store, address: address)
        routes += imageRoutes(store: store, address: address)
        return routes
    }

    /// The hints for a server's routers: one, shared, so that each warning is logged once.
    static func proxyHints(store: TileStore, routes: [Route]? = nil) -> ProxyHints {
        let routes = routes ?? standardRoutes(store: store)
        return ProxyHints(
            basePath: store.configuration.baseURL?.path, ownedSegments: Set(routes.flatMap { $0.firstSegments ?? [] }),
            log: store.log)
    }

    /// The response to `head`, made without blocking: when a route would have to read the
    /// disk first (a pyramid not known yet, `TileStore.lookupMustBlock`), the whole request
    /// is answered on the blocking pool instead.
    public func respond(to head: HTTPRequestHead) -> HTTPResponse {
        let response = respond(to: head, mayBlock: false)
        guard case .error(TileStore.lookupMustBlock) = response else { return response }
        // A lookup reads a folder and a small manifest: the read lane.
        return .blocking(.read) { [self] in
            var response = respond(to: head, mayBlock: true)
            // Already on the pool: run any further blocking work (a drawing) here.
            while let work = response.blockingWork { response = work.make() }
            return response
        }
    }

    private func respond(to head: HTTPRequestHead, mayBlock: Bool) -> HTTPResponse {
        if answersPlainTilesDirectly, let response = plainTileResponse(to: head, from: store, recent: recentPyramid) { return response }
        if !head.xForwardedPrefix.isEmpty { proxyHints.sawForwardedPrefix(head) }
        do {
            let request = try Request(head: head, mayBlock: mayBlock)
            // Only the routes for this first segment: a tile request tries two, not six.
            let known = routesByFirstSegment[request.segments.first ?? ""]
            let candidates = known ?? routesForOtherPaths
            for i in candidates.indices {
                if let response = try candidates[i].respond(request) { return response }
            }
            if known == nil { proxyHints.sawForeignPath(request.segments) }
            return .error(HTTPError(404, "no such path"))
        } catch {
            // A 503 is worth trying again soon (the catalog still loading, storage down).
            return error.status == 503 ? .withHeaders([("Retry-After", "1")], .error(error)) : .error(error)
        }
    }
}
