// A minimal W3C WebDriver client for chromedriver, over the raw-socket HTTP client, so
// the browser tests run inside `swift test` with nothing but Debian's chromium and
// chromium-driver installed.
import Foundation
import TilerTestSupport
#if canImport(Glibc)
    import Glibc
#endif

final class WebDriver {
    let port: Int
    let session: String
    private let process: Process
    /// The browser's profile folder, removed by `quit()` (and at the latest when the
    /// process exits).
    private let profile: String

    /// The key codes WebDriver uses for special keys.
    enum Key {
        static let arrowLeft = "\u{E012}", arrowUp = "\u{E013}", arrowRight = "\u{E014}", arrowDown = "\u{E015}"
        static let enter = "\u{E007}", escape = "\u{E00C}"
        static let pageUp = "\u{E00E}", pageDown = "\u{E00F}", end = "\u{E010}", home = "\u{E011}"
    }

    /// Starts chromedriver on a free port and opens a headless chromium session of
    /// `width × height` CSS pixels at device scale 1.
    init(chromedriver: String, chromium: String, width: Int, height: Int) throws {
        (port, process) = try Self.startChromedriver(chromedriver)
        profile = FileManager.default.temporaryDirectory.appendingPathComponent("tiler-chromium-\(getpid())-\(port)").path
        ProcessFolders.removeAtExit(profile)
        let capabilities: [String: Any] = [
            "capabilities": [
                "alwaysMatch": [
                    "browserName": "chrome",
                    "goog:chromeOptions": [
                        "binary": chromium,
                        "args": [
                            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                            "--window-size=\(width),\(height)", "--force-device-scale-factor=1", "--hide-scrollbars",
                            "--no-first-run", "--disable-extensions", "--user-data-dir=\(profile)",
                        ],
                    ],
                ]
            ]
        ]
        let answer: Any?
        do {
            answer = try Self.call(port, "POST", "/session", capabilities, timeout: 60)
        } catch {
            kill(process.processIdentifier, SIGKILL)
            throw error
        }
        guard let value = answer as? [String: Any], let id = value["sessionId"] as? String else {
            kill(process.processIdentifier, SIGKILL)
            throw ClientError("chromedriver gave no session: \(String(describing: answer))")
        }
        session = id
    }

    /// chromedriver ready on a free port. The port is free when chosen but not held: a
    /// socket of a test running in parallel can take it before chromedriver binds it, and
    /// chromedriver then exits. That calls for another port, not a failed test.
    private static func startChromedriver(_ chromedriver: String) throws -> (Int, Process) {
        for _ in 0..<5 {
            let port = try freePort()
            if let process = try startChromedriver(chromedriver, port: port) { return (port, process) }
        }
        throw ClientError("chromedriver exited at start on 5 free ports in a row")
    }

