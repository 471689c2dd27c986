import Foundation
import TilerHTTP

/// The web viewer: `/` (the page), `/viewer/viewer.css` and `/viewer/viewer.js` (and the
/// embeddable widgets' `/viewer/embed.js` and `/viewer/embed.css`, `EmbedRoutes`), from the
/// files in `Viewer/` compiled into the binary (`PackageResources`, SwiftPM's
/// `.embedInCode`). They revalidate on every load (`no-cache` with an ETag) so a new
/// binary's viewer is picked up at once.
///
/// The page asks for everything by relative URL, so it works under any path prefix;
/// with `--base-url` the page also carries `<base href="BASE/">`, so that it resolves
/// them against the public address whatever URL it was reached by.
func viewerRoutes(address: PublicAddress, maxZoomPercent: Int) -> [Route] {
    let page = asset(viewerPage(base: address.base, maxZoomPercent: maxZoomPercent), "text/html; charset=utf-8")
    let css = asset(PackageResources.viewer_css, "text/css; charset=utf-8")
    let js = asset(PackageResources.viewer_js, "text/javascript; charset=utf-8")
    let embedJS = asset(PackageResources.embed_js, "text/javascript; charset=utf-8")
    let embedCSS = asset(PackageResources.embed_css, "text/css; charset=utf-8")
    return [
        Route("viewer", firstSegments: ["", "index.html", "viewer"]) { request in
            switch request.segments {
            case [], ["index.html"]: page
            case ["viewer", "viewer.css"]: css
            case ["viewer", "viewer.js"]: js
            case ["viewer", "embed.js"]: embedJS
            case ["viewer", "embed.css"]: embedCSS
            default: nil
            }
        }
    ]
}

/// `index.html` with its `<!--tiler:base-->` marker replaced by a `<base>` element for
/// `base`, or removed, and its `<!--tiler:settings-->` by what the viewer reads of the
/// server's settings (`--viewer-max-zoom`).
func viewerPage(base: BaseURL?, maxZoomPercent: Int) -> [UInt8] {
    let html = String(decoding: PackageResources.index_html, as: UTF8.self)
    let element = base.map { #"<base href="\#(htmlEscaped($0.description + "/"))">"# } ?? ""
    let settings = #"<meta name="tiler-max-zoom" content="\#(maxZoomPercent)">"#
    return Array(
        html.replacingOccurrences(of: "<!--tiler:base-->", with: element)
            .replacingOccurrences(of: "<!--tiler:settings-->", with: settings).utf8)
}

func htmlEscaped(_ s: String) -> String {
    var out = ""
    for c in s {
        switch c {
        case "&": out += "&amp;"
        case "\"": out += "&quot;"
        case "'": out += "&#39;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        default: out.append(c)
        }
    }
    return out
}

private func asset(_ body: [UInt8], _ contentType: String) -> HTTPResponse {
    .prepared(
        PreparedResponse(
            body: body, contentType: contentType, etag: "\"v-\(String(fnv1a(body), radix: 16))\"",
            lastModified: nil, cacheControl: "no-cache"))
}
