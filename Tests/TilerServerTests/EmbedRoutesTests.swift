import Foundation
import Testing
import TilerCore
import TilerHTTP
import TilerImaging
import TilerTestSupport
@testable import TilerServer

/// Photos of one colour each, for the embed tests: `count` pyramids of 64 × 48 pixels
/// (one level, whose one tile is also the thumbnail, real PNGs) named `PREFIX-000`, … in
/// album `album` (none for nil), photo i of colour `colour(i)`.
enum ColourPhotos {
    /// A colour per photo, far enough apart to tell every neighbour from the next.
    static func colour(_ i: Int) -> [Double] {
        [Double(i * 67 % 256), Double(i * 151 % 256 / 2 + 60), Double(255 - i * 29 % 200)]
    }

    static func id(_ prefix: String, _ i: Int) -> String { prefix + "-" + String(1000 + i).dropFirst() }

    static func add(to root: PyramidRoot, prefix: String, count: Int, album: String?, colour: (Int) -> [Double] = colour) throws {
        let geometry = try PyramidGeometry(width: 64, height: 48, tileSize: 256)
        for i in 0..<count {
            let c = colour(i).map { UInt8($0) }
            let png = try PNGEncoder().encode([UInt8]((0..<(64 * 48)).flatMap { _ in c }), width: 64, height: 48, bands: 3)
            let dir = URL(fileURLWithPath: root.path).appendingPathComponent(id(prefix, i))
            try FileManager.default.createDirectory(at: dir.appendingPathComponent("0/0"), withIntermediateDirectories: true)
            try Data(png).write(to: dir.appendingPathComponent("0/0/0.png"))
            try Data(png).write(to: dir.appendingPathComponent("thumbnail.png"))
            var manifest = PyramidManifest(
                id: PyramidID(id(prefix, i))!, geometry: geometry, format: .png,
                thumbnail: .init(file: "thumbnail.png", width: 64, height: 48))
            manifest.metadata = album.map { PhotoMetadata(album: $0) }
            try root.write(manifest)
        }
    }
}

/// `/embed/strip` and `/embed/coverflow` over HTTP: framing allowed by their
/// `Content-Security-Policy: frame-ancestors` (`--frame-ancestors`) and no `X-Frame-Options`,
/// the page's `<base>` for `--base-url` and path prefixes, the widget's album and target,
/// and clear 4xx answers for what cannot be shown. The widgets themselves are
/// `EmbedBrowserTests`'.
@Suite struct EmbedRoutesTests {
    static func root() throws -> PyramidRoot {
        let root = try PyramidRoot()
        try ColourPhotos.add(to: root, prefix: "feed", count: 3, album: "Feed & more")
        try ColourPhotos.add(to: root, prefix: "loose", count: 2, album: nil)
        return root
    }

