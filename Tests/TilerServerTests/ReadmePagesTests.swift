import Foundation
import Testing
import TilerCore
import TilerImaging
import TilerTestSupport
@testable import TilerServer

/// The README's complete OpenSeadragon and Leaflet pages (issue 31, item 12), taken from
/// README.md between `<!-- tested: NAME -->` and `<!-- /tested -->` and loaded in
/// Chromium as they are, from an origin other than tiler's, against a running server:
/// only the server's address and the libraries' CDN folder are replaced (by tiler's
/// loopback port and the copies the tests use: OpenSeadragon 6.1.1 from openslide-python,
/// Debian's Leaflet). Every tile loads, and the page logs no error, which OpenSeadragon's
/// WebGL drawer does for cross-origin tiles without `crossOriginPolicy: "Anonymous"`.
@Suite(.serialized) struct ReadmePagesTests {
    /// The address the README's pages name, and their libraries' CDN folders.
    static let readmeServer = "http://127.0.0.1:8080"
    static let openSeadragonCDN = "https://cdn.jsdelivr.net/npm/openseadragon@6.1.1/build/openseadragon/"
    static let leafletCDN = "https://unpkg.com/leaflet@1.9.4/dist/"

    /// The README's block `name`: the fenced `language` code between its markers.
    static func readmePage(_ name: String, language: String = "html") throws -> String {
        let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let start = "<!-- tested: \(name) -->\n```\(language)\n", end = "```\n<!-- /tested -->"
        guard let from = readme.range(of: start), let to = readme.range(of: end, range: from.upperBound..<readme.endIndex)
        else { throw ClientError("README.md has no page between '\(start)' and '\(end)'") }
        return String(readme[from.upperBound..<to.lowerBound])
    }

    /// `page` with every `replacements` key (each required to be there) replaced, and a
    /// first script in `<head>` that collects errors, rejections, `console.error` and
    /// `console.warn` in `window.pageErrors`.
    static func instrumented(_ page: String, _ replacements: [String: String]) throws -> String {
        var page = page
        for (from, to) in replacements {
            try #require(page.contains(from), "the README's page no longer contains \(from)")
            page = page.replacingOccurrences(of: from, with: to)
        }
        let probe = """
            <head>
            <link rel="icon" href="data:,">
            <script>
            window.pageErrors = [];
            addEventListener('error', (e) => pageErrors.push(String(e.message)));
            addEventListener('unhandledrejection', (e) => pageErrors.push('unhandled rejection: ' + String(e.reason)));
            for (const level of ['error', 'warn']) {
              const original = console[level];
              console[level] = (...args) => { pageErrors.push(level + ': ' + args.map(String).join(' ')); original.apply(console, args); };
            }
            </script>
            """
        try #require(page.contains("<head>\n"))
        return page.replacingOccurrences(of: "<head>\n", with: probe + "\n")
    }