    /// chromedriver listening on `port` and ready, or nil when it exited (the port was
    /// taken meanwhile); throws if it neither answers nor exits within 60 s.
    private static func startChromedriver(_ chromedriver: String, port: Int) throws -> Process? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: chromedriver)
        process.arguments = ["--port=\(port)"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let started = Date()
        while process.isRunning {
            if let status = try? request(port, "GET", "/status", timeout: 2), status.status == 200,
                ((status.json["value"] as? [String: Any])?["ready"] as? Bool) == true
            {
                // Ours, not another process on the port: ours is still running.
                if process.isRunning { return process }
            }
            guard Date().timeIntervalSince(started) < 60 else {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                throw ClientError("chromedriver did not start on port \(port) in 60 s")
            }
            usleep(100_000)
        }
        process.waitUntilExit()
        return nil
    }

    /// Ends the session and stops chromedriver.
    func quit() {
        _ = try? Self.call(port, "DELETE", "/session/\(session)", nil, timeout: 20)
        process.terminate()
        // chromedriver may ignore SIGTERM: give it a moment, then SIGKILL.
        for _ in 0..<20 where process.isRunning { usleep(50_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: profile)
    }

    /// One command: the response's `value`, or an error carrying WebDriver's message.
    @discardableResult
    static func call(_ port: Int, _ method: String, _ path: String, _ body: Any?, timeout: Double = 30) throws -> Any? {
        let bytes = try body.map { Array(try JSONSerialization.data(withJSONObject: $0)) } ?? (method == "POST" ? Array("{}".utf8) : [])
        let response = try request(port, method, path, body: bytes, timeout: timeout)
        let json = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
        guard response.status == 200 else {
            let value = json?["value"] as? [String: Any]
            throw ClientError(
                "WebDriver \(method) \(path): \(response.status) \(value?["error"] ?? "") \(value?["message"] ?? response.text.prefix(300))"
            )
        }
        return json?["value"]
    }

    @discardableResult
    func command(_ method: String, _ path: String, _ body: Any? = nil) throws -> Any? {
        try Self.call(port, method, "/session/\(session)" + path, body)
    }

    func navigate(_ url: String) throws { try command("POST", "/url", ["url": url]) }

    /// The handle of the window commands go to, and of every open window (a page's
    /// pop-ups too).
    func windowHandle() throws -> String {
        guard let handle = try command("GET", "/window") as? String else { throw ClientError("no window handle") }
        return handle
    }

    func windowHandles() throws -> [String] {
        guard let handles = try command("GET", "/window/handles") as? [String] else { throw ClientError("no window handles") }
        return handles
    }

    /// Sends the next commands to window `handle`.
    func switchToWindow(_ handle: String) throws { try command("POST", "/window", ["handle": handle]) }

    /// Sends the next commands to the frame `css` (an `<iframe>` of the current page), or,
    /// for nil, to the top page.
    func switchToFrame(_ css: String?) throws {
        let id: Any = try css.map { ["element-6066-11e4-a52e-4f735466cecf": try element($0)] } ?? NSNull()
        try command("POST", "/frame", ["id": id])
    }

    /// Presses and releases `key` (a character or a `Key`) wherever the focus is, as a user would.
    func press(_ key: String) throws {
        try perform([
            ["type": "key", "id": "keyboard", "actions": [["type": "keyDown", "value": key], ["type": "keyUp", "value": key]]]
        ])
    }

    /// Turns the wheel over the centre of the element `css` by `deltaX`, `deltaY` pixels.
    func wheel(over css: String, deltaX: Int, deltaY: Int = 0) throws {
        let origin = ["element-6066-11e4-a52e-4f735466cecf": try element(css)]
        try perform([
            [
                "type": "wheel", "id": "wheel",
                "actions": [["type": "scroll", "x": 0, "y": 0, "deltaX": deltaX, "deltaY": deltaY, "origin": origin]],
            ]
        ])
    }

    /// Swipes one finger across the page (touch), from (`fromX`, `y`) to (`toX`, `y`) in
    /// CSS pixels of the viewport, in three moves over 0.3 s, then lifts it.
    func swipe(fromX: Double, toX: Double, y: Double) throws {
        let move = { (x: Double, duration: Int) -> [String: Any] in
            ["type": "pointerMove", "duration": duration, "x": Int(x), "y": Int(y), "origin": "viewport"]
        }
        try perform([
            [
                "type": "pointer", "id": "finger", "parameters": ["pointerType": "touch"],
                "actions": [
                    move(fromX, 0), ["type": "pointerDown", "button": 0], move((2 * fromX + toX) / 3, 100),
                    move((fromX + 2 * toX) / 3, 100), move(toX, 100), ["type": "pointerUp", "button": 0],
                ],
            ]
        ])
    }

    /// Closes the window commands go to, as a user closing it would; switch to another next.
    func closeWindow() throws { try command("DELETE", "/window") }

    /// A new tab (not yet the one commands go to), as a user opening one; its handle.
    func openTab() throws -> String {
        let value = try command("POST", "/window/new", ["type": "tab"]) as? [String: Any]
        guard let handle = value?["handle"] as? String else { throw ClientError("no new tab") }
        return handle
    }

    /// The window a page opened after `known` were open (its pop-up), once there.
    func newWindow(besides known: [String], timeout: Double = 30) throws -> String {
        let started = Date()
        while Date().timeIntervalSince(started) < timeout {
            if let opened = try windowHandles().first(where: { !known.contains($0) }) { return opened }
            usleep(50_000)
        }
        throw ClientError("no window opened in \(timeout) s; the page: \(pageState())")
    }

    /// One Chrome DevTools Protocol command (chromedriver's `goog/cdp/execute`), as
    /// `Network.setBlockedURLs` to make requests fail the way a dropped network does.
    @discardableResult
    func devTools(_ method: String, _ parameters: [String: Any] = [:]) throws -> Any? {
        try command("POST", "/goog/cdp/execute", ["cmd": method, "params": parameters])
    }

    /// Runs `script` (a function body) in the page and returns its JSON-able result.
    func execute(_ script: String, _ arguments: [Any] = []) throws -> Any? {
        try command("POST", "/execute/sync", ["script": script, "args": arguments])
    }

    /// Polls `script` until it returns something other than null/false, or fails after `timeout`.
    @discardableResult
    func wait(for what: String, timeout: Double = 60, _ script: String) throws -> Any {
        let started = Date()
        var last: Any?
        while Date().timeIntervalSince(started) < timeout {
            last = try execute(script)
            if let last, !(last is NSNull), (last as? Bool) != false { return last }
            usleep(50_000)
        }
        throw ClientError(
            "timed out after \(timeout) s waiting for \(what); last answer: \(String(describing: last)); the page: \(pageState())")
    }

    /// What the page shows, for a wait that timed out: the viewer's view and counters
    /// (or OpenSeadragon's test state), its status line, and the resources that failed.
    func pageState() -> String {
        let script = """
            const failed = performance.getEntriesByType('resource')
              .filter((e) => e.responseStatus >= 400 || (e.responseStatus === 0 && e.transferSize === 0 && e.duration > 0))
              .map((e) => e.responseStatus + ' ' + e.name);
            return JSON.stringify({
              view: window.tilerViewer ? tilerViewer.view() : undefined,
              stats: window.tilerViewer ? tilerViewer.stats : undefined,
              osd: window.osdState, status: document.getElementById('status')?.textContent,
              failed: failed.slice(-20), errors: window.tilerErrors || window.pageErrors,
            })
            """
        return ((try? execute(script)) as? String) ?? "(no answer)"
    }

    /// Waits until every loaded tile of the deep-zoom view has faded in (opacity 1), so
    /// that a screenshot shows the tiles and not a blend with what is under them.
    func waitForTilesFadedIn() throws {
        try wait(
            for: "the tiles' fade-in",
            """
            const shown = [...document.querySelectorAll('#plane img.tile.loaded')];
            return shown.length > 0 && shown.every((i) => getComputedStyle(i).opacity === '1')
            """)
    }

    /// The WebDriver reference of the first element matching a CSS selector.
    func element(_ css: String) throws -> String {
        let value = try command("POST", "/element", ["using": "css selector", "value": css]) as? [String: Any]
        guard let id = value?["element-6066-11e4-a52e-4f735466cecf"] as? String else { throw ClientError("no element \(css)") }
        return id
    }

    func click(_ css: String) throws { try command("POST", "/element/\(try element(css))/click") }

    /// Types keys into an element (it gets focus first), as a user would.
    func sendKeys(_ css: String, _ text: String) throws {
        try command("POST", "/element/\(try element(css))/value", ["text": text])
    }

    /// Input actions (pointer, wheel, keys) as in the W3C "Perform Actions" command.
    func perform(_ actions: [[String: Any]]) throws {
        try command("POST", "/actions", ["actions": actions])
        try command("DELETE", "/actions")
    }

    /// A PNG of the viewport.
    func screenshot() throws -> [UInt8] {
        guard let text = try command("GET", "/screenshot") as? String, let data = Data(base64Encoded: text) else {
            throw ClientError("no screenshot")
        }
        return Array(data)
    }
}

/// A TCP port nothing listens on right now, for a process that binds it itself
/// (chromedriver, nginx). (TilerHTTPTests choose theirs from 20000..<30000, TilerCLITests
/// from 19000..<20000.)
func freePort() throws -> Int { try unusedLoopbackPort(in: 30_000..<32_700) }