    @Test func bothPagesMayBeFramedAnywhereByDefault() throws {
        let root = try Self.root()
        try withTileServer(root) { port in
            for mode in ["strip", "coverflow"] {
                for path in [
                    "/embed/\(mode)", "/embed/\(mode)?album=Feed%20%26%20more", "/embed/\(mode)?album=Feed%20%26%20more&target=_blank",
                ] {
                    for method in ["GET", "HEAD"] {
                        let r = try request(port, method, path)
                        #expect(r.status == 200, "\(method) \(path): \(r.text)")
                        #expect(r.header("Content-Security-Policy") == "frame-ancestors *", "\(path)")
                        #expect(r.header("X-Frame-Options") == nil, "\(path)")
                        #expect(r.header("Content-Type") == "text/html; charset=utf-8")
                    }
                }
                let page = try request(port, "GET", "/embed/\(mode)?album=Feed%20%26%20more&target=_blank").text
                // The widget's element, its album escaped; the script and the prefix-keeping base.
                #expect(page.contains(#"data-tiler-mode="\#(mode)""#), "\(page)")
                #expect(page.contains(#"data-tiler-album="Feed &amp; more""#), "\(page)")
                #expect(page.contains(#"data-tiler-target="_blank""#), "\(page)")
                #expect(page.contains(#"<base href="../">"#) && page.contains(#"<script src="viewer/embed.js""#), "\(page)")
                let all = try request(port, "GET", "/embed/\(mode)").text
                #expect(all.contains(#"data-tiler-album="""#) && all.contains(#"data-tiler-target="_top""#), "\(all)")
            }
            // The widgets' script and styles.
            let js = try request(port, "GET", "/viewer/embed.js")
            #expect(
                js.status == 200 && js.header("Content-Type") == "text/javascript; charset=utf-8" && js.text.contains("data-tiler-album"))
            let css = try request(port, "GET", "/viewer/embed.css")
            #expect(css.status == 200 && css.header("Content-Type") == "text/css; charset=utf-8" && css.text.contains(".tiler-widget"))
        }
    }

    @Test func frameAncestorsIsTheSetting() throws {
        let root = try Self.root()
        try withTileServer(root, { $0.frameAncestors = "'self' https://blog.example.org" }) { port in
            let r = try request(port, "GET", "/embed/strip")
            #expect(r.header("Content-Security-Policy") == "frame-ancestors 'self' https://blog.example.org")
            #expect(r.header("X-Frame-Options") == nil)
            // Only the embed pages carry it: the viewer's page is left as it was.
            #expect(try request(port, "GET", "/").header("Content-Security-Policy") == nil)
        }
        var c = ServerConfiguration(root: root.path)
        c.frameAncestors = "* ; script-src *"
        #expect(throws: HTTPConfiguration.InvalidSetting.self) { try c.validate() }
    }

    @Test func underABaseURLThePageResolvesAgainstIt() throws {
        let root = try Self.root()
        try withTileServer(root, { $0.baseURL = try? BaseURL(parsing: "https://example.org/tiles") }) { port in
            let page = try request(port, "GET", "/embed/coverflow").text
            #expect(page.contains(#"<base href="https://example.org/tiles/">"#), "\(page)")
        }
    }

    @Test func whatCannotBeShownIsA4xxThatSaysWhy() throws {
        let root = try Self.root()
        try withTileServer(root) { port in
            let cases: [(String, Int, String)] = [
                ("/embed/strip?album=Nowhere", 404, "no album named 'Nowhere'"),
                ("/embed/coverflow?album=", 400, "parameter 'album' must be an album's name"),
                ("/embed/strip?album=\(String(repeating: "a", count: PhotoMetadata.maximumFieldBytes + 1))", 400, "parameter 'album'"),
                ("/embed/strip?target=_self", 400, "parameter 'target' must be '_top' (the default) or '_blank', not '_self'"),
                ("/embed/strip?album=%zz", 400, "malformed percent-encoding in the query"),
                ("/embed/carousel", 404, "no embed named 'carousel'; there are strip and coverflow"),
                ("/embed", 404, "no such path"),
                ("/embed/strip/more", 404, "no such path"),
            ]
            for (path, status, message) in cases {
                let r = try request(port, "GET", path)
                #expect(r.status == status, "\(path): \(r.status) \(r.text)")
                let said = (r.json["error"] as? [String: Any])?["message"] as? String ?? ""
                #expect(said.hasPrefix(message), "\(path): \(said)")
            }
            #expect(try request(port, "POST", "/embed/strip").status == 405)
        }
    }

    /// Under `--access`, an album is there only for a caller who may see one of its photos:
    /// the page answers 404 otherwise, and its answers vary with the credentials.
    @Test(.timeLimit(.minutes(10))) func aPrivateAlbumIsThereOnlyWithAToken() throws {
        let setup = try AccessTests.Setup()
        defer { setup.scratch.cleanUp() }
        let root = try PyramidRoot()
        try ColourPhotos.add(to: root, prefix: "secret", count: 2, album: "Hidden")
        try ColourPhotos.add(to: root, prefix: "public", count: 2, album: "Open")
        let token = try setup.keys.tokens([TokenSpec(alg: "HS256", kid: "site", claims: AccessTests.Setup.claims(["secret-*"]))])[0]
        try withTileServer(root, access: try setup.access()) { port in
            #expect(try request(port, "GET", "/embed/strip?album=Hidden").status == 404)
            let granted = try request(port, "GET", "/embed/strip?album=Hidden&token=\(token)")
            #expect(granted.status == 200)
            #expect(granted.header("Cache-Control") == "private, no-cache" && granted.header("Vary") == "Authorization, Cookie")
            // The page never holds the token: the widget reads it from the page's address.
            #expect(!granted.text.contains(token))
            #expect(try request(port, "GET", "/embed/coverflow?album=Hidden", headers: ["Authorization: Bearer \(token)"]).status == 200)
            #expect(try request(port, "GET", "/embed/coverflow?album=Open").status == 200)
        }
    }

    @Test func theAlbumIsEscapedInThePage() {
        let page = String(
            decoding: embedPage(mode: .strip, options: try! EmbedOptions([("album", #"a"><script>x</script>"#)]), base: nil),
            as: UTF8.self)
        #expect(!page.contains("<script>x") && page.contains(#"data-tiler-album="a&quot;&gt;&lt;script&gt;x&lt;/script&gt;""#))
        #expect(page.contains("<title>Photo strip: a&quot;&gt;&lt;script&gt;x&lt;/script&gt;</title>"), "\(page)")
    }
}
