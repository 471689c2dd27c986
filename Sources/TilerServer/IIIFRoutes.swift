import Foundation
import TilerCore
import TilerHTTP
import TilerImaging

/// IIIF Image API 3.0 under `/iiif/3/`, compliance level 2:
/// - `/iiif/3/ID` redirects (303) to `/iiif/3/ID/info.json`;
/// - `/iiif/3/ID/info.json` is the Image Information document (`application/ld+json`
///   with the IIIF 3 context as profile, or `application/json` when the request's
///   `Accept` prefers it; its `id` starts with the base URL, or else is
///   built per request from the `Host` header or a trusted proxy's, see `PublicAddress`);
/// - `/iiif/3/ID/REGION/SIZE/ROTATION/QUALITY.FORMAT` is an image: the stored tile itself
///   when the request is exactly a tile, otherwise drawn with libvips from the coarsest
///   pyramid level that still has the resolution the output needs, and cached.
///
/// Identifiers are percent-decoded (the request's raw path is parsed, so the id in
/// info.json is the one the client wrote). Output size is capped by
/// `ServerConfiguration.iiifLimits`. CORS comes from the HTTP layer, like every route.
func iiifRoutes(store: TileStore, address: PublicAddress) -> [Route] {
    [
        Route("iiif", firstSegments: ["iiif"]) { request throws(HTTPError) in
            guard request.segments.first == "iiif" else { return nil }
            // `/iiif/3/collection.json` and `/iiif/3/ID/manifest.json` are the Presentation
            // API's (`iiifPresentationRoutes`, tried first).
            let target = request.head.target
            let path = String(decoding: target[0..<request.head.pathLength], as: UTF8.self)
            guard path.hasPrefix(iiifPrefix) else {
                throw HTTPError(404, "IIIF Image API 3.0 lives under \(iiifPrefix)ID/")
            }
            let rest = path.dropFirst(iiifPrefix.count)
            let route = try httpError { () throws(IIIFError) in try IIIFRoute.parse(path: Substring(rest)) }
            let pyramid: Pyramid
            do throws(HTTPError) {
                pyramid = try store.pyramid(named: route.identifier, for: request)
            } catch {
                // IIIF Auth 2.0: a private image's info.json names its services even to a
                // caller it is not open to (with the 401 or 403, and without its size).
                if case .info = route, let access = store.access, error.status == 401 || error.status == 403 {
                    let publicBase = address.absoluteBase(for: request.head).url
                    return privateInfoResponse(error, id: route.identifier, base: publicBase, policy: access.policy)
                }
                throw error
            }
            let (publicBase, hostVary) = address.absoluteBase(for: request.head)
            // A private image's answers depend on the caller's token: say so.
            let isPrivate = store.isPrivate(pyramid)
            let vary = isPrivate ? [hostVary, TileStore.privateVary].compactMap { $0 }.joined(separator: ", ") : hostVary
            let documentCacheControl = isPrivate ? TileStore.privateCacheControl : "no-cache"
            let base = publicBase + iiifPrefix + rest.prefix { $0 != "/" }
            let varyHeader = vary.map { [("Vary", $0)] } ?? []
            let limits = store.configuration.iiifLimits
            switch route {
            case .base:
                return .withHeaders(
                    [("Location", base + "/info.json")] + varyHeader,
                    .bytes(
                        status: 303, contentType: "application/json",
                        body: Array(#"{"location":"\#(base)/info.json"}"#.utf8), cacheControl: documentCacheControl))
            case .info:
                let info = IIIFImageInfo(id: base, geometry: pyramid.geometry, format: pyramid.manifest.format, limits: limits)
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                guard var body = try? encoder.encode(info) else {
                    throw HTTPError(500, "cannot encode info.json for '\(pyramid.id)'")
                }
                if isPrivate, let access = store.access {
                    body = infoWithAuthServices(body, id: route.identifier, base: publicBase, policy: access.policy)
                }
                // Not cached as a document: without --base-url the id depends on the request.
                // JSON-LD with the IIIF context as profile unless the client prefers plain
                // JSON (Image API 3.0 §5.1: content negotiation, JSON-LD without `Accept`).
                let accept = AcceptHeader(request.head.accept)
                let plain =
                    accept.quality(type: "application", subtype: "json")
                    > accept.quality(type: "application", subtype: "ld+json")
                let response = HTTPResponse.bytes(
                    status: 200, contentType: plain ? "application/json" : IIIFVersion.v3.jsonLDMediaType, body: Array(body),
                    cacheControl: documentCacheControl)
                return .withHeaders([("Vary", ["Accept", vary].compactMap { $0 }.joined(separator: ", "))], response)
            case let .image(request):
                let plan = try httpError { () throws(IIIFError) in
                    try IIIFImagePlan(request, geometry: pyramid.geometry, limits: limits)
                }
                let canonical = plan.canonicalParameters(in: pyramid.geometry)
                // One Link field with both links: some clients read only the first field.
                let links =
                    [("Link", "<\(IIIFVersion.v3.profileURI)>;rel=\"profile\", <\(base)/\(canonical)>;rel=\"canonical\"")] + varyHeader
                if let tile = plan.exactTile(in: pyramid.geometry, format: pyramid.manifest.format) {
                    return .withHeaders(links, try clippedTileResponse(tile, of: pyramid, store: store))
                }
                return .withHeaders(
                    links,
                    try drawnResponse(
                        "iiif/" + canonical, of: pyramid, store: store,
                        contentType: plan.format.mimeType
                    ) { $0.job(for: plan) })
            }
        }
    ]
}

let iiifPrefix = IIIFVersion.v3.pathPrefix

extension IIIFVersion {
    /// Where the version's images live: `/iiif/3/`.
    var pathPrefix: String { "/iiif/\(rawValue)/" }
}

/// Runs `body`, turning a IIIF 400/404 into the same HTTP error.
private func httpError<T>(_ body: () throws(IIIFError) -> T) throws(HTTPError) -> T {
    do {
        return try body()
    } catch {
        throw HTTPError(error.status, error.description)
    }
}
