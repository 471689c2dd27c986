import TilerCore
import TilerHTTP

/// An album on another site: `/embed/strip[?album=NAME]` (a strip of photos that scrolls
/// sideways) and `/embed/coverflow[?album=NAME]` (an endless cover flow with a page
/// control), small pages meant for an `<iframe>`. Both are `Viewer/embed.html` holding one
/// widget that `Viewer/embed.js` (also served, at `/viewer/embed.js`, for host pages that
/// mount the widgets themselves) fills from `/images`.
///
/// Framing: no `X-Frame-Options`; `Content-Security-Policy: frame-ancestors` is
/// `--frame-ancestors` (`*` by default). Without `album`, the widget shows every image the
/// caller may see; an album of which the caller may see nothing (none by that name, or
/// none the request's token opens) is 404, a malformed parameter 400. The page carries
/// no token: the widget reads `?token=` from the page's own address, as the viewer does.
func embedRoutes(store: TileStore, address: PublicAddress) -> [Route] {
    let frameAncestors = [("Content-Security-Policy", "frame-ancestors " + store.configuration.frameAncestors)]
    let base = address.base
    return [
        Route("embed", firstSegments: ["embed"]) { request throws(HTTPError) in
            guard request.segments.count == 2, request.segments[0] == "embed" else { return nil }
            guard let mode = EmbedMode(rawValue: request.segments[1]) else {
                throw HTTPError(404, "no embed named '\(request.segments[1].prefix(40))'; there are strip and coverflow")
            }
            let options = try EmbedOptions(request.queryItems())
            if let album = options.album { try requireAlbum(album, request, store) }
            let page = embedPage(mode: mode, options: options, base: base)
            let cacheControl = store.access == nil ? "no-cache" : TileStore.privateCacheControl
            var headers = frameAncestors
            if store.access != nil { headers.append(("Vary", TileStore.privateVary)) }
            return .withHeaders(
                headers, .bytes(status: 200, contentType: "text/html; charset=utf-8", body: page, cacheControl: cacheControl))
        }
    ]
}

/// The two widgets, named as in their paths and in `data-tiler-mode`.
enum EmbedMode: String {
    case strip, coverflow

    /// What the page is called, for its title and its widget's label.
    var noun: String { self == .strip ? "Photo strip" : "Cover flow" }
}

/// An embed page's query: `album=NAME` (checked as `/images` checks it) and
/// `target=_top|_blank` (where a chosen photo opens); `token` is the widget's to read, and
/// other names are ignored, as `/images` ignores them.
struct EmbedOptions {
    var album: String?
    var target = "_top"

    init(_ items: [(name: String, value: String)]) throws(HTTPError) {
        for (name, value) in items {
            switch name {
            case "album":
                guard !value.isEmpty, value.utf8.count <= PhotoMetadata.maximumFieldBytes else {
                    throw HTTPError(400, "parameter 'album' must be an album's name (1...\(PhotoMetadata.maximumFieldBytes) bytes)")
                }
                album = value
            case "target":
                guard value == "_top" || value == "_blank" else {
                    throw HTTPError(400, "parameter 'target' must be '_top' (the default) or '_blank', not '\(value.prefix(40))'")
                }
                target = value
            default: continue
            }
        }
    }
}

/// Throws 404 unless the album `name` holds an image the request may see.
private func requireAlbum(_ name: String, _ request: Request, _ store: TileStore) throws(HTTPError) {
    try store.awaitCatalog(for: request)
    let images = store.listings.album(named: name)?.images ?? []
    let visible = store.access?.visibility(for: request.head)
    guard images.contains(where: { visible?($0.id.rawValue) ?? true }) else {
        throw HTTPError(404, "no album named '\(name.prefix(80))' (GET /albums lists them)")
    }
}

/// `embed.html` for one widget: its `<!--tiler:base-->` marker replaced by a `<base>`
/// element (`--base-url`, else the folder above `/embed/`, which keeps a proxy's prefix),
/// and `<!--tiler:widget-->` by the widget's element.
func embedPage(mode: EmbedMode, options: EmbedOptions, base: BaseURL?) -> [UInt8] {
    let html = String(decoding: PackageResources.embed_html, as: UTF8.self)
    let href = base.map { $0.description + "/" } ?? "../"
    let title = options.album.map { "\(mode.noun): \($0)" } ?? mode.noun
    let widget = """
        <div class="tiler-embed" data-tiler-mode="\(mode.rawValue)" data-tiler-album="\(htmlEscaped(options.album ?? ""))" \
        data-tiler-target="\(options.target)" data-tiler-label="\(htmlEscaped(title))"></div>
        """
    return Array(
        html.replacingOccurrences(of: "<!--tiler:base-->", with: #"<base href="\#(htmlEscaped(href))">"#)
            .replacingOccurrences(of: "<!--tiler:title-->", with: htmlEscaped(title))
            .replacingOccurrences(of: "<!--tiler:widget-->", with: widget).utf8)
}
