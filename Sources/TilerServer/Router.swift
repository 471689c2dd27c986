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
        let target = head.target
        let end = head.pathLength
        var segments: [String] = []
        var start = 1  // after the leading '/'
        if end <= 1 {
            self.segments = []
            return
        }
        var i = start
        while i <= end {
            if i == end || target[i] == UInt8(ascii: "/") {
                segments.append(try Self.decodeSegment(target[start..<i]))
                start = i + 1
            }
            i += 1
        }
        self.segments = segments
    }

    private static func decodeSegment(_ raw: ArraySlice<UInt8>) throws(HTTPError) -> String {
        if !raw.contains(UInt8(ascii: "%")) {
            // Fast path, no copy: the parser already refused NUL and control bytes.
            if raw.contains(UInt8(ascii: "\\")) { throw HTTPError(400, "the path contains a backslash") }
            if raw.count <= 2 && raw.allSatisfy({ $0 == UInt8(ascii: ".") }) && !raw.isEmpty {
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
    public let respond: @Sendable (Request) throws(HTTPError) -> HTTPResponse?

    public init(_ name: String, _ respond: @escaping @Sendable (Request) throws(HTTPError) -> HTTPResponse?) {
        self.name = name
        self.respond = respond
    }
}

/// Turns requests into responses by trying each route in order; no route → 404.
///
/// ## Adding routes
/// Routes are listed in `Router.standardRoutes(store:)` below, in the order they are
/// tried. To add one, write a function returning `[Route]` in its own file of this
/// module, e.g. `func deepZoomRoutes(store: TileStore) -> [Route]`, and add it to that
/// list; a route that writes URLs takes the `PublicAddress` and builds them with it. A route matches on `request.segments`, returns nil when the
/// request is not its own, and uses `TileStore` for pyramids and files (never building
/// paths from request text itself). Put routes whose paths overlap the image API (such
/// as `/images/ID.dzi`, where `ID.dzi` is also a valid image id) *before* `imageRoutes`.
public final class Router: HTTPHandler {
    public let store: TileStore
    public let routes: [Route]

    public init(store: TileStore, routes: [Route]? = nil) {
        self.store = store
        self.routes = routes ?? Router.standardRoutes(store: store)
    }

    /// Every route the server answers, in the order tried. The URLs they write come from
    /// one `PublicAddress` (`--base-url`, `--trust-proxy`).
    public static func standardRoutes(store: TileStore) -> [Route] {
        let c = store.configuration
        let address = PublicAddress(base: c.baseURL, trustProxy: c.trustProxy, http: c.http)
        var routes: [Route] = []
        routes += healthRoutes(store: store)
        // Before the image API: `/images/ID.dzi` is also a valid image id.
        routes += viewerRoutes(address: address) + deepZoomRoutes(store: store)
        routes += iiifPresentationRoutes(store: store, address: address) + iiifRoutes(store: store, address: address)
        routes += imageRoutes(store: store, address: address)
        return routes
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
        do {
            let request = try Request(head: head, mayBlock: mayBlock)
            for route in routes {
                if let response = try route.respond(request) { return response }
            }
            return .error(HTTPError(404, "no such path"))
        } catch {
            return .error(error)
        }
    }
}
