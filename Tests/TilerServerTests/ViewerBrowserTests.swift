import Foundation
import Testing
import TilerCore
import TilerImaging
@testable import TilerServer

/// The viewer in Debian's headless chromium, driven through chromedriver: the album's
/// lazy thumbnails and page control, the deep-zoom view's tiles, zooming to a finer
/// level, input, deep links, wrap, tile reuse, no script errors, and a screenshot whose
/// pixels match the source image.
@Suite(.serialized) struct ViewerBrowserTests {
    static let width = 900, height = 700

    func startBrowser() throws -> WebDriver? {
        guard let chromium = findExecutable(["chromium", "chromium-browser", "google-chrome"]),
              let chromedriver = findExecutable(["chromedriver", "/usr/lib/chromium/chromedriver"]) else {
            Issue.record("chromium and chromedriver are missing: run scripts/install-deps test (apt: chromium chromium-driver)")
            return nil
        }
        return try WebDriver(chromedriver: chromedriver, chromium: chromium, width: Self.width, height: Self.height)
    }

    func expectNoScriptErrors(_ driver: WebDriver, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let errors = try driver.execute("return window.tilerErrors") as? [Any]
        #expect(errors != nil && errors!.isEmpty, "script errors: \(String(describing: errors))", sourceLocation: sourceLocation)
    }

