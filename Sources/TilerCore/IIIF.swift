/// IIIF Image API 3.0 and 2.1: request parsing, validation and the Image Information
/// document. Pure values; the server turns `IIIFError` into an HTTP status and the renderer
/// draws a `IIIFImagePlan`. Specifications: https://iiif.io/api/image/3.0/ and
/// https://iiif.io/api/image/2.1/
public enum IIIF {
    /// The `protocol` value of every info.json.
    public static let protocolURI = "http://iiif.io/api/image"
    /// The compliance level this implementation reaches.
    public static let complianceLevel = "level2"
}

/// A version of the Image API: the same images, geometry and renderer behind two URL
/// syntaxes and two info.json shapes.
public enum IIIFVersion: Int, Sendable, Hashable, CaseIterable {
    /// Image API 2.1: `full` is a (deprecated) name for `max`, there is no `^`, and any
    /// explicit size may exceed the region (the feature `sizeAboveFull`).
    case v2 = 2
    /// Image API 3.0: a size exceeds the region only after `^`.
    case v3 = 3

    /// The JSON-LD context of info.json.
    public var context: String { "http://iiif.io/api/image/\(rawValue)/context.json" }
    /// The profile document, sent in `Link: <…>;rel="profile"` on image responses.
    public var profileURI: String { "http://iiif.io/api/image/\(rawValue)/\(IIIF.complianceLevel).json" }
    /// The `Content-Type` for info.json when it is sent as JSON-LD.
    public var jsonLDMediaType: String { "application/ld+json;profile=\"\(context)\"" }
    /// The version as the specification names it.
    public var name: String {
        switch self {
        case .v2: "2.1"
        case .v3: "3.0"
        }
    }
}

/// Why a IIIF request cannot be answered: a 400 (malformed or impossible request) or a
/// 404 (no such image, or a path that is not a IIIF URL).
public enum IIIFError: Error, Hashable, Sendable, CustomStringConvertible {
    case badRequest(String)
    case notFound(String)

    public var status: Int {
        switch self {
        case .badRequest: 400
        case .notFound: 404
        }
    }

    public var description: String {
        switch self {
        case let .badRequest(why), let .notFound(why): why
        }
    }
}

/// The limits on what one image request may produce, advertised in info.json as
/// `maxWidth`, `maxHeight` and `maxArea`.
public struct IIIFLimits: Sendable, Hashable {
    public var maxWidth: Int
    public var maxHeight: Int
    public var maxArea: Int

    /// 10000 px a side and 25 megapixels: enough for any screen, small enough that one
    /// request cannot take the server's memory.
    public static let `default` = IIIFLimits(maxWidth: 10_000, maxHeight: 10_000, maxArea: 25_000_000)

    public init(maxWidth: Int, maxHeight: Int, maxArea: Int) {
        self.maxWidth = max(1, maxWidth)
        self.maxHeight = max(1, maxHeight)
        self.maxArea = max(1, maxArea)
    }
}

/// The region parameter.
public enum IIIFRegion: Sendable, Hashable {
    case full
    case square
    case pixels(x: Int, y: Int, width: Int, height: Int)
    case percent(x: Double, y: Double, width: Double, height: Double)
}

/// The size parameter: a form and whether the output may be larger than the region (3.0's
/// `^`; any explicit size in 2.1).
public struct IIIFSize: Sendable, Hashable {
    public enum Form: Sendable, Hashable {
        case max
        case width(Int)
        case height(Int)
        case percent(Double)
        case exact(width: Int, height: Int)
        case confined(width: Int, height: Int)
    }

    public var form: Form
    public var upscale: Bool

    public init(_ form: Form, upscale: Bool = false) {
        self.form = form
        self.upscale = upscale
    }
}

/// The rotation parameter: optional mirroring (applied first), then clockwise degrees.
public struct IIIFRotation: Sendable, Hashable {
    public var mirror: Bool
    /// Clockwise degrees in `0..<360` (360 is normalised to 0).
    public var degrees: Double

    public init(mirror: Bool = false, degrees: Double = 0) {
        self.mirror = mirror
        self.degrees = degrees
    }

    /// Whether the rotation is a multiple of 90°.
    public var isRightAngle: Bool { degrees.truncatingRemainder(dividingBy: 90) == 0 }
    /// Whether nothing is rotated or mirrored.
    public var isIdentity: Bool { !mirror && degrees == 0 }
}

/// The quality parameter.
public enum IIIFQuality: String, Sendable, Hashable, CaseIterable {
    case `default`, color, gray, bitonal
}

