import Foundation
import TilerCore
import TilerHTTP
import TilerImaging

/// IIIF Image API 3.0 under `/iiif/3/` and 2.1 under `/iiif/2/`, compliance level 2, from
/// the same geometry and renderer:
/// - `/iiif/V/ID` redirects (303) to `/iiif/V/ID/info.json`;
/// - `/iiif/V/ID/info.json` is the Image Information document in that version's shape. As
///   3.0 says, JSON-LD (with the version's context as profile) unless the request's
///   `Accept` prefers `application/json`; as 2.1 says, `application/json` unless it
///   prefers `application/ld+json`. Its id starts with the base URL, or else is built per
///   request from the `Host` header or a trusted proxy's, see `PublicAddress`;
/// - `/iiif/V/ID/REGION/SIZE/ROTATION/QUALITY.FORMAT` is an image: the stored tile itself
///   when the request is exactly a tile, otherwise drawn with libvips from the coarsest
///   pyramid level that still has the resolution the output needs, and cached under the
///   version's canonical form (so the versions never share a drawn body).
///
/// Identifiers are percent-decoded (the request's raw path is parsed, so the id in
/// info.json is the one the client wrote). Output size is capped by
/// `ServerConfiguration.iiifLimits`. CORS comes from the HTTP layer, like every route.
/// Private images (`--access`) are refused as on every route; only 3.0's info.json names
/// the IIIF Authorization Flow 2.0 services (`iiifAuthRoutes`) to a caller without a token:
/// 2.1's is a plain 401 or 403, like its images.
func iiifRoutes(store: TileStore, address: PublicAddress) -> [Route] {
    [
        Route("iiif", firstSegments: ["iiif"]) { request throws(HTTPError) in
            guard request.segments.first == "iiif" else { return nil }
            // `/iiif/3/collection.json` and `/iiif/3/ID/manifest.json` are the Presentation
            // API's (`iiifPresentationRoutes`, tried first).
            let target = request.head.target
            let path = String(decoding: target[0..<request.head.pathLength], as: UTF8.self)
            guard let version = IIIFVersion.allCases.first(where: { path.hasPrefix($0.pathPrefix) }) else {
                throw HTTPError(404, "the IIIF Image API lives under /iiif/3/ID/ (3.0) and /iiif/2/ID/ (2.1)")
            }
            let prefix = version.pathPrefix
            let rest = path.dropFirst(prefix.count)
            let route = try httpError { () throws(IIIFError) in try IIIFRoute.parse(path: Substring(rest), version: version) }
            let pyramid: Pyramid
            do throws(HTTPError) {
                pyramid = try store.pyramid(named: route.identifier, for: request)
            } catch {
                // IIIF Auth 2.0: a private image's 3.0 info.json names its services even to a
                // caller it is not open to (with the 401 or 403, and without its size).
                if version == .v3, case .info = route, let access = store.access, error.status == 401 || error.status == 403 {
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
            let base = publicBase + prefix + rest.prefix { $0 != "/" }
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
                let info = IIIFImageInfo(
                    id: base, geometry: pyramid.geometry, format: pyramid.manifest.format, limits: limits, version: version)
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                guard var body = try? encoder.encode(info) else {
                    throw HTTPError(500, "cannot encode info.json for '\(pyramid.id)'")
                }
                if version == .v3, isPrivate, let access = store.access {
                    body = infoWithAuthServices(body, id: route.identifier, base: publicBase, policy: access.policy)
                }
                // Not cached as a document: without --base-url the id depends on the request.
                // Content negotiation (3.0 §5.1: JSON-LD unless the client prefers plain JSON;
                // 2.1 §5: plain JSON unless the client asks for JSON-LD).
                let accept = AcceptHeader(request.head.accept)
                let json = accept.quality(type: "application", subtype: "json")
                let jsonLD = accept.quality(type: "application", subtype: "ld+json")
                let asJSONLD = version == .v3 ? jsonLD >= json : jsonLD > json
                let response = HTTPResponse.bytes(
                    status: 200, contentType: asJSONLD ? version.jsonLDMediaType : "application/json", body: Array(body),
                    cacheControl: documentCacheControl)
                return .withHeaders([("Vary", ["Accept", vary].compactMap { $0 }.joined(separator: ", "))], response)
            case let .image(request):
                let plan = try httpError { () throws(IIIFError) in
                    try IIIFImagePlan(request, geometry: pyramid.geometry, limits: limits)
                }
                let canonical = plan.canonicalParameters(in: pyramid.geometry, version: version)
                // One Link field with both links: some clients read only the first field.
                let links =
                    [("Link", "<\(version.profileURI)>;rel=\"profile\", <\(base)/\(canonical)>;rel=\"canonical\"")] + varyHeader
                if let tile = plan.exactTile(in: pyramid.geometry, format: pyramid.manifest.format) {
                    return .withHeaders(links, try clippedTileResponse(tile, of: pyramid, store: store))
                }
                return .withHeaders(
                    links,
                    try drawnResponse(
                        "iiif/\(version.rawValue)/" + canonical, of: pyramid, store: store,
                        contentType: plan.format.mimeType
                    ) { $0.job(for: plan) })
            }
        }
    ]
}

extension IIIFVersion {
    /// Where the version's images live: `/iiif/3/`, `/iiif/2/`.
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
