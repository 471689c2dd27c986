import TilerHTTP

/// The web viewer: `/` (the page), `/viewer/viewer.css` and `/viewer/viewer.js`, all
/// compiled in (`ViewerAssets`). They revalidate on every load (`no-cache` with an ETag)
/// so a new binary's viewer is picked up at once.
func viewerRoutes() -> [Route] {
    let page = asset(ViewerAssets.indexHTML, "text/html; charset=utf-8")
    let css = asset(ViewerAssets.css, "text/css; charset=utf-8")
    let js = asset(ViewerAssets.javaScript, "text/javascript; charset=utf-8")
    return [Route("viewer") { request in
        switch request.segments {
        case [], ["index.html"]: page
        case ["viewer", "viewer.css"]: css
        case ["viewer", "viewer.js"]: js
        default: nil
        }
    }]
}

private func asset(_ text: String, _ contentType: String) -> HTTPResponse {
    let body = Array(text.utf8)
    // FNV-1a of the bytes: the ETag changes exactly when the asset does.
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for b in body { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 }
    return .prepared(PreparedResponse(body: body, contentType: contentType, etag: "\"v-\(String(hash, radix: 16))\"",
                                      lastModified: nil, cacheControl: "no-cache"))
}