/// The format parameter: the formats this server writes.
public enum IIIFFormat: String, Sendable, Hashable, CaseIterable {
    case jpg, png, webp

    public var mimeType: String {
        switch self {
        case .jpg: "image/jpeg"
        case .png: "image/png"
        case .webp: "image/webp"
        }
    }

    /// The IIIF format of a pyramid's tiles.
    public init(_ format: TileFormat) {
        switch format {
        case .png: self = .png
        case .jpeg: self = .jpg
        case .webp: self = .webp
        }
    }
}

/// A parsed image request `{identifier}/{region}/{size}/{rotation}/{quality}.{format}`.
public struct IIIFImageRequest: Sendable, Hashable {
    /// The percent-decoded identifier.
    public var identifier: String
    public var region: IIIFRegion
    public var size: IIIFSize
    public var rotation: IIIFRotation
    public var quality: IIIFQuality
    public var format: IIIFFormat

    public init(
        identifier: String, region: IIIFRegion, size: IIIFSize, rotation: IIIFRotation,
        quality: IIIFQuality, format: IIIFFormat
    ) {
        self.identifier = identifier
        self.region = region
        self.size = size
        self.rotation = rotation
        self.quality = quality
        self.format = format
    }
}

/// What a path under the IIIF prefix asks for.
public enum IIIFRoute: Sendable, Hashable {
    /// `{identifier}`: redirect (303) to its info.json.
    case base(identifier: String)
    /// `{identifier}/info.json`.
    case info(identifier: String)
    /// `{identifier}/{region}/{size}/{rotation}/{quality}.{format}`.
    case image(IIIFImageRequest)

    /// The percent-decoded identifier of any route.
    public var identifier: String {
        switch self {
        case let .base(id), let .info(id): id
        case let .image(r): r.identifier
        }
    }

    /// Parses the still percent-encoded path after the prefix (`/iiif/3/`, `/iiif/2/`),
    /// e.g. `abc/full/max/0/default.jpg`, in `version`'s syntax. Segments are split on `/`
    /// before decoding, so an identifier may contain an encoded slash (`%2F`). A path of
    /// another shape is a 404 (it names no IIIF resource); a malformed parameter is a 400.
    public static func parse(path: Substring, version: IIIFVersion = .v3) throws(IIIFError) -> IIIFRoute {
        let raw = path.split(separator: "/", omittingEmptySubsequences: false)
        guard let first = raw.first, !first.isEmpty else { throw .notFound("no IIIF identifier in the path") }
        guard let identifier = percentDecode(first) else {
            throw .badRequest("the identifier is not validly percent-encoded")
        }
        switch raw.count {
        case 1:
            return .base(identifier: identifier)
        case 2 where raw[1] == "info.json":
            return .info(identifier: identifier)
        case 5:
            var parts: [String] = []
            for segment in raw[1...] {
                guard let decoded = percentDecode(segment) else {
                    throw .badRequest("'\(segment.prefix(40))' is not validly percent-encoded")
                }
                parts.append(decoded)
            }
            let qf = parts[3]
            guard let dot = qf.lastIndex(of: ".") else {
                throw .badRequest("'\(qf.prefix(40))' needs a quality and a format, as in default.jpg")
            }
            let region = try parseRegion(parts[0])
            let size = try parseSize(parts[1], version: version)
            let rotation = try parseRotation(parts[2])
            guard let quality = IIIFQuality(rawValue: String(qf[..<dot])) else {
                throw .badRequest("quality '\(qf[..<dot].prefix(40))' is not one of default, color, gray, bitonal")
            }
            guard let format = IIIFFormat(rawValue: String(qf[qf.index(after: dot)...])) else {
                throw .badRequest("format '\(qf[qf.index(after: dot)...].prefix(40))' is not supported; use jpg, png or webp")
            }
            return .image(
                IIIFImageRequest(
                    identifier: identifier, region: region, size: size,
                    rotation: rotation, quality: quality, format: format))
        default:
            throw .notFound("not a IIIF URL: expected {identifier}/info.json or {identifier}/{region}/{size}/{rotation}/{quality}.{format}")
        }
    }

