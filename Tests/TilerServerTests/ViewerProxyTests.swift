import Foundation
import Testing
import TilerCore
@testable import TilerServer

/// tiler behind a real reverse proxy (Debian's nginx, started by the test on a loopback
/// port) that mounts it under `/some/prefix/`, with `--base-url` naming that address:
/// the viewer, OpenSeadragon over DeepZoom and over IIIF, and the IIIF Presentation
/// documents all work through the proxy, with no 404 in its access log and no script
/// error in Chromium.
@Suite(.serialized) struct ViewerProxyTests {
    /// OpenSeadragon's full build, as `scripts/install-deps test` extracts it from the
    /// openslide-python source distribution on PyPI.
    static var openSeadragon: String? {
        let candidates: [String?] = [
            ProcessInfo.processInfo.environment["TILER_OPENSEADRAGON_JS"],
            repositoryRoot.appendingPathComponent(".build/test-deps/openseadragon-6.1.1/openseadragon.js").path,
        ]
        return candidates.compactMap { $0 }.first { FileManager.default.isReadableFile(atPath: $0) }
    }

    @Test(.timeLimit(.minutes(10)), arguments: RootKind.allCases)
    func viewerAndOpenSeadragonThroughNginxUnderAPrefix(_ kind: RootKind) throws {
        guard let osd = Self.openSeadragon else {
            Issue.record("OpenSeadragon is missing: run scripts/install-deps test (it extracts it from PyPI's openslide-python)")
            return
        }
        let root = try ViewerPyramids.root.get()
        let proxyPort = try freePort()
        let prefix = "/some/prefix"
        let base = "http://127.0.0.1:\(proxyPort)\(prefix)"
        var configuration = ServerConfiguration(root: root)
        configuration.http.port = 0
        configuration.http.threads = 2
        configuration.baseURL = try BaseURL(parsing: base)
        // The same pyramids as folders, as archives, as archives in the S3 test server, or
        // as source files.
        let served = try ServedRoot(kind, folders: root, sourcesFormat: ViewerPyramids.sourcesFormat)
        served.configure(&configuration)
        defer { withExtendedLifetime(served) {} }  // its deinit removes the bucket's copy
        let server = TileServer(configuration: configuration)
        try server.start()
        defer {
            server.stop()
            server.wait()
        }
        // The OpenSeadragon test page and the library, served by nginx itself.
        let pages = try temporaryFolder("osd-page")
        defer { try? FileManager.default.removeItem(at: pages) }
        try Self.openSeadragonPage.write(to: pages.appendingPathComponent("index.html"), atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(atPath: osd, toPath: pages.appendingPathComponent("openseadragon.js").path)
        let nginx = try Nginx(
            port: proxyPort,
            locations: """
                        location \(prefix)/ {
                            proxy_pass http://127.0.0.1:\(server.port)/;
                            proxy_http_version 1.1;
                            proxy_set_header Connection "";
                            proxy_set_header Host $http_host;
                        }
                        location /osd/ { alias \(pages.path)/; }
                """)
        defer { nginx.stop() }
        guard let driver = try startBrowser() else { return }
        defer { driver.quit() }

        // ---- The viewer: album, deep zoom, zooming in, a panorama deep link.
        try driver.navigate(base + "/")
        try driver.wait(
            for: "the album through the proxy",
            """
            return window.tilerViewer && tilerViewer.album().total === 5 && tilerViewer.stats.thumbnailsLoaded === 5
            """)
        try driver.click("#cell-2")  // odd-123: WebP tiles
        try driver.wait(
            for: "odd-123's tiles",
            """
            const v = tilerViewer.view(); return v && v.id === 'odd-123' && v.level !== null && v.pending === 0 && v.activeTiles > 0
            """)
        for _ in 0..<3 { try driver.sendKeys("#stage", "+") }
        try driver.wait(for: "a finer level", "const v = tilerViewer.view(); return v.level === 3 && v.pending === 0")
        try driver.wait(for: "the navigator image", "return document.getElementById('navigator-image').complete")
        try driver.navigate(base + "/#/image/panorama?x=100&y=300&z=0.5&wrap=x")
        try driver.wait(for: "the panorama", "const v = tilerViewer.view(); return v && v.wrap && v.pending === 0 && v.activeTiles > 0")
        #expect(try driver.execute("return tilerViewer.stats.tileErrors") as? Int == 0)
        // Everything the page fetched went through the prefix.
        let resources = try #require(driver.execute("return performance.getEntriesByType('resource').map((e) => e.name)") as? [String])
        #expect(resources.count > 10)
        #expect(resources.allSatisfy { $0.hasPrefix(base + "/") }, "\(resources.filter { !$0.hasPrefix(base + "/") })")
        try driver.expectNoScriptErrors()

        // ---- OpenSeadragon over DeepZoom and over IIIF, through the proxy.
        // The deepest OpenSeadragon level of each: DeepZoom's is ceil(log2(2400)); IIIF's
        // is the number of scale factors less one (1…8 for 1537 × 997, 1…4 for 1000²).
        for (name, source, deepest) in [
            ("DeepZoom", "\(base)/images/panorama.dzi", 12),
            ("IIIF", "\(base)/iiif/3/odd-123/info.json", 3),
            ("IIIF PNG", "\(base)/iiif/3/\(ValidatorImage.id)/info.json", 2),
        ] {
            try driver.navigate(
                "http://127.0.0.1:\(proxyPort)/osd/index.html?source=\(source.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
            )
            try driver.wait(
                for: "OpenSeadragon to open \(name)", timeout: 120,
                """
                return osdState.failed.length > 0 || (osdState.opened && osdState.fullyLoaded && osdState.loaded > 0)
                """)
            _ = try driver.execute("zoomTo(6); return 1")
            try driver.wait(
                for: "OpenSeadragon's finer tiles of \(name)", timeout: 120,
                """
                return osdState.failed.length > 0 || (osdState.framesSinceZoom >= 2 && viewer.world.getItemAt(0).getFullyLoaded())
                """)
            let state = try #require(driver.execute("return osdState") as? [String: Any])
            #expect((state["failed"] as? [Any])?.isEmpty == true, "\(name): \(state)")
            #expect(state["maxLevel"] as? Int == deepest, "\(name): zoomed in, the full resolution is loaded: \(state)")
            try driver.expectNoScriptErrors()
        }

        // ---- IIIF Presentation: every link of the collection works through the proxy.
        let script = repositoryRoot.appendingPathComponent("scripts/check-iiif-presentation").path
        let report: String
        do {
            report = try runTool("/usr/bin/env", ["python3", script, "\(base)/iiif/3/collection.json"])
        } catch {
            // Once, on 2 cores at load 17 over --sources, an image got 502 from nginx: say why.
            // (A 502 for a tile came from tiler's head timeout counting its own loop's
            // hold-ups: docs/reliability.md, "The nginx 502 under load".)
            Issue.record("nginx's errors: \(nginx.upstreamErrors())")
            throw error
        }
        #expect(report.contains("\"service\": \"\(base)/iiif/3/odd-123\""), "\(report.prefix(500))")

        // ---- The proxy saw no 404 (nor any other error), and the tiles went through it.
        // 499 is nginx's note that the browser itself gave up a request (a tile scrolled
        // away or the page left while it was on its way, as with a slower bucket root):
        // allowed for tiles, whose failures the viewer and OpenSeadragon count above, and
        // for /visible, whose request in flight the viewer aborts when another image opens
        // (`clearViewer`; seen once on a loaded machine with a bucket root, as the page
        // went from odd-123 to the panorama).
        let requests = try nginx.requests()
        func mayBeGivenUp(_ uri: String) -> Bool {
            uri.contains("/tiles/") || uri.contains("_files/") || (uri.contains("/iiif/3/") && !uri.hasSuffix(".json"))
                || uri.contains("/visible?")
        }
        let failed = requests.filter { $0.status >= 400 && !($0.status == 499 && mayBeGivenUp($0.uri)) }
        #expect(failed.isEmpty, "requests that failed through the proxy: \(failed.prefix(20)); nginx: \(nginx.upstreamErrors())")
        for expected in [
            "\(prefix)/viewer/viewer.js", "\(prefix)/images/odd-123/tiles/3/", "\(prefix)/images/panorama_files/",
            "\(prefix)/iiif/3/odd-123/", "\(prefix)/images/panorama/visible?", "\(prefix)/iiif/3/collection.json",
            "/osd/openseadragon.js",
        ] {
            #expect(requests.contains { $0.uri.hasPrefix(expected) }, "no request for \(expected)…")
        }
        #expect(requests.filter { $0.uri.contains("/tiles/") || $0.uri.contains("_files/") || $0.uri.hasSuffix(".webp") }.count > 20)
    }

    /// Without `--base-url` (issue 31, item 11): the viewer under nginx's prefix still
    /// works (thumbnails, tiles and the navigator asked for relative to its page, not at the
    /// root-relative links the server writes), and the X-Forwarded-Prefix nginx sends is
    /// logged once as a hint to set `--base-url`.
    @Test(.timeLimit(.minutes(10))) func viewerUnderAPrefixWithoutABaseURL() throws {
        let root = try ViewerPyramids.root.get()
        let proxyPort = try freePort()
        let prefix = "/some/prefix"
        let base = "http://127.0.0.1:\(proxyPort)\(prefix)"
        var configuration = ServerConfiguration(root: root)
        configuration.http.port = 0
        configuration.http.threads = 2
        let log = CollectedLog()
        let server = TileServer(configuration: configuration, log: log.logger)
        try server.start()
        defer {
            server.stop()
            server.wait()
        }
        let nginx = try Nginx(
            port: proxyPort,
            locations: """
                        location \(prefix)/ {
                            proxy_pass http://127.0.0.1:\(server.port)/;
                            proxy_http_version 1.1;
                            proxy_set_header Connection "";
                            proxy_set_header Host $http_host;
                            proxy_set_header X-Forwarded-Prefix \(prefix);
                        }
                """)
        defer { nginx.stop() }
        guard let driver = try startBrowser() else { return }
        defer { driver.quit() }

        try driver.navigate(base + "/")
        try driver.wait(
            for: "the album's thumbnails through the proxy",
            "return window.tilerViewer && tilerViewer.album().total === 5 && tilerViewer.stats.thumbnailsLoaded === 5")
        try driver.click("#cell-2")  // odd-123
        try driver.wait(
            for: "odd-123's tiles",
            "const v = tilerViewer.view(); return v && v.id === 'odd-123' && v.level !== null && v.pending === 0 && v.activeTiles > 0")
        for _ in 0..<2 { try driver.sendKeys("#stage", "+") }
        try driver.wait(for: "a finer level", "const v = tilerViewer.view(); return v.level >= 2 && v.pending === 0")
        try driver.wait(
            for: "the navigator image",
            "const i = document.getElementById('navigator-image'); return i.complete && i.naturalWidth > 0")
        // A deep link opened directly (the image's own document, not the listing's).
        try driver.navigate(base + "/#/image/panorama?x=100&y=300&z=0.5")
        try driver.wait(
            for: "the panorama", "const v = tilerViewer.view(); return v && v.id === 'panorama' && v.pending === 0 && v.activeTiles > 0")
        #expect(try driver.execute("return tilerViewer.stats.tileErrors") as? Int == 0)
        let resources = try #require(driver.execute("return performance.getEntriesByType('resource').map((e) => e.name)") as? [String])
        #expect(resources.count > 10)
        #expect(resources.allSatisfy { $0.hasPrefix(base + "/") }, "\(resources.filter { !$0.hasPrefix(base + "/") })")
        try driver.expectNoScriptErrors()

        let requests = try nginx.requests()
        let failed = requests.filter {
            $0.status >= 400 && !($0.status == 499 && ($0.uri.contains("/tiles/") || $0.uri.contains("/visible?")))
        }
        #expect(failed.isEmpty, "requests that failed through the proxy: \(failed.prefix(20))")
        for expected in ["\(prefix)/images/odd-123/thumbnail", "\(prefix)/images/odd-123/tiles/", "\(prefix)/images/panorama/tiles/"] {
            #expect(requests.contains { $0.uri.hasPrefix(expected) }, "no request for \(expected)…")
        }
        let warnings = log.messages.filter { $0.hasPrefix("warning:") }
        #expect(warnings.count == 1 && warnings[0].contains("X-Forwarded-Prefix") && warnings[0].contains(prefix), "\(warnings)")
    }

    /// OpenSeadragon on the source given in the query (a .dzi or an info.json URL), with
    /// its state kept for the test in `window.osdState` (`maxLevel`: the finest level
    /// of any tile loaded so far; `framesSinceZoom`: redraws since the last `zoomTo`).
    static let openSeadragonPage = """
        <!doctype html>
        <html><head><meta charset="utf-8"><link rel="icon" href="data:,">
        <style>html, body, #osd { margin: 0; width: 100%; height: 100%; background: #000; }</style>
        <script>
        window.pageErrors = [];
        addEventListener('error', (e) => pageErrors.push(String(e.message)));
        addEventListener('unhandledrejection', (e) => pageErrors.push('unhandled rejection: ' + String(e.reason)));
        </script>
        <script src="openseadragon.js"></script>
        </head><body><div id="osd"></div>
        <script>
        window.osdState = { opened: false, fullyLoaded: false, loaded: 0, maxLevel: -1, framesSinceZoom: 0, failed: [] };
        const viewer = OpenSeadragon({
          id: 'osd', tileSources: new URLSearchParams(location.search).get('source'),
          showNavigationControl: false, animationTime: 0, blendTime: 0, springStiffness: 100,
        });
        viewer.addHandler('open', () => {
          osdState.opened = true;
          const item = viewer.world.getItemAt(0);
          item.addHandler('fully-loaded-change', (e) => { osdState.fullyLoaded = e.fullyLoaded; });
          osdState.fullyLoaded = item.getFullyLoaded();
        });
        viewer.addHandler('open-failed', (e) => osdState.failed.push('open failed: ' + e.message));
        viewer.addHandler('tile-loaded', (e) => { osdState.loaded++; osdState.maxLevel = Math.max(osdState.maxLevel, e.tile.level); });
        viewer.addHandler('update-viewport', () => { osdState.framesSinceZoom++; });
        viewer.addHandler('tile-load-failed', (e) => osdState.failed.push('tile failed: ' + e.message + ' ' + (e.tile ? e.tile.getUrl() : '')));
        window.zoomTo = (zoom) => {
          viewer.viewport.zoomTo(zoom, null, true);
          osdState.framesSinceZoom = 0;
        };
        </script></body></html>
        """
}