    @Test(.timeLimit(.minutes(3)), arguments: RootKind.allCases) func albumAndDeepZoom(_ kind: RootKind) throws {
        let port = try ViewerPyramids.port(kind)
        guard let driver = try startBrowser() else { return }
        defer { driver.quit() }
        let base = "http://127.0.0.1:\(port)/"

        // ---- Album: five pyramids, thumbnails only near the screen, page control in sync.
        try driver.navigate(base)
        try driver.wait(for: "the album", "return window.tilerViewer && tilerViewer.album().total === 5 && tilerViewer.stats.thumbnailsLoaded >= 1")
        // Every thumbnail the page asked for so far (those near the screen) has loaded,
        // and they are not all five.
        let requested = try #require(driver.wait(for: "the thumbnails near the screen", """
            const asked = document.querySelectorAll('.thumb img[src]');
            return asked.length >= 1 && tilerViewer.stats.thumbnailsLoaded === asked.length ? asked.length : null
            """) as? Int)
        let early = try #require(driver.execute("return tilerViewer.stats.thumbnailsLoaded") as? Int)
        #expect(early == requested && early < 5, "thumbnails should load lazily, \(early) of 5 loaded at first")
        #expect(try driver.execute("return document.getElementById('page-number').textContent") as? String == "1 / 5")

        try driver.sendKeys("#strip", WebDriver.Key.arrowRight + WebDriver.Key.arrowRight)
        try driver.wait(for: "page 3 after two arrow keys", """
            return tilerViewer.album().current === 2 && document.getElementById('page-number').textContent === '3 / 5'
                && document.querySelectorAll('#dots button')[2].getAttribute('aria-selected') === 'true'
            """)
        try driver.click("#dots button:nth-child(5)")  // tap the last dot
        try driver.wait(for: "page 5 after tapping its dot", "return tilerViewer.album().current === 4 && document.getElementById('card-4').classList.contains('current')")
        try driver.wait(for: "every thumbnail once the strip reached the end", "return tilerViewer.stats.thumbnailsLoaded === 5")
        // A swipe is a scroll of the strip: the page control follows it.
        _ = try driver.execute("const s = document.getElementById('strip'); s.style.scrollBehavior = 'auto'; const c = document.getElementById('card-1'); s.scrollLeft = c.offsetLeft - (s.clientWidth - c.offsetWidth) / 2; return 1")
        try driver.wait(for: "page 2 after scrolling the strip", "return tilerViewer.album().current === 1 && document.getElementById('page-number').textContent === '2 / 5'")
        try expectNoScriptErrors(driver)

        // ---- Deep zoom: opening an image from the album shows the thumbnail and loads tiles.
        _ = try driver.execute("tilerViewer.goToCard(0, false); return 1")
        try driver.click("#card-0 a")
        try driver.wait(for: "the deep-zoom view of the validator image", "return location.hash.startsWith('#/image/\(ValidatorImage.id)') && !document.getElementById('viewer').hidden")
        let firstLevel = try #require(driver.wait(for: "first tiles", "const v = tilerViewer.view(); return v && v.level !== null && v.pending === 0 && tilerViewer.stats.tilesLoaded > 0 ? v.level : null") as? Int)
        #expect(try driver.execute("return document.querySelector('#plane img.backdrop').complete") as? Bool == true)

        // Zooming in with the keyboard loads a finer level.
        for _ in 0..<3 { try driver.sendKeys("#stage", "+") }
        try driver.wait(for: "a finer level", "const v = tilerViewer.view(); return v.level > \(firstLevel) && v.pending === 0 && tilerViewer.stats.levelsLoaded.includes(v.level)")
        // The wheel zooms too, the mouse drags, a double-click zooms in.
        let before = try #require(driver.execute("return tilerViewer.view()") as? [String: Any])
        try driver.perform([["type": "wheel", "id": "wheel", "actions": [
            ["type": "scroll", "x": 450, "y": 350, "deltaX": 0, "deltaY": 240, "duration": 0]]]])
        let afterWheel = try #require(driver.execute("return tilerViewer.view()") as? [String: Any])
        #expect((afterWheel["scale"] as! Double) < (before["scale"] as! Double), "a wheel down-scroll zooms out")
        try driver.perform([["type": "pointer", "id": "mouse", "parameters": ["pointerType": "mouse"], "actions": [
            ["type": "pointerMove", "duration": 0, "x": 500, "y": 400], ["type": "pointerDown", "button": 0],
            ["type": "pointerMove", "duration": 150, "x": 400, "y": 400], ["type": "pointerUp", "button": 0]]]])
        let afterDrag = try #require(driver.execute("return tilerViewer.view()") as? [String: Any])
        let moved = ((afterDrag["x"] as! Double) - (afterWheel["x"] as! Double)) * (afterWheel["scale"] as! Double)
        #expect(abs(moved - 100) < 3, "dragging 100 px left moves the view 100 px right (moved \(moved))")
        try driver.perform([["type": "pointer", "id": "mouse", "parameters": ["pointerType": "mouse"], "actions": [
            ["type": "pointerMove", "duration": 0, "x": 450, "y": 350],
            ["type": "pointerDown", "button": 0], ["type": "pointerUp", "button": 0],
            ["type": "pointerDown", "button": 0], ["type": "pointerUp", "button": 0]]]])
        let afterDouble = try #require(driver.execute("return tilerViewer.view()") as? [String: Any])
        #expect(abs((afterDouble["scale"] as! Double) / (afterDrag["scale"] as! Double) - 2) < 0.01, "a double-click doubles the scale")
        #expect(try driver.execute("return tilerViewer.stats.tileErrors") as? Int == 0)
        try expectNoScriptErrors(driver)

        // ---- A deep link restores the view, and the screenshot shows the image's pixels.
        try driver.navigate("about:blank")
        try driver.navigate(base + "#/image/\(ValidatorImage.id)?x=550&y=350&z=2")
        let view = try #require(driver.wait(for: "the linked view at full resolution", """
            const v = tilerViewer.view(); return v && v.level === 2 && v.pending === 0 && v.activeTiles > 0 ? v : null
            """) as? [String: Any])
        #expect(view["x"] as? Double == 550 && view["y"] as? Double == 350 && view["scale"] as? Double == 2)
        try driver.waitForTilesFadedIn()
        let stage = try #require(driver.execute("const r = document.getElementById('stage').getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]") as? [Double])
        let png = try driver.screenshot()
        try Data(png).write(to: testArtifacts.appendingPathComponent("viewer-deep-zoom-\(kind).png"))
        let shot = try DecodedImage(encoded: png)
        let source = try DecodedImage(encoded: Array(try Data(contentsOf: URL(fileURLWithPath: ValidatorImage.path))))
        let cx = Int(stage[0].rounded(.down)), cy = Int(stage[1].rounded(.down))
        // At scale 2, image pixel (550 + d, 350) is on screen at (cx + 2d, cy). Near the
        // square edge at x = 600 only sharp tiles (not the stretched thumbnail) match.
        for d in [0, -20, 24, 48, 52, 80] {
            let got = shot.mean(x: cx + 2 * d - 1, y: cy - 1, width: 3, height: 3).prefix(3)
            let want = source.mean(x: 550 + d, y: 350, width: 1, height: 1).prefix(3)
            #expect(zip(got, want).allSatisfy { abs($0 - $1) <= 12 }, "screen (\(cx + 2 * d), \(cy)) is \(Array(got)), the image at (\(550 + d), 350) is \(Array(want))")
        }
        try expectNoScriptErrors(driver)

        // ---- wrap=x: a panorama repeats sideways without end.
        try driver.navigate(base + "#/image/panorama?x=100&y=300&z=0.5&wrap=x")
        let wrapped = try #require(driver.wait(for: "the panorama", "const v = tilerViewer.view(); return v && v.level !== null && v.pending === 0 && v.activeTiles > 0 ? v : null") as? [String: Any])
        #expect(wrapped["wrap"] as? Bool == true)
        #expect((wrapped["tileXs"] as? [Int] ?? []).contains { $0 < 0 }, "tiles of the repetition left of x = 0 are shown")
        // Panning sideways: the centre stays inside one period, and tiles that left the
        // screen go back to the pool and are reused for the ones coming in.
        let reusedBefore = try #require(driver.execute("return tilerViewer.stats.tileElementsReused") as? Int)
        for _ in 0..<3 {
            try driver.sendKeys("#stage", String(repeating: WebDriver.Key.arrowLeft, count: 4))
            try driver.wait(for: "tiles after panning", "const v = tilerViewer.view(); return v.pending === 0")
        }
        let far = try #require(driver.wait(for: "panning past the start", "const v = tilerViewer.view(); return v.pending === 0 ? v : null") as? [String: Any])
        let x = far["x"] as! Double
        #expect(x >= 0 && x < 2400, "the centre stays inside one period (x = \(x))")
        let stats = try #require(driver.execute("return tilerViewer.stats") as? [String: Any])
        #expect((stats["tileElementsReused"] as? Int ?? 0) > reusedBefore, "tile elements are reused: \(stats)")
        #expect((stats["tileErrors"] as? Int) == 0)
        try expectNoScriptErrors(driver)

        // ---- An unknown image says so, without a script error.
        try driver.navigate(base + "#/image/no-such-image")
        try driver.wait(for: "the not-found message", "return document.getElementById('status').textContent.includes('no-such-image')")
        try expectNoScriptErrors(driver)
    }
}