    /// `full`, `square`, `x,y,w,h` or `pct:x,y,w,h`.
    public static func parseRegion(_ text: String) throws(IIIFError) -> IIIFRegion {
        switch text {
        case "full": return .full
        case "square": return .square
        default: break
        }
        if text.hasPrefix("pct:") {
            let numbers = text.dropFirst(4).split(separator: ",", omittingEmptySubsequences: false).map { parseIIIFDecimal($0) }
            guard numbers.count == 4, let x = numbers[0], let y = numbers[1], let w = numbers[2], let h = numbers[3] else {
                throw .badRequest("region '\(text.prefix(40))' is not pct:x,y,w,h with non-negative numbers")
            }
            guard w > 0, h > 0 else { throw .badRequest("region '\(text.prefix(40))' has a zero width or height") }
            return .percent(x: x, y: y, width: w, height: h)
        }
        let numbers = text.split(separator: ",", omittingEmptySubsequences: false).map { parseIIIFInteger($0) }
        guard numbers.count == 4, let x = numbers[0], let y = numbers[1], let w = numbers[2], let h = numbers[3] else {
            throw .badRequest("region '\(text.prefix(40))' is not full, square, x,y,w,h or pct:x,y,w,h")
        }
        guard w > 0, h > 0 else { throw .badRequest("region '\(text.prefix(40))' has a zero width or height") }
        return .pixels(x: x, y: y, width: w, height: h)
    }

    /// `max`, `w,`, `,h`, `pct:n`, `w,h`, `!w,h`: in 3.0 each optionally prefixed with `^`
    /// (upscaling); in 2.1 never (any explicit size may upscale), and `full` means `max`.
    public static func parseSize(_ text: String, version: IIIFVersion = .v3) throws(IIIFError) -> IIIFSize {
        var body = Substring(text)
        let caret = version == .v3 && body.hasPrefix("^")
        if caret { body = body.dropFirst() }
        let upscale = caret || version == .v2
        let bad = IIIFError.badRequest(
            version == .v3
                ? "size '\(text.prefix(40))' is not max, w,, ,h, pct:n, w,h or !w,h (optionally after ^)"
                : "size '\(text.prefix(40))' is not full, max, w,, ,h, pct:n, w,h or !w,h")
        if body == "max" || (version == .v2 && body == "full") { return IIIFSize(.max, upscale: caret) }
        if body.hasPrefix("pct:") {
            guard let n = parseIIIFDecimal(body.dropFirst(4)) else { throw bad }
            guard n > 0 else { throw .badRequest("size '\(text.prefix(40))' is zero") }
            return IIIFSize(.percent(n), upscale: upscale)
        }
        let confined = body.hasPrefix("!")
        if confined { body = body.dropFirst() }
        let parts = body.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 2 else { throw bad }
        let w = parts[0].isEmpty ? nil : parseIIIFInteger(parts[0])
        let h = parts[1].isEmpty ? nil : parseIIIFInteger(parts[1])
        if !parts[0].isEmpty && w == nil || !parts[1].isEmpty && h == nil { throw bad }
        if w == 0 || h == 0 { throw .badRequest("size '\(text.prefix(40))' is zero") }
        switch (w, h, confined) {
        case let (w?, h?, true): return IIIFSize(.confined(width: w, height: h), upscale: upscale)
        case let (w?, h?, false): return IIIFSize(.exact(width: w, height: h), upscale: upscale)
        case let (w?, nil, false): return IIIFSize(.width(w), upscale: upscale)
        case let (nil, h?, false): return IIIFSize(.height(h), upscale: upscale)
        default: throw bad
        }
    }

    /// `n` or `!n`, `n` a number of degrees in `0...360`.
    public static func parseRotation(_ text: String) throws(IIIFError) -> IIIFRotation {
        var body = Substring(text)
        let mirror = body.hasPrefix("!")
        if mirror { body = body.dropFirst() }
        guard let degrees = parseIIIFDecimal(body), degrees <= 360 else {
            throw .badRequest("rotation '\(text.prefix(40))' is not a number of degrees 0...360, optionally after !")
        }
        return IIIFRotation(mirror: mirror, degrees: degrees == 360 ? 0 : degrees)
    }
}

/// A IIIF request made concrete for one image: the full-resolution region, the output
/// size before rotation, and what to do to the pixels.
public struct IIIFImagePlan: Sendable, Hashable {
    /// The region in full-resolution image pixels, clipped to the image.
    public let region: PixelRect
    /// The output size before rotation.
    public let width: Int
    public let height: Int
    public let rotation: IIIFRotation
    public let quality: IIIFQuality
    public let format: IIIFFormat