    @Test(.timeLimit(.minutes(10))) func theReadmesOpenSeadragonAndLeafletPagesLoadEveryTile() throws {
        let leaflet = "/usr/share/javascript/leaflet"
        guard let osd = ViewerProxyTests.openSeadragon else {
            Issue.record("OpenSeadragon is missing: run scripts/install-deps test (it extracts it from PyPI's openslide-python)")
            return
        }
        guard FileManager.default.fileExists(atPath: "\(leaflet)/leaflet.js") else {
            Issue.record("Leaflet is missing: run scripts/install-deps test (apt: libjs-leaflet)")
            return
        }
        // `photo`, as the README's quick start names it, cut with --pad for Leaflet.
        let folder = try temporaryFolder("readme-pages")
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = folder.appendingPathComponent("photo.png").path
        try writeCoordinateImage(source, width: 1537, height: 997)
        let root = folder.appendingPathComponent("tiles")
        _ = try PyramidCutter(root: root, options: CutOptions(format: .jpeg, pad: true)).cut(source, id: PyramidID("photo")!)

        var configuration = ServerConfiguration(root: root.path)
        configuration.http.port = 0
        configuration.http.threads = 2
        let server = TileServer(configuration: configuration)
        try server.start()
        defer {
            server.stop()
            server.wait()
        }
        let address = "http://127.0.0.1:\(server.port)"
        let osdPage = try Self.instrumented(
            try Self.readmePage("openseadragon-page"), [Self.readmeServer: address, Self.openSeadragonCDN: "/osd/"])
        // The same page over the IIIF Image API, as its comment offers, in 3.0 and 2.1.
        let dzi = "\(address)/images/photo.dzi"
        try #require(osdPage.contains(dzi))
        let osdPages = [("osd.html", "/images/photo_files/")] + [3, 2].map { ("osd-iiif\($0).html", "/iiif/\($0)/photo/") }
        let leafletPage = try Self.instrumented(
            try Self.readmePage("leaflet-page"), [Self.readmeServer: address, Self.leafletCDN: "/leaflet/"])
        func file(_ path: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path))) }
        // Another origin than tiler's, as a page of one's own would be.
        let site = try StaticSite([
            "/osd.html": (Array(osdPage.utf8), "text/html; charset=utf-8"),
            "/osd-iiif3.html": (
                Array(osdPage.replacingOccurrences(of: dzi, with: "\(address)/iiif/3/photo/info.json").utf8), "text/html; charset=utf-8"
            ),
            "/osd-iiif2.html": (
                Array(osdPage.replacingOccurrences(of: dzi, with: "\(address)/iiif/2/photo/info.json").utf8), "text/html; charset=utf-8"
            ),
            "/leaflet.html": (Array(leafletPage.utf8), "text/html; charset=utf-8"),
            "/osd/openseadragon.min.js": (try file(osd), "text/javascript"),
            "/leaflet/leaflet.js": (try file("\(leaflet)/leaflet.js"), "text/javascript"),
            "/leaflet/leaflet.css": (try file("\(leaflet)/leaflet.css"), "text/css"),
        ])
        defer { site.stop() }
        guard let driver = try startBrowser() else { return }
        defer { driver.quit() }

        // ---- OpenSeadragon: the whole image, then full resolution, from DeepZoom and from
        // IIIF 3.0 and 2.1 (their tiles fetched from where each says).
        for (page, tilePath) in osdPages {
            try driver.navigate("http://127.0.0.1:\(site.port)/\(page)")
            let osdLoaded =
                "typeof viewer !== 'undefined' && viewer.world.getItemCount() === 1 && viewer.world.getItemAt(0).getFullyLoaded()"
            try driver.wait(for: "OpenSeadragon's first tiles (\(page))", timeout: 120, "return " + osdLoaded)
            _ = try driver.execute(
                "viewer.viewport.zoomTo(viewer.viewport.imageToViewportZoom(1), null, true); window.zoomedAt = Date.now(); return 1")
            try driver.wait(
                for: "OpenSeadragon at full resolution (\(page))", timeout: 120, "return Date.now() - zoomedAt > 300 && \(osdLoaded)")
            let drawer = try driver.execute("return viewer.drawer.getType()") as? String
            // Chromium here gives OpenSeadragon its WebGL drawer, which without the option logs
            // "Error creating texture in WebGL" (a console warning) for each tile.
            try driver.expectNoScriptErrors()
            #expect(drawer == "webgl" || drawer == "canvas", "OpenSeadragon's drawer: \(drawer ?? "none")")
            let fetched = try driver.execute("return performance.getEntriesByType('resource').map((e) => e.name)") as? [String] ?? []
            let tiles = fetched.filter { $0.hasPrefix(address + tilePath) }
            #expect(tiles.count > 4, "\(page): \(fetched)")
        }

        // ---- Leaflet: the image fitted to the window, every tile loaded.
        try driver.navigate("http://127.0.0.1:\(site.port)/leaflet.html")
        try driver.wait(
            for: "Leaflet's tiles", timeout: 120,
            """
            const tiles = [...document.querySelectorAll('img.leaflet-tile')];
            return tiles.length > 0 && tiles.every((t) => t.complete)
            """)
        let tiles = try #require(
            driver.execute(
                "return [...document.querySelectorAll('img.leaflet-tile')].map((t) => [t.src, t.classList.contains('leaflet-tile-loaded') && t.naturalWidth === 256])"
            ) as? [[Any]])
        #expect(!tiles.isEmpty && tiles.allSatisfy { $0[1] as? Bool == true }, "\(tiles)")
        #expect(tiles.allSatisfy { ($0[0] as? String)?.hasPrefix(address + "/images/photo/tiles/") == true }, "\(tiles)")
        try driver.expectNoScriptErrors()
    }
}
