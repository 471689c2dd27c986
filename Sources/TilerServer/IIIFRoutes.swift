import Foundation
import TilerCore
import TilerImaging

/// IIIF Image API 3.0 under `/iiif/3/`, compliance level 2:
/// - `/iiif/3/ID` redirects (303) to `/iiif/3/ID/info.json`;
/// - `/iiif/3/ID/info.json` is the Image Information document, `application/ld+json`;
/// - `/iiif/3/ID/REGION/SIZE/ROTATION/QUALITY.FORMAT` is an image: the stored tile's
///   bytes when the request is exactly a tile, otherwise drawn with libvips from the
///   coarsest pyramid level that still has the resolution the output needs.
///
/// Identifiers are percent-decoded, then must be pyramid ids; anything else is a 404.
public struct IIIFRoutes: Sendable {
    public static let prefix = "/iiif/3/"

    public let pyramids: any PyramidLookup
    /// The largest output, advertised in info.json (`maxWidth`, `maxHeight`, `maxArea`).
    public let limits: IIIFLimits

    public init(pyramids: any PyramidLookup, limits: IIIFLimits = .default) {
        self.pyramids = pyramids
        self.limits = limits
    }

    /// Image responses name the compliance profile (`Link: …;rel="profile"`).
    static let profileLink = HTTPHeaderField("Link", "<\(IIIF.profileURI)>;rel=\"profile\"")

    /// The answer for `path` (percent-encoded, without the query), or nil when the path is
    /// not under `/iiif/3/`.
    public func answer(path: Substring, context: RouteContext) -> RouteAnswer? {
        guard path.hasPrefix(Self.prefix) else { return path == "/iiif/3" ? .error(status: 404, message: "no IIIF identifier in the path") : nil }
        let rest = path.dropFirst(Self.prefix.count)
        let route: IIIFRoute
        do {
            route = try IIIFRoute.parse(path: rest)
        } catch {
            return .error(status: error.status, message: error.description)
        }
        // The identifier exactly as the client wrote it, for the URLs we hand back.
        let rawIdentifier = rest.prefix { $0 != "/" }
        let base = context.baseURL + Self.prefix + rawIdentifier
        guard let id = PyramidID(route.identifier), let found = pyramids.pyramid(id) else {
            return .noImage(route.identifier)
        }
        switch route {
        case .base:
            return .redirect(status: 303, location: base + "/info.json")
        case .info:
            let info = IIIFImageInfo(id: base, geometry: found.geometry, format: found.manifest.format, limits: limits)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            guard let body = try? encoder.encode(info) else {
                return .error(status: 500, message: "cannot encode info.json for '\(id)'")
            }
            return .bytes(status: 200, contentType: IIIF.jsonLDMediaType, body: Array(body),
                          headers: [HTTPHeaderField("Link", "<\(IIIF.context)>;rel=\"http://www.w3.org/ns/json-ld#context\";type=\"application/ld+json\"")])
        case let .image(request):
            let plan: IIIFImagePlan
            do {
                plan = try IIIFImagePlan(request, geometry: found.geometry, limits: limits)
            } catch {
                return .error(status: error.status, message: error.description)
            }
            let canonical = HTTPHeaderField("Link", "<\(base)/\(canonicalParameters(plan, found.geometry))>;rel=\"canonical\"")
            if let tile = plan.exactTile(in: found.geometry, format: found.manifest.format) {
                return .file(path: found.directory + "/" + found.manifest.tilePath(tile),
                             contentType: plan.format.mimeType, headers: [Self.profileLink, canonical])
            }
            do {
                let renderer = try RegionRenderer(directory: found.directory, manifest: found.manifest)
                let bytes = try renderer.render(plan)
                return .bytes(status: 200, contentType: plan.format.mimeType, body: bytes, headers: [Self.profileLink, canonical])
            } catch {
                return .error(status: 500, message: "cannot draw \(rest.prefix(200)): \(error)")
            }
        }
    }

    /// The canonical form of a request (region as `x,y,w,h` or `full`, size as `w,h` or
    /// `max`), for the `rel="canonical"` link.
    func canonicalParameters(_ plan: IIIFImagePlan, _ g: PyramidGeometry) -> String {
        let r = plan.region
        let full = r.x == 0 && r.y == 0 && r.width == g.width && r.height == g.height
        let region = full ? "full" : "\(r.x),\(r.y),\(r.width),\(r.height)"
        let upscaled = plan.width > r.width || plan.height > r.height
        let size = plan.width == r.width && plan.height == r.height ? "max" : (upscaled ? "^" : "") + "\(plan.width),\(plan.height)"
        let degrees = plan.rotation.degrees
        let number = degrees == degrees.rounded() ? String(Int(degrees)) : String(degrees)
        let rotation = (plan.rotation.mirror ? "!" : "") + number
        return "\(region)/\(size)/\(rotation)/\(plan.quality.rawValue).\(plan.format.rawValue)"
    }
}