    /// Resolves `request` against an image of `geometry`'s size: region clipped to the
    /// image (400 when it misses it), size computed by the specification's rules (400 when
    /// it would upscale without `^`, is zero, or exceeds `limits`).
    public init(_ request: IIIFImageRequest, geometry: PyramidGeometry, limits: IIIFLimits = .default) throws(IIIFError) {
        let W = geometry.width, H = geometry.height
        let region: PixelRect
        switch request.region {
        case .full:
            region = PixelRect(x: 0, y: 0, width: W, height: H)
        case .square:
            let s = min(W, H)
            region = PixelRect(x: (W - s) / 2, y: (H - s) / 2, width: s, height: s)
        case let .pixels(x, y, w, h):
            guard x < W, y < H else {
                throw .badRequest("region \(x),\(y),\(w),\(h) lies outside the \(W)×\(H) image")
            }
            region = PixelRect(x: x, y: y, width: min(w, W - x), height: min(h, H - y))
        case let .percent(px, py, pw, ph):
            let x0 = clampedInt((px * Double(W) / 100).rounded()), y0 = clampedInt((py * Double(H) / 100).rounded())
            guard px < 100, py < 100, x0 < W, y0 < H else {
                throw .badRequest("region pct:\(px),\(py),\(pw),\(ph) lies outside the image")
            }
            let x1 = min(W, Int(min((px + pw) * Double(W) / 100, Double(W)).rounded()))
            let y1 = min(H, Int(min((py + ph) * Double(H) / 100, Double(H)).rounded()))
            region = PixelRect(x: x0, y: y0, width: max(1, x1 - x0), height: max(1, y1 - y0))
        }

        let rw = Double(region.width), rh = Double(region.height)
        var w: Int, h: Int
        switch request.size.form {
        case .max:
            // The largest scale the limits allow; without ^ never above 1 (the region's
            // own size), with ^ exactly that (grown to the limits).
            let fit = min(
                Double(limits.maxWidth) / rw, Double(limits.maxHeight) / rh,
                (Double(limits.maxArea) / (rw * rh)).squareRoot())
            let s = request.size.upscale ? fit : min(1, fit)
            w = s == 1 ? region.width : max(1, clampedInt((rw * s).rounded(.down)))
            h = s == 1 ? region.height : max(1, clampedInt((rh * s).rounded(.down)))
        case let .width(ow):
            w = ow
            h = Self.proportional(region.height, ow, region.width)
        case let .height(oh):
            h = oh
            w = Self.proportional(region.width, oh, region.height)
        case let .percent(n):
            w = clampedInt((rw * n / 100).rounded())
            h = clampedInt((rh * n / 100).rounded())
        case let .exact(ow, oh):
            w = ow
            h = oh
        case let .confined(bw, bh):
            if Double(bw) / rw <= Double(bh) / rh {
                w = bw
                h = min(bh, Self.proportional(region.height, bw, region.width))
            } else {
                h = bh
                w = min(bw, Self.proportional(region.width, bh, region.height))
            }
        }
        guard w >= 1, h >= 1 else {
            throw .badRequest("the requested size of the \(region.width)×\(region.height) region is less than one pixel")
        }
        if !request.size.upscale, w > region.width || h > region.height {
            throw .badRequest(
                "size \(w)×\(h) is larger than the \(region.width)×\(region.height) region; prefix the size with ^ to upscale")
        }
        // Sizes come from the request: every product is overflow-checked.
        guard w <= limits.maxWidth, h <= limits.maxHeight,
            case let (area, false) = w.multipliedReportingOverflow(by: h), area <= limits.maxArea
        else {
            throw .badRequest(
                "size \(w)×\(h) exceeds this server's limits (maxWidth \(limits.maxWidth), maxHeight \(limits.maxHeight), maxArea \(limits.maxArea))"
            )
        }
        self.region = region
        self.width = w
        self.height = h
        self.rotation = request.rotation
        self.quality = request.quality
        self.format = request.format
    }

    /// `length × numerator / denominator`, rounded: a side of a size given by the other side.
    static func proportional(_ length: Int, _ numerator: Int, _ denominator: Int) -> Int {
        clampedInt((Double(length) * Double(numerator) / Double(denominator)).rounded())
    }

