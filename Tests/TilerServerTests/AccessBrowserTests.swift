import Foundation
import Testing
import TilerCore
import TilerHTTP
@testable import TilerServer
import TilerTestSupport

/// Private images in Chromium (issue 32), beyond the viewer's share link
/// (`PrivateViewerTests`): OpenSeadragon sending a Bearer token with its tile requests.
/// Tokens are minted by PyJWT, never by tiler.
@Suite(.serialized) struct AccessBrowserTests {
    // MARK: - OpenSeadragon with a Bearer token

    /// OpenSeadragon on another origin than tiler's, with `loadTilesWithAjax` and
    /// `ajaxHeaders: {Authorization: 'Bearer …'}`, shows a private DeepZoom image: every
    /// tile loads, down to full resolution, each asked for with the header (tiler answers
    /// 200, after a CORS preflight for the header). The controls, on the same page: without
    /// the header the descriptor is refused (401); with the header dropped once the image
    /// opened, or with `loadTilesWithAjax` off (tiles as plain images, no header), every
    /// tile is refused with 401 and none loads.
    @Test(.timeLimit(.minutes(10))) func openSeadragonShowsAPrivateDeepZoomImageWithABearerToken() throws {
        guard let osd = ViewerProxyTests.openSeadragon else {
            Issue.record("OpenSeadragon is missing: run scripts/install-deps test (it extracts it from PyPI's openslide-python)")
            return
        }
        let setup = try AccessTests.Setup()
        defer { setup.scratch.cleanUp() }
        let root = try PyramidRoot()
        try AccessTests.cutPyramids(["secret-a"], into: root)
        let token = try setup.keys.tokens([
            TokenSpec(alg: "ES256", kid: "ec", claims: AccessTests.Setup.claims(["secret-*"]))
        ])[0]
        let site = try StaticSite([
            "/osd.html": (Array(Self.openSeadragonPage.utf8), "text/html; charset=utf-8"),
            "/openseadragon.js": (Array(try Data(contentsOf: URL(fileURLWithPath: osd))), "text/javascript"),
        ])
        defer { site.stop() }
        let accessLog = CollectedLog()
        try withTileServer(root, access: try setup.access(), accessLog: accessLog) { port in
            guard let driver = try startBrowser() else { return }
            defer { driver.quit() }
            let source = "http://127.0.0.1:\(port)/images/secret-a.dzi"
            var run = 0
            /// Opens the page; tiler's requests for this run are those logged after it.
            func open(ajax: Bool, token: String?, drop: Bool = false) throws -> Int {
                run += 1
                var page = "http://127.0.0.1:\(site.port)/osd.html?run=\(run)&ajax=\(ajax ? 1 : 0)&drop=\(drop ? 1 : 0)&source="
                page += source.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                // The token in the fragment, which no request carries.
                if let token { page += "#token=" + token }
                let logged = accessLog.linesWithMetadata.count
                try driver.navigate(page)
                return logged
            }
            func tileRequests(from start: Int) -> [LoggedRequest] {
                LoggedRequest.all(in: accessLog, from: start).filter { $0.method == "GET" && $0.path.contains("secret-a_files/") }
            }

            // ---- With the header: the whole image, then full resolution.
            let shown = try open(ajax: true, token: token)
            let loaded = "osdState.opened && osdState.fullyLoaded && osdState.loaded > 0"
            try driver.wait(for: "OpenSeadragon's tiles", timeout: 120, "return osdState.failed.length > 0 || (\(loaded))")
            _ = try driver.execute(
                "viewer.viewport.zoomTo(viewer.viewport.imageToViewportZoom(1), null, true); window.zoomedAt = Date.now(); return 1")
            try driver.wait(
                for: "OpenSeadragon at full resolution", timeout: 120,
                "return osdState.failed.length > 0 || (Date.now() - zoomedAt > 300 && viewer.world.getItemAt(0).getFullyLoaded())")
            let state = try #require(driver.execute("return osdState") as? [String: Any])
            #expect((state["failed"] as? [Any])?.isEmpty == true, "\(state)")
            // 600 × 400: DeepZoom's level 10 (ceil(log2(600))) is the full resolution.
            #expect(state["maxLevel"] as? Int == 10, "\(state)")
            let loadedCount = state["loaded"] as? Int ?? 0
            try driver.expectNoScriptErrors()
            #expect(eventually(within: 10) { tileRequests(from: shown).count >= loadedCount })
            let granted = tileRequests(from: shown)
            #expect(loadedCount > 5 && granted.allSatisfy { $0.status == 200 }, "\(loadedCount) loaded; \(granted.prefix(10))")
            // The header is no CORS-safelisted one: the browser asked first.
            #expect(LoggedRequest.all(in: accessLog, from: shown).contains { $0.method == "OPTIONS" && $0.path.contains("secret-a") })

            // ---- Without the header: the descriptor is refused.
            let bare = try open(ajax: true, token: nil)
            try driver.wait(for: "OpenSeadragon's refusal", timeout: 60, "return osdState.failed.length > 0")
            let refused = try #require(driver.execute("return osdState") as? [String: Any])
            #expect((refused["failed"] as? [String])?.first?.contains("HTTP 401") == true, "\(refused)")
            #expect(refused["opened"] as? Bool == false && refused["loaded"] as? Int == 0, "\(refused)")
            #expect(
                eventually(within: 10) {
                    LoggedRequest.all(in: accessLog, from: bare).contains { $0.path == "/images/secret-a.dzi" && $0.status == 401 }
                })

            // ---- The header dropped once the image opened, and tiles as plain images: every
            // tile refused with 401, none shown.
            for (ajax, drop) in [(true, true), (false, false)] {
                let start = try open(ajax: ajax, token: token, drop: drop)
                try driver.wait(
                    for: "OpenSeadragon's refused tiles (ajax \(ajax))", timeout: 60,
                    "return osdState.opened && osdState.fullyLoaded && osdState.failed.length >= 2")
                let failing = try #require(driver.execute("return osdState") as? [String: Any])
                #expect(failing["loaded"] as? Int == 0, "ajax \(ajax): \(failing)")
                if ajax {
                    // Each tile's own request said why.
                    let statuses = failing["failedStatuses"] as? [Int] ?? []
                    #expect(!statuses.isEmpty && statuses.allSatisfy { $0 == 401 }, "\(failing)")
                }
                #expect(eventually(within: 10) { tileRequests(from: start).count >= 2 })
                let tiles = tileRequests(from: start)
                #expect(tiles.allSatisfy { $0.status == 401 }, "ajax \(ajax): \(tiles.prefix(10))")
            }
        }
        let signature = String(token.split(separator: ".")[2])
        #expect(!accessLog.linesWithMetadata.contains { $0.contains(signature) }, "a token in the access log")
    }

    /// OpenSeadragon on the DeepZoom source `?source=`, tiles by XHR when `?ajax=1`, sending
    /// `Authorization: Bearer TOKEN` when the fragment holds `#token=TOKEN`, and dropping
    /// the header once the image opened when `?drop=1`. `window.osdState` for the test:
    /// tiles loaded and failed, and each failed XHR's status (OpenSeadragon counts a level
    /// whose tiles all failed as fully loaded).
    static let openSeadragonPage = """
        <!doctype html>
        <html><head><meta charset="utf-8"><link rel="icon" href="data:,">
        <style>html, body, #osd { margin: 0; width: 100%; height: 100%; background: #000; }</style>
        <script>
        window.pageErrors = [];
        addEventListener('error', (e) => pageErrors.push(String(e.message)));
        addEventListener('unhandledrejection', (e) => pageErrors.push('unhandled rejection: ' + String(e.reason)));
        const consoleError = console.error;
        console.error = (...args) => { pageErrors.push('console.error: ' + args.map(String).join(' ')); consoleError.apply(console, args); };
        </script>
        <script src="openseadragon.js"></script>
        </head><body><div id="osd"></div>
        <script>
        const params = new URLSearchParams(location.search);
        const token = new URLSearchParams(location.hash.slice(1)).get('token');
        window.osdState = { opened: false, fullyLoaded: false, loaded: 0, maxLevel: -1, failed: [], failedStatuses: [] };
        const viewer = OpenSeadragon({
          id: 'osd', tileSources: params.get('source'), crossOriginPolicy: 'Anonymous',
          loadTilesWithAjax: params.get('ajax') === '1',
          ajaxHeaders: token ? { Authorization: 'Bearer ' + token } : {},
          showNavigationControl: false, animationTime: 0, blendTime: 0, springStiffness: 100,
        });
        viewer.addHandler('open', () => {
          // Before the first tile is asked for (on the next frame).
          if (params.get('drop') === '1') viewer.setAjaxHeaders({}, true);
          osdState.opened = true;
          const item = viewer.world.getItemAt(0);
          item.addHandler('fully-loaded-change', (e) => { osdState.fullyLoaded = e.fullyLoaded; });
          osdState.fullyLoaded = item.getFullyLoaded();
        });
        viewer.addHandler('open-failed', (e) => osdState.failed.push('open failed: ' + e.message));
        viewer.addHandler('tile-loaded', (e) => { osdState.loaded++; osdState.maxLevel = Math.max(osdState.maxLevel, e.tile.level); });
        viewer.addHandler('tile-load-failed', (e) => {
          osdState.failed.push('tile failed: ' + e.message + ' ' + e.tile.getUrl());
          if (e.tileRequest) osdState.failedStatuses.push(e.tileRequest.status);
        });
        </script></body></html>
        """
}

/// One request in tiler's access log.
struct LoggedRequest: CustomStringConvertible {
    let method: String
    let path: String
    let status: Int

    var description: String { "\(status) \(method) \(path)" }

    /// The requests `log` (an access log) holds from line `start` on.
    static func all(in log: CollectedLog, from start: Int = 0) -> [LoggedRequest] {
        log.linesWithMetadata.dropFirst(start).compactMap { line in
            func field(_ name: String) -> String? {
                guard let range = line.range(of: "\"\(name)\": ") else { return nil }
                let rest = line[range.upperBound...]
                return String(rest.prefix { $0 != "," && $0 != "]" })
            }
            guard let method = field("method"), let path = field("path"), let status = field("status").flatMap({ Int($0) }) else {
                return nil
            }
            return LoggedRequest(method: method, path: path, status: status)
        }
    }
}
