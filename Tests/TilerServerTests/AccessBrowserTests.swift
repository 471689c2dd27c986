import Foundation
import Testing
import TilerCore
import TilerHTTP
@testable import TilerServer
import TilerTestSupport

/// Private images in Chromium (issue 32), beyond the viewer's share link
/// (`PrivateViewerTests`): OpenSeadragon sending a Bearer token with its tile requests;
/// the IIIF Authorization Flow 2.0 end to end, behind nginx set up as README.md's recipe
/// says, with a stand-in for the site's own login that sets the `tiler_token` cookie; and
/// the viewer offering that login on a private image. Tokens are minted by PyJWT, never
/// by tiler.
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

    // MARK: - IIIF Authorization Flow 2.0 behind nginx

    /// The flow a IIIF viewer runs, in Chromium, against tiler behind nginx as README.md's
    /// recipe sets it up, with every URL taken from the services the 401 info.json names:
    /// the probe says 401; the access service (the policy's loginURL: the stand-in login
    /// page, behind the same nginx) opens in a window with `?origin=`, where the user signs
    /// in and the page sets the HttpOnly `tiler_token` cookie and closes; the token service
    /// in an iframe posts an access token; the probe with it says 200; info.json and a tile
    /// load with the cookie. A page of another origin gets no token from the token service
    /// (invalidOrigin), and one claiming the allowed origin gets no message at all. Then the
    /// logout service: the same access token's probe says 401, info.json and the tile are
    /// refused, and the token service finds no cookie.
    @Test(.timeLimit(.minutes(10))) func iiifAuthorizationFlowThroughNginxWithALoginPage() throws {
        try withSignInSite { site in
            guard let driver = try startBrowser() else { return }
            defer { driver.quit() }
            let info = site.origin + "/iiif/3/secret-a/info.json"
            try driver.navigate(
                site.origin + "/client/iiif.html?info=" + info.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
            let start = try #require(driver.wait(for: "the client's start", "return flow.error || flow.start") as? [String: Any])
            #expect(start["info"] as? Int == 401 && start["width"] is NSNull, "\(start)")
            #expect(start["profile"] as? String == "active", "\(start)")
            #expect((start["probe"] as? [String: Any])?["status"] as? Int == 401, "\(start)")

            // The access service: the login page in a window, where the user signs in.
            let main = try driver.windowHandle()
            let before = try driver.windowHandles()
            try driver.click("#login")
            try site.signIn(driver, besides: before, returningTo: main)
            let signedIn = try #require(driver.wait(for: "the signed-in client", "return flow.error || flow.signedIn") as? [String: Any])
            #expect(signedIn["message"] as? String == "AuthAccessToken2", "\(signedIn)")
            #expect(signedIn["hasAccessToken"] as? Bool == true && (signedIn["expiresIn"] as? Int ?? 0) > 0, "\(signedIn)")
            #expect((signedIn["probe"] as? [String: Any])?["status"] as? Int == 200, "\(signedIn)")
            let image = signedIn["image"] as? [String: Any] ?? [:]
            #expect(image["info"] as? Int == 200 && image["width"] as? Int == 600, "\(signedIn)")
            #expect(image["tile"] as? Int == 200 && (image["tileWidth"] as? Int ?? 0) > 0, "\(signedIn)")
            // HttpOnly: no script reads the cookie.
            #expect(signedIn["cookieVisible"] as? Bool == false, "\(signedIn)")

            // The same client on another origin, in another tab, while the browser is signed
            // in: the token service refuses it, and when it claims the allowed origin the
            // message is not delivered to it at all.
            let foreignTab = try driver.openTab()
            try driver.switchToWindow(foreignTab)
            try driver.navigate(
                "http://127.0.0.1:\(site.foreignPort)/iiif.html?foreign=1&info=" + info.addingPercentEncoding(
                    withAllowedCharacters: .alphanumerics)!)
            let foreign = try #require(driver.wait(for: "the foreign page", "return flow.error || flow.foreign") as? [String: Any])
            #expect(foreign["own"] as? String == "AuthAccessTokenError2 invalidOrigin", "\(foreign)")
            #expect(foreign["claimed"] as? String == "no message (the frame loaded)", "\(foreign)")
            try driver.expectNoScriptErrors()
            try driver.closeWindow()
            try driver.switchToWindow(main)

            // The logout service, in a window that closes itself.
            try driver.click("#logout")
            let out = try #require(driver.wait(for: "the signed-out client", "return flow.error || flow.signedOut") as? [String: Any])
            #expect((out["probe"] as? [String: Any])?["status"] as? Int == 401, "the same access token, after logout: \(out)")
            let closed = out["image"] as? [String: Any] ?? [:]
            #expect(closed["info"] as? Int == 401 && closed["width"] is NSNull, "\(out)")
            #expect(closed["tile"] as? Int == 401 && closed["tileWidth"] as? Int == 0, "\(out)")
            #expect(out["tokenService"] as? String == "AuthAccessTokenError2 missingAspect", "\(out)")
            try driver.expectNoScriptErrors()

            // Every URL came from the services: the login with ?origin=, the token service,
            // the logout; nothing failed in nginx but the refusals the test asked for.
            let requests = try site.nginx.requests()
            #expect(requests.contains { site.isLogin($0.uri) }, "\(requests.map(\.uri))")
            #expect(requests.contains { $0.uri == "/login/signed-in" || $0.uri == "/login/signed-in?" })
            #expect(requests.contains { $0.uri.hasPrefix("/iiif/auth/token?messageId=") })
            #expect(requests.contains { $0.uri == "/iiif/auth/logout" })
            #expect(!requests.contains { $0.status >= 500 }, "\(requests.filter { $0.status >= 500 })")
        }
    }

    // MARK: - The viewer's sign-in

    /// The viewer on a private image it may not open, behind nginx as in the README: it
    /// shows the access service's heading and button from the image's info.json; a login
    /// window closed without signing in leaves the button there, with the token service's
    /// heading; signing in on the stand-in page opens the image (its tiles load with the
    /// cookie) and the album then lists it.
    @Test(.timeLimit(.minutes(10))) func theViewerOffersTheLoginAndOpensThePrivateImage() throws {
        try withSignInSite { site in
            let closedInfo = try fetch(site.port, "/iiif/3/secret-a/info.json")
            #expect(closedInfo.status == 401)
            let accessService = try #require(
                ((closedInfo.json["service"] as? [[String: Any]])?.first?["service"] as? [[String: Any]])?.first)
            let heading = try #require((accessService["heading"] as? [String: [String]])?["en"]?.first)
            let button = try #require((accessService["confirmLabel"] as? [String: [String]])?["en"]?.first)

            guard let driver = try startBrowser() else { return }
            defer { driver.quit() }
            try driver.navigate(site.origin + "/#/image/secret-a")
            try driver.wait(for: "the viewer's sign-in", "return !document.getElementById('login').hidden")
            let shown = try #require(
                driver.execute(
                    """
                    return [document.getElementById('login-heading').textContent, document.getElementById('login-button').textContent,
                            document.getElementById('status').textContent]
                    """) as? [String])
            #expect(shown[0] == heading && shown[1] == button, "\(shown)")
            #expect(!shown[2].contains("Could not open"), "\(shown)")
            let box = try driver.rect("#login-button")
            #expect(box.isVisible(within: try driver.viewportSize()), "the button on screen: \(box)")

            // The login window closed without signing in: the button stays, saying why.
            let main = try driver.windowHandle()
            let before = try driver.windowHandles()
            try driver.click("#login-button")
            try driver.switchToWindow(try driver.newWindow(besides: before))
            try driver.wait(for: "the login page", "return document.getElementById('sign-in') !== null")
            try driver.closeWindow()
            try driver.switchToWindow(main)
            try driver.wait(
                for: "the sign-in offered again",
                """
                const b = document.getElementById('login-button');
                return !b.disabled && !document.getElementById('login').hidden &&
                  document.getElementById('login-heading').textContent === 'You are not signed in'
                """)
            #expect(try driver.execute("return tilerViewer.view()") is NSNull)

            // Signing in.
            try driver.click("#login-button")
            try site.signIn(driver, besides: before, returningTo: main)
            try driver.wait(
                for: "the private image's tiles",
                "const v = tilerViewer.view(); return v && v.id === 'secret-a' && v.pending === 0 && v.activeTiles > 0")
            #expect(try driver.execute("return tilerViewer.stats.tileErrors") as? Int == 0)
            #expect(try driver.execute("return [tilerViewer.stats.loginsOffered, tilerViewer.stats.logins]") as? [Int] == [1, 1])
            #expect(try driver.execute("return document.getElementById('login').hidden") as? Bool == true)
            #expect(try driver.execute("return document.getElementById('status').textContent") as? String == "secret-a · 600 × 400")
            try driver.navigate(site.origin + "/#/")
            try driver.wait(for: "the album with the private image", "return tilerViewer.album().total === 2")
            try driver.expectNoScriptErrors()

            let requests = try site.nginx.requests()
            #expect(requests.contains { $0.uri.hasPrefix("/images/secret-a/tiles/") && $0.status == 200 })
            #expect(requests.contains { site.isLogin($0.uri) }, "\(requests.map(\.uri))")
        }
    }

    // MARK: - The site

    /// tiler behind nginx as README.md's "Private images" recipe sets it up (its nginx
    /// block, with the ports replaced), `--base-url` the proxy's address, the policy's
    /// `loginURL` its `/login`: the stand-in login app (`LoginApp`), which sets a PyJWT
    /// token as the cookie. nginx also serves the test's IIIF client page under `/client/`;
    /// a `StaticSite` serves the same page from another origin.
    struct SignInSite {
        let origin: String
        /// The proxy's port.
        let port: Int
        let foreignPort: Int
        let nginx: Nginx

        /// Whether `uri` asks for the login page with this site's origin, as the spec's
        /// clients add it.
        func isLogin(_ uri: String) -> Bool {
            guard let url = URLComponents(string: origin + uri), url.path == "/login" else { return false }
            return url.queryItems == [URLQueryItem(name: "origin", value: origin)]
        }

        /// Signs in through the login window the page just opened: the user presses the
        /// stand-in page's button, and the window closes itself; then commands go to `main`.
        func signIn(_ driver: WebDriver, besides known: [String], returningTo main: String) throws {
            try driver.switchToWindow(try driver.newWindow(besides: known))
            try driver.wait(for: "the login page", "return document.getElementById('sign-in') !== null")
            try driver.click("#sign-in")
            let closed = eventually(within: 30) { (try? driver.windowHandles().count) == known.count }
            try driver.switchToWindow(main)
            #expect(closed, "the login window closed itself after signing in")
        }
    }

    /// Runs `body` with the site up: `public-a` and `secret-a` (600 × 400), the latter
    /// private; the stand-in login's cookie opens `secret-*`.
    func withSignInSite(_ body: (SignInSite) throws -> Void) throws {
        let setup = try AccessTests.Setup()
        defer { setup.scratch.cleanUp() }
        let proxyPort = try freePort()
        let origin = "http://127.0.0.1:\(proxyPort)"
        try AccessTests.Setup.policy(rules: [("public-*", "public"), ("*", "token")], loginURL: origin + "/login")
            .write(toFile: setup.policyPath, atomically: true, encoding: .utf8)
        let root = try PyramidRoot()
        try AccessTests.cutPyramids(["public-a", "secret-a"], into: root)
        let cookie = try setup.keys.tokens([
            TokenSpec(alg: "HS256", kid: "site", claims: AccessTests.Setup.claims(["secret-*"]))
        ])[0]
        var loginConfiguration = HTTPConfiguration()
        loginConfiguration.port = 0
        loginConfiguration.threads = 1
        let login = HTTPServer(configuration: loginConfiguration, handler: LoginApp(token: cookie))
        try login.start()
        defer {
            login.stop()
            login.wait()
        }
        let pages = try temporaryFolder("iiif-client")
        defer { try? FileManager.default.removeItem(at: pages) }
        try Self.clientPage.write(to: pages.appendingPathComponent("iiif.html"), atomically: true, encoding: .utf8)
        let foreign = try StaticSite(["/iiif.html": (Array(Self.clientPage.utf8), "text/html; charset=utf-8")])
        defer { foreign.stop() }
        let accessLog = CollectedLog()
        try withTileServer(root, access: try setup.access(), accessLog: accessLog, { $0.baseURL = try? BaseURL(parsing: origin) }) { port in
            let recipe = try ReadmePagesTests.readmePage("nginx-login", language: "nginx")
            try #require(recipe.contains("127.0.0.1:8080;") && recipe.contains("127.0.0.1:9000;"), "the README's recipe: \(recipe)")
            let locations =
                recipe.replacingOccurrences(of: "127.0.0.1:8080;", with: "127.0.0.1:\(port);")
                .replacingOccurrences(of: "127.0.0.1:9000;", with: "127.0.0.1:\(login.port);")
                + "\nlocation /client/ { alias \(pages.path)/; }\n"
            let nginx = try Nginx(port: proxyPort, locations: locations)
            defer { nginx.stop() }
            try body(SignInSite(origin: origin, port: proxyPort, foreignPort: foreign.port, nginx: nginx))
        }
        let signature = String(cookie.split(separator: ".")[2])
        #expect(!accessLog.linesWithMetadata.isEmpty)
        #expect(!accessLog.linesWithMetadata.contains { $0.contains(signature) }, "a token in the access log")
    }

    /// The stand-in for a site's own login, behind nginx at `/login`: a page with a "Sign
    /// in" button; pressing it (`/login/signed-in`) sets `token` as the cookie
    /// `tiler_token`, with the attributes README.md gives, and closes the window a viewer
    /// opened.
    struct LoginApp: HTTPHandler {
        let token: String

        func respond(to head: HTTPRequestHead) -> HTTPResponse {
            let path = String(decoding: head.target.prefix(head.pathLength), as: UTF8.self)
            func page(_ body: String) -> HTTPResponse {
                let html =
                    #"<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>Sign in</title></head><body>"#
                return .bytes(
                    status: 200, contentType: "text/html; charset=utf-8", body: Array((html + body + "</body></html>").utf8),
                    cacheControl: "no-store")
            }
            switch path {
            case "/login":
                return page(#"<form action="/login/signed-in"><button id="sign-in">Sign in</button></form>"#)
            case "/login/signed-in":
                return .withHeaders(
                    [("Set-Cookie", "tiler_token=\(token); HttpOnly; Secure; SameSite=Lax; Path=/")],
                    page("<p>Signed in.</p><script>if (window.opener) window.close();</script>"))
            default:
                return .error(HTTPError(404, "no page \(path)"))
            }
        }
    }

    /// A IIIF Authorization Flow 2.0 client, as a viewer runs it, on the info.json given as
    /// `?info=URL`: every other URL comes from the services it names. The test presses its
    /// buttons (a window opens on a user's gesture only) and reads `window.flow`, which
    /// never holds a token. With `&foreign=1` (on a page of another origin): the token
    /// service asked with this page's origin, then with the info.json's origin claimed.
    static let clientPage = """
        <!doctype html>
        <html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>IIIF client</title>
        <script>
        window.pageErrors = [];
        addEventListener('error', (e) => pageErrors.push(String(e.message)));
        addEventListener('unhandledrejection', (e) => pageErrors.push('unhandled rejection: ' + String(e.reason)));
        </script>
        </head><body>
        <button id="login" type="button">Sign in</button> <button id="logout" type="button">Sign out</button>
        <script>
        const flow = window.flow = {};
        const params = new URLSearchParams(location.search);
        const infoURL = params.get('info');
        const find = (services, type) => (Array.isArray(services) ? services : []).find((s) => s.type === type);
        let services = null, accessToken = null, tileURL = null;
        const failed = (e) => { flow.error = String(e && e.stack || e); };

        async function probe() {
          const response = await fetch(services.probe.id, accessToken ? { headers: { Authorization: 'Bearer ' + accessToken } } : {});
          const body = await response.json();
          return { http: response.status, type: body.type, status: body.status };
        }

        // The info.json and a tile of the image, as a viewer asks for them (the cookie goes along).
        async function image() {
          const info = await fetch(infoURL, { cache: 'no-store' });
          const json = await info.json();
          if (info.ok) {
            const t = json.tiles[0];
            tileURL = `${json.id}/0,0,${t.width},${t.height || t.width}/${t.width},/0/default.jpg`;
          }
          const tile = await fetch(tileURL, { cache: 'no-store' });
          const tileWidth = tile.ok ? (await createImageBitmap(await tile.blob())).width : 0;
          return { info: info.status, width: json.width ?? null, tile: tile.status, tileWidth };
        }

        // Opens `url` in a window (in the click that asked for it); resolves once it has closed.
        function inWindow(url) {
          const opened = window.open(url, '_blank');
          if (!opened) return Promise.reject(new Error('the window was blocked'));
          return new Promise((resolve) => {
            const timer = setInterval(() => { if (opened.closed) { clearInterval(timer); resolve(); } }, 100);
          });
        }

        // The token service's message for `origin`, from a hidden iframe; or, when none comes
        // within 2 s of the frame's loading, null.
        let messages = 0;
        function tokenMessage(service, origin = location.origin) {
          return new Promise((resolve) => {
            const messageId = 'm-' + ++messages;
            const url = new URL(service);
            url.searchParams.set('messageId', messageId);
            url.searchParams.set('origin', origin);
            const frame = document.createElement('iframe');
            frame.hidden = true;
            let timer = setTimeout(() => done(undefined), 20000);
            const done = (message) => {
              removeEventListener('message', receive);
              clearTimeout(timer);
              frame.remove();
              resolve(message);
            };
            const receive = (e) => {
              if (e.source === frame.contentWindow && e.origin === url.origin && e.data && e.data.messageId === messageId) done(e.data);
            };
            frame.addEventListener('load', () => { clearTimeout(timer); timer = setTimeout(() => done(null), 2000); });
            addEventListener('message', receive);
            frame.src = url.href;
            document.body.append(frame);
          });
        }
        const described = (m) => (m === null ? 'no message (the frame loaded)' : m === undefined ? 'the frame never loaded' : [m.type, m.profile].filter(Boolean).join(' '));

        if (infoURL) {
          (async () => {
            const response = await fetch(infoURL, { cache: 'no-store' });
            const info = await response.json();
            const probeService = find(info.service, 'AuthProbeService2');
            const access = probeService && find(probeService.service, 'AuthAccessService2');
            services = {
              probe: probeService, access,
              token: access && find(access.service, 'AuthAccessTokenService2'),
              logout: access && find(access.service, 'AuthLogoutService2'),
            };
            flow.start = { info: response.status, width: info.width ?? null, profile: access && access.profile, probe: await probe() };
            if (params.get('foreign') === '1') {
              const own = described(await tokenMessage(services.token.id));
              const claimed = described(await tokenMessage(services.token.id, new URL(infoURL).origin));
              flow.foreign = { own, claimed };
            }
          })().catch(failed);
        }

        document.getElementById('login').addEventListener('click', () => {
          const url = new URL(services.access.id);
          url.searchParams.set('origin', location.origin);
          inWindow(url.href).then(async () => {
            const message = await tokenMessage(services.token.id);
            accessToken = message && typeof message.accessToken === 'string' ? message.accessToken : null;
            flow.signedIn = {
              message: message && message.type, hasAccessToken: accessToken !== null, expiresIn: message && message.expiresIn,
              probe: await probe(), image: await image(), cookieVisible: document.cookie.includes('tiler_token'),
            };
          }).catch(failed);
        });

        document.getElementById('logout').addEventListener('click', () => {
          inWindow(services.logout.id).then(async () => {
            flow.signedOut = { probe: await probe(), image: await image(), tokenService: described(await tokenMessage(services.token.id)) };
          }).catch(failed);
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