    /// The canonical form of the request in `version`'s syntax, for the `rel="canonical"`
    /// link and as the cache key of drawn images: region `full` or `x,y,w,h`; size `max`,
    /// `w,h` or `^w,h` in 3.0, and `full`, `w,` (when that gives the same height) or `w,h`
    /// in 2.1.
    public func canonicalParameters(in g: PyramidGeometry, version: IIIFVersion = .v3) -> String {
        let r = region
        let full = r.x == 0 && r.y == 0 && r.width == g.width && r.height == g.height
        let regionText = full ? "full" : "\(r.x),\(r.y),\(r.width),\(r.height)"
        let size: String
        if width == r.width && height == r.height {
            size = version == .v3 ? "max" : "full"
        } else if version == .v2 {
            size = Self.proportional(r.height, width, r.width) == height ? "\(width)," : "\(width),\(height)"
        } else {
            size = (width > r.width || height > r.height ? "^" : "") + "\(width),\(height)"
        }
        let degrees = rotation.degrees
        let number = degrees == degrees.rounded() ? String(Int(degrees)) : String(degrees)
        let rotationText = (rotation.mirror ? "!" : "") + number
        return "\(regionText)/\(size)/\(rotationText)/\(quality.rawValue).\(format.rawValue)"
    }

    /// The coarsest pyramid level whose resolution is at least what the output needs on
    /// both axes: never coarser than needed, so nothing is upsampled that a finer level
    /// could have supplied.
    public func sourceLevel(in geometry: PyramidGeometry) -> Int {
        let needed = max(Double(width) / Double(region.width), Double(height) / Double(region.height))
        return geometry.level(forScale: needed)
    }

    /// The pixels of `level` that cover the region: its edges rounded outwards, clipped
    /// to the level.
    public func rectInLevel(_ level: Int, of geometry: PyramidGeometry) -> PixelRect {
        let l = geometry.level(level)
        let f = l.downscale
        let x0 = region.x / f, y0 = region.y / f
        let x1 = min(ceilDiv(region.maxX, f), l.width), y1 = min(ceilDiv(region.maxY, f), l.height)
        return PixelRect(x: x0, y: y0, width: max(1, x1 - x0), height: max(1, y1 - y0))
    }

    /// The stored tile that answers this request byte for byte, if any: the region is
    /// exactly one tile's full-resolution rectangle, the output size is that tile's size
    /// in its level, nothing is rotated, quality is `default` and the format is the
    /// pyramid's own.
    public func exactTile(in geometry: PyramidGeometry, format tileFormat: TileFormat) -> TileCoordinate? {
        guard rotation.isIdentity, quality == .default, format == IIIFFormat(tileFormat) else { return nil }
        for z in geometry.levelNumbers {
            let span = geometry.tileSize * geometry.downscale(of: z)
            guard region.x % span == 0, region.y % span == 0 else { continue }
            let tile = TileCoordinate(level: z, row: region.y / span, column: region.x / span)
            guard geometry.contains(tile), geometry.rectInImage(tile) == region else { continue }
            let inLevel = geometry.rectInLevel(tile)
            if inLevel.width == width && inLevel.height == height { return tile }
        }
        return nil
    }
}

/// The Image Information document (`info.json`), in the shape of either version: 3.0's
/// (`id`, `type`, `profile: "level2"`, `extraFeatures`, the limits at the top) or 2.1's
/// (`@id`, `profile: [level2.json, {formats, qualities, supports, limits}]`).
public struct IIIFImageInfo: Sendable, Hashable, Encodable {
    public struct Size: Sendable, Hashable, Codable {
        public let width: Int
        public let height: Int
    }

    public struct Tiles: Sendable, Hashable, Codable {
        public let width: Int
        public let height: Int
        public let scaleFactors: [Int]
    }

    public let version: IIIFVersion
    /// The image's base URI, `{scheme}://{server}{/prefix}/{identifier}`.
    public let id: String
    public let width: Int
    public let height: Int
    public let limits: IIIFLimits
    public let sizes: [Size]
    public let tiles: [Tiles]
    /// The pyramid's own format, which exact tiles are served in without drawing.
    public let preferredFormat: IIIFFormat

    /// The features this implementation offers beyond compliance level 2 in `version`'s
    /// names (2.1 calls upscaling `sizeAboveFull` and has `regionSquare` above level 2).
    public static func extraFeatureNames(_ version: IIIFVersion) -> [String] {
        let shared = [
            "baseUriRedirect", "canonicalLinkHeader", "cors", "jsonldMediaType", "mirroring", "profileLinkHeader",
            "rotationArbitrary",
        ]
        switch version {
        case .v2: return (shared + ["regionSquare", "sizeAboveFull"]).sorted()
        case .v3: return shared + ["sizeUpscaling"]
        }
    }

    /// - Parameter id: the image's base URI, `{scheme}://{server}{/prefix}/{identifier}`,
    ///   exactly the URL of info.json without `/info.json`.
    public init(
        id: String, geometry: PyramidGeometry, format: TileFormat, limits: IIIFLimits = .default, version: IIIFVersion = .v3
    ) {
        self.version = version
        self.id = id
        self.width = geometry.width
        self.height = geometry.height
        self.limits = limits
        // Every stored level is a size served straight from its tiles' resolution.
        self.sizes = geometry.levels
            .filter { $0.width <= limits.maxWidth && $0.height <= limits.maxHeight && $0.width * $0.height <= limits.maxArea }
            .map { Size(width: $0.width, height: $0.height) }
        self.tiles = [
            Tiles(
                width: geometry.tileSize, height: geometry.tileSize,
                scaleFactors: geometry.levelNumbers.map { 1 << $0 })
        ]
        self.preferredFormat = IIIFFormat(format)
    }

    private enum Key: String, CodingKey {
        case context = "@context", atID = "@id"
        case id, type, `protocol`, profile, width, height, maxWidth, maxHeight, maxArea
        case sizes, tiles, preferredFormats, extraFormats, extraQualities, extraFeatures
        case formats, qualities, supports
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(version.context, forKey: .context)
        try c.encode(IIIF.protocolURI, forKey: .protocol)
        try c.encode(width, forKey: .width)
        try c.encode(height, forKey: .height)
        try c.encode(sizes, forKey: .sizes)
        try c.encode(tiles, forKey: .tiles)
        let extraQualities = IIIFQuality.allCases.filter { $0 != .default }.map(\.rawValue)
        switch version {
        case .v3:
            try c.encode(id, forKey: .id)
            try c.encode("ImageService3", forKey: .type)
            try c.encode(IIIF.complianceLevel, forKey: .profile)
            try encodeLimits(into: &c)
            try c.encode([preferredFormat.rawValue], forKey: .preferredFormats)
            try c.encode([IIIFFormat.webp.rawValue], forKey: .extraFormats)
            try c.encode(extraQualities, forKey: .extraQualities)
            try c.encode(Self.extraFeatureNames(.v3), forKey: .extraFeatures)
        case .v2:
            // The profile: the compliance level's URI, then what this server offers beyond it.
            try c.encode(id, forKey: .atID)
            var profile = c.nestedUnkeyedContainer(forKey: .profile)
            try profile.encode(version.profileURI)
            var offered = profile.nestedContainer(keyedBy: Key.self)
            try offered.encode([IIIFFormat.webp.rawValue], forKey: .formats)
            try offered.encode(extraQualities, forKey: .qualities)
            try offered.encode(Self.extraFeatureNames(.v2), forKey: .supports)
            try encodeLimits(into: &offered)
        }
    }

    private func encodeLimits(into c: inout KeyedEncodingContainer<Key>) throws {
        try c.encode(limits.maxWidth, forKey: .maxWidth)
        try c.encode(limits.maxHeight, forKey: .maxHeight)
        try c.encode(limits.maxArea, forKey: .maxArea)
    }
}

/// Decodes `%XX` escapes as UTF-8. Nil for a truncated or non-hex escape or invalid UTF-8.
public func percentDecode<S: StringProtocol>(_ text: S) -> String? {
    percentDecodedBytes(text.utf8).flatMap { String(validating: $0, as: UTF8.self) }
}

/// A IIIF integer: decimal digits only, at most 9 of them.
/// `value` as an `Int`, clamped to `0...2^53` (NaN is 0): request arithmetic in doubles
/// can exceed `Int`, and a size that large is refused by the limits, never trapped on.
func clampedInt(_ value: Double) -> Int {
    guard value > 0 else { return 0 }
    return value >= 9_007_199_254_740_992 ? 9_007_199_254_740_992 : Int(value)
}

func parseIIIFInteger<S: StringProtocol>(_ text: S) -> Int? {
    strictNonNegative(String(text))
}

/// A IIIF decimal: digits with an optional fraction (`12`, `12.5`, `.5`), no sign or exponent.
func parseIIIFDecimal<S: StringProtocol>(_ text: S) -> Double? {
    guard !text.isEmpty, text.utf8.count <= 24 else { return nil }
    var dots = 0, digits = 0
    for c in text.utf8 {
        if c == UInt8(ascii: ".") { dots += 1 } else if c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") { digits += 1 } else { return nil }
    }
    guard dots <= 1, digits > 0, let v = Double(String(text)), v.isFinite else { return nil }
    return v
}
