import Foundation
import Testing
import TilerCore
import TilerHTTP
import TilerImaging
import TilerTestSupport
@testable import TilerServer

/// The embeddable photo strip and cover flow (issue 38) in Chromium, on pages of another
/// origin than tiler's (a second server on another port): the strip in an `<iframe>`, the
/// cover flow mounted by `/viewer/embed.js`. Every photo is one colour of its own, so the
/// screenshots say which photo is where; the server's access log counts the requests.
@Suite(.serialized) struct EmbedBrowserTests {
    // MARK: - What the tests read of the page

    /// The first widget's state (`tilerEmbed.state()`), once `ready` (a JS expression over
    /// `s`, the state) holds and the scroller has stood still for 0.4 s.
    @discardableResult
    static func rested(_ driver: WebDriver, _ what: String, _ ready: String = "true") throws -> [String: Any] {
        _ = try driver.execute("window.lastScroll = undefined")
        let value = try driver.wait(
            for: what, timeout: 90,
            """
            const s = window.tilerEmbed && tilerEmbed.state()[0];
            if (!s || s.total === null || !(\(ready))) { window.lastScroll = undefined; return false; }
            const now = performance.now(), last = window.lastScroll;
            if (!last || last.left !== s.scrollLeft || s.moving) { window.lastScroll = { left: s.scrollLeft, at: now }; return false; }
            const pending = [...document.querySelectorAll('.tiler-photo img[src]')].filter((i) => !i.classList.contains('loaded'));
            return now - last.at > 400 && pending.length === 0 ? s : false
            """)
        return try #require(value as? [String: Any])
    }

    /// Each photo element on screen: its id and rectangle in the page (or the frame).
    static func photosOnScreen(_ driver: WebDriver) throws -> [(id: String, rect: Rect)] {
        let rows =
            try driver.execute(
                """
                const w = document.documentElement.clientWidth;
                return [...document.querySelectorAll('.tiler-photo[data-id]')].map((a) => {
                  const r = a.getBoundingClientRect(); return [a.dataset.id, r.left, r.top, r.width, r.height];
                }).filter((r) => r[1] + r[3] > 0 && r[1] < w)
                """) as? [[Any]] ?? []
        return rows.compactMap { row in
            guard let id = row[0] as? String, let n = row.dropFirst().map({ $0 as? Double }) as? [Double] else { return nil }
            return (id, Rect(x: n[0], y: n[1], width: n[2], height: n[3]))
        }
    }

    /// The screen's colour around (x, y) of a screenshot.
    static func colour(_ shot: DecodedImage, _ x: Double, _ y: Double) -> [Double] {
        Array(shot.mean(x: Int(x) - 2, y: Int(y) - 2, width: 5, height: 5).prefix(3))
    }

    static func same(_ a: [Double], _ b: [Double]) -> Bool { zip(a, b).allSatisfy { abs($0 - $1) <= 4 } }

    static func screenshot(_ driver: WebDriver, _ name: String) throws -> DecodedImage {
        let png = try driver.screenshot()
        try Data(png).write(to: testArtifacts.appendingPathComponent("embed-\(name).png"))
        return try DecodedImage(encoded: png)
    }

    /// For the host pages: their script errors in `window.pageErrors`.
    static let errorCollector = """

        <script>window.pageErrors = []; addEventListener('error', (e) => pageErrors.push(String(e.message)));
        addEventListener('unhandledrejection', (e) => pageErrors.push(String(e.reason)));</script>
        """

    /// The number in an id `PREFIX-NNN`.
    static func index(_ id: String) -> Int { Int(id.split(separator: "-").last ?? "") ?? -1 }

    /// The listing requests logged from line `start` on: their `offset`s, in order.
    static func listingOffsets(_ log: CollectedLog, from start: Int) -> [Int] {
        LoggedRequest.all(in: log, from: start).filter { $0.path.hasPrefix("/images?") }.compactMap { request in
            URLComponents(string: request.path)?.queryItems?.first { $0.name == "offset" }?.value.flatMap { Int($0) }
        }
    }

    static func thumbnailRequests(_ log: CollectedLog, from start: Int) -> [LoggedRequest] {
        LoggedRequest.all(in: log, from: start).filter { $0.path.contains("/thumbnail.") }
    }

    // MARK: - The strip

    /// The strip in an `<iframe>` on another site: it shows the album's first photos (only
    /// those near the screen are asked for, with one page of the listing), loads more as it
    /// scrolls (the listing's pages one at a time, as they come near), snaps each time so
    /// that the first photo on screen starts whole at the strip's start, and a click opens
    /// the viewer at that photo in the top window.
    @Test(.timeLimit(.minutes(10))) func theStripInAFrameOfAnotherSite() throws {
        let root = try PyramidRoot()
        try ColourPhotos.add(to: root, prefix: "feed", count: 100, album: "feed")
        try ColourPhotos.add(to: root, prefix: "other", count: 5, album: "other", colour: { _ in [250, 0, 0] })
        let log = CollectedLog()
        try withTileServer(root, accessLog: log) { port in
            let site = try StaticSite([
                "/post.html": (
                    Array(
                        """
                        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>A post</title>\(Self.errorCollector)</head>
                        <body style="margin:0;background:#fff"><h1 style="margin:10px;font-size:20px">Our trip</h1>
                        <iframe id="strip" title="Photos of the trip" src="http://127.0.0.1:\(port)/embed/strip?album=feed"
                          style="display:block;border:0;margin:0 20px;width:760px;height:200px"></iframe>
                        </body></html>
                        """.utf8), "text/html; charset=utf-8"
                )
            ])
            defer { site.stop() }
            guard let driver = try startBrowser(width: 900, height: 500) else { return }
            defer { driver.quit() }
            let start = log.linesWithMetadata.count
            try driver.navigate("http://127.0.0.1:\(site.port)/post.html")
            let frame = try driver.rect("#strip")
            try driver.switchToFrame("#strip")

            // ---- The first photos, and only they.
            let first = try Self.rested(driver, "the strip's first photos", "s.total > 0 && s.thumbnailsLoaded > 0")
            #expect(first["total"] as? Int == 100, "\(first)")
            #expect(first["listingPagesLoaded"] as? Int == 1 && Self.listingOffsets(log, from: start) == [0], "\(first)")
            let asked = first["thumbnailsRequested"] as? Int ?? 0
            #expect(asked > 0 && asked < 15 && first["elements"] as? Int ?? 999 < 100, "\(first)")
            #expect(eventually(within: 10) { Self.thumbnailRequests(log, from: start).count == asked })
            let pitch = try #require(first["pitch"] as? Double ?? (first["pitch"] as? Int).map(Double.init))
            try expectWholePhotos(driver, frame: frame, pitch: pitch, name: "strip-first", firstIndex: 0)
            try driver.expectNoScriptErrors()

            // ---- Scrolled by the wheel, a bit at a time to the end: always snapped, the
            // listing fetched a page at a time as it comes near.
            var pagesSeen: [Int] = [1]
            var step = 0
            var previous = 0.0
            while true {
                step += 1
                try driver.wheel(over: ".tiler-scroller", deltaX: 1100)
                let s = try Self.rested(driver, "the strip at rest after wheel turn \(step)", "s.scrollLeft !== \(previous)")
                let left = s["scrollLeft"] as? Double ?? -1
                previous = left
                #expect(left.truncatingRemainder(dividingBy: pitch) == 0, "wheel turn \(step): scrollLeft \(left), pitch \(pitch)")
                pagesSeen.append(Self.listingOffsets(log, from: start).count)
                let end = try #require(
                    driver.execute("const e = document.querySelector('.tiler-scroller'); return e.scrollWidth - e.clientWidth") as? Double)
                if left >= end - 1 || step > 60 { break }
                if step == 3 {
                    try expectWholePhotos(driver, frame: frame, pitch: pitch, name: "strip-scrolled", firstIndex: Int(left / pitch))
                }
            }
            let offsets = Self.listingOffsets(log, from: start)
            #expect(offsets.sorted() == [0, 20, 40, 60, 80] && Set(offsets).count == offsets.count, "\(offsets)")
            // One page at a time: the count grew as the strip went on, not all at once.
            #expect(pagesSeen == pagesSeen.sorted() && pagesSeen.contains { $0 > 1 && $0 < 5 }, "\(pagesSeen)")
            let last = try Self.rested(driver, "the strip at its end")
            #expect(last["elements"] as? Int ?? 999 < 100 && (last["cellsReused"] as? Int ?? 0) > 0, "\(last)")
            let onScreen = try Self.photosOnScreen(driver)
            #expect(onScreen.contains { $0.id == "feed-099" && $0.rect.x + $0.rect.width <= 760 }, "\(onScreen)")
            try expectWholePhotos(
                driver, frame: frame, pitch: pitch, name: "strip-end",
                firstIndex: Int((last["scrollLeft"] as? Double ?? 0) / pitch))
            #expect(!LoggedRequest.all(in: log, from: start).contains { $0.path.contains("other-") }, "another album's photo was asked for")

            // ---- A click opens the viewer at that photo, in the top window.
            let chosen = try #require(onScreen.dropFirst().first?.id)
            try driver.click(".tiler-photo[data-id=\"\(chosen)\"]")
            try driver.switchToFrame(nil)
            try driver.wait(
                for: "the viewer at \(chosen)",
                """
                return location.origin === 'http://127.0.0.1:\(port)' && location.hash === '#/image/\(chosen)'
                  && window.tilerViewer && tilerViewer.view() && tilerViewer.view().id === '\(chosen)' && tilerViewer.view().activeTiles > 0
                """)
            try driver.expectNoScriptErrors()
        }
    }

    /// Every photo on screen in the frame starts whole (none cut at its start), the first
    /// one at the strip's start, and each shows its own colour in a screenshot.
    func expectWholePhotos(
        _ driver: WebDriver, frame: Rect, pitch: Double, name: String, firstIndex: Int,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let photos = try Self.photosOnScreen(driver).sorted { $0.rect.x < $1.rect.x }
        try #require(!photos.isEmpty, sourceLocation: sourceLocation)
        #expect(photos.allSatisfy { $0.rect.x >= 0 }, "a photo cut at its start: \(photos)", sourceLocation: sourceLocation)
        #expect(photos[0].rect.x == 8 && Self.index(photos[0].id) == firstIndex, "\(photos)", sourceLocation: sourceLocation)
        #expect(
            photos.allSatisfy { ($0.rect.x - 8).truncatingRemainder(dividingBy: pitch) == 0 }, "\(photos)", sourceLocation: sourceLocation)
        let shot = try Self.screenshot(driver, name)
        for photo in photos where photo.rect.x + photo.rect.width <= frame.width {
            // Near its top left corner (above the previous button) and at its centre: the
            // whole box is the photo.
            for (x, y) in [
                (photo.rect.x + 4, photo.rect.y + 6), (photo.rect.x + photo.rect.width / 2, photo.rect.y + photo.rect.height / 2),
            ] {
                let seen = Self.colour(shot, frame.x + x, frame.y + y)
                let expected = ColourPhotos.colour(Self.index(photo.id))
                #expect(Self.same(seen, expected), "\(name): \(photo.id) shows \(seen), not \(expected)", sourceLocation: sourceLocation)
            }
        }
    }

    // MARK: - The cover flow

    /// The cover flow mounted by `/viewer/embed.js` on another site's page: arrow keys take
    /// it three times round the album forward and three times back, and it keeps going; at
    /// every step the photo at the centre (`aria-current`) is the one the page control
    /// selects, and the screenshot shows its colour there. Going back to the middle slot
    /// changes no pixel; a tapped dot brings its photo to the centre; Enter opens the viewer.
    @Test(.timeLimit(.minutes(10))) func theCoverFlowGoesRoundWithoutEnd() throws {
        let count = 12
        let root = try PyramidRoot()
        try ColourPhotos.add(to: root, prefix: "flow", count: count, album: "flow")
        let log = CollectedLog()
        try withTileServer(root, accessLog: log) { port in
            let site = try StaticSite([
                "/page.html": (
                    Array(
                        """
                        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>A page</title>\(Self.errorCollector)</head>
                        <body style="margin:0"><main><h1 style="margin:10px;font-size:20px">Photos</h1>
                        <div id="flow" data-tiler-album="flow" data-tiler-mode="coverflow" style="width:800px;height:300px"></div>
                        </main><script src="http://127.0.0.1:\(port)/viewer/embed.js" async></script></body></html>
                        """.utf8), "text/html; charset=utf-8"
                )
            ])
            defer { site.stop() }
            guard let driver = try startBrowser(width: 900, height: 500) else { return }
            defer { driver.quit() }
            try driver.navigate("http://127.0.0.1:\(site.port)/page.html")
            let first = try Self.rested(driver, "the cover flow", "s.total > 0 && s.thumbnailsLoaded > 0")
            #expect(first["total"] as? Int == count && first["elements"] as? Int ?? 999 < 100, "\(first)")
            let dots = try driver.rect("#flow [role=tablist]")

            /// At rest with photo `k` (of the album) at the centre, the page control on it.
            func expectCentre(_ k: Int, _ name: String, screenshot: Bool) throws {
                let i = ((k % count) + count) % count
                let id = ColourPhotos.id("flow", i)
                try Self.rested(
                    driver, "photo \(i) at the centre (\(name))",
                    """
                    s.centre === \(i) && document.querySelector('#flow .tiler-photo[aria-current="true"]')?.dataset.id === '\(id)'
                    """)
                let control =
                    try driver.execute(
                        """
                        const tabs = [...document.querySelectorAll('#flow [role=tablist] [role=tab]')];
                        return [tabs.length, tabs.filter((t) => t.getAttribute('aria-selected') === 'true').map((t) => Number(t.dataset.index)),
                          document.querySelectorAll('#flow [aria-current="true"]').length]
                        """) as? [Any]
                #expect(control?[0] as? Int == 7, "\(name): \(String(describing: control))")
                #expect(control?[1] as? [Int] == [i], "\(name): the page control shows \(String(describing: control)), the centre is \(i)")
                #expect(control?[2] as? Int == 1, "\(name): \(String(describing: control))")
                #expect(try driver.rect("#flow [role=tablist]") == dots, "\(name): the page control changed size")
                if screenshot {
                    let r = try driver.rect("#flow .tiler-photo[aria-current=\"true\"]")
                    let seen = Self.colour(try Self.screenshot(driver, "coverflow-\(name)"), r.x + r.width / 2, r.y + r.height / 2)
                    #expect(
                        Self.same(seen, ColourPhotos.colour(i)),
                        "\(name): the centre shows \(seen), photo \(i) is \(ColourPhotos.colour(i))")
                }
            }
            try expectCentre(0, "start", screenshot: true)
            _ = try driver.execute("document.querySelector('#flow .tiler-photo[aria-current=\"true\"]').focus()")

            // ---- Three times round forward, and three times back.
            for k in 1...(3 * count) {
                try driver.press(WebDriver.Key.arrowRight)
                try expectCentre(k, "forward \(k)", screenshot: k % 5 == 0)
            }
            let forward = try Self.rested(driver, "the flow after going forward")
            #expect((forward["recentres"] as? Int ?? 0) > 0, "\(forward)")
            for k in stride(from: 3 * count - 1, through: 0, by: -1) {
                try driver.press(WebDriver.Key.arrowLeft)
                try expectCentre(k, "back \(k)", screenshot: k % 5 == 0)
            }
            // And on past the first photo, to the last ones: endless both ways.
            for k in 1...3 {
                try driver.press(WebDriver.Key.arrowLeft)
                try expectCentre(-k, "before the first \(k)", screenshot: k == 3)
            }
            let back = try Self.rested(driver, "the flow after going back")
            #expect(
                (back["recentres"] as? Int ?? 0) > (forward["recentres"] as? Int ?? 0) && back["elements"] as? Int ?? 999 < 100, "\(back)")
            try driver.expectNoScriptErrors()

            // ---- Going back to the middle slot moves nothing on screen.
            _ = try driver.execute("tilerEmbed.widgets[0].recentring = false")
            for k in 1...4 {
                try driver.press(WebDriver.Key.arrowRight)
                try expectCentre(k - 3, "away from the middle \(k)", screenshot: false)
            }
            let widget = try driver.rect("#flow .tiler-widget")
            let before = try Self.rested(driver, "the flow off its middle")
            let beforeShot = try Self.screenshot(driver, "coverflow-before-recentre")
            let centreBefore = try driver.rect("#flow .tiler-photo[aria-current=\"true\"]")
            _ = try driver.execute(
                """
                window.recentred = false; const w = tilerEmbed.widgets[0]; w.recentring = true; w.recentre();
                requestAnimationFrame(() => requestAnimationFrame(() => { window.recentred = true; }))
                """)
            try driver.wait(for: "two frames after re-centring", "return window.recentred")
            let after = try #require(driver.execute("return tilerEmbed.state()[0]") as? [String: Any])
            let afterShot = try Self.screenshot(driver, "coverflow-after-recentre")
            let pitch = before["pitch"] as? Double ?? Double(before["pitch"] as? Int ?? 0)
            #expect((after["recentres"] as? Int ?? 0) == (before["recentres"] as? Int ?? 0) + 1, "\(before) → \(after)")
            #expect(
                abs((before["scrollLeft"] as? Double ?? 0) - (after["scrollLeft"] as? Double ?? 0)) == 4 * pitch,
                "the scroller moved by \(before["scrollLeft"] ?? "?") → \(after["scrollLeft"] ?? "?"), not 4 slots")
            #expect(try driver.rect("#flow .tiler-photo[aria-current=\"true\"]") == centreBefore)
            var differing = 0
            for y in stride(from: Int(widget.y) + 2, to: Int(widget.y + widget.height) - 2, by: 6) {
                for x in stride(from: Int(widget.x) + 2, to: Int(widget.x + widget.width) - 2, by: 6) {
                    let a = beforeShot.mean(x: x, y: y, width: 1, height: 1), b = afterShot.mean(x: x, y: y, width: 1, height: 1)
                    if zip(a, b).contains(where: { abs($0 - $1) > 2 }) { differing += 1 }
                }
            }
            #expect(differing == 0, "\(differing) sampled pixels changed when the flow went back to its middle")

            // ---- A tapped dot brings its photo to the centre.
            let centre = try #require(after["centre"] as? Int)
            let target = try #require(
                driver.execute(
                    """
                    const tabs = [...document.querySelectorAll('#flow [role=tab]')].map((t) => Number(t.dataset.index));
                    return tabs.find((i) => Math.abs(i - \(centre)) >= 2) ?? null
                    """) as? Int)
            try driver.click("#flow [role=tab][data-index=\"\(target)\"]")
            try expectCentre(target, "dot \(target)", screenshot: true)
            #expect(
                try driver.execute("return document.activeElement.getAttribute('role') === 'tab' && document.activeElement.dataset.index")
                    as? String == "\(target)")

            // ---- A finger's swipe to the left brings later photos to the centre, snapped,
            // the page control following.
            let swiped = try Self.rested(driver, "the flow before the swipe")
            try driver.swipe(fromX: widget.x + widget.width * 0.7, toX: widget.x + widget.width * 0.3, y: widget.y + widget.height / 2)
            let landed = try Self.rested(driver, "the flow after the swipe", "s.position > \(swiped["position"] as? Int ?? 0)")
            try expectCentre(try #require(landed["centre"] as? Int), "after the swipe", screenshot: true)
            #expect((landed["scrollLeft"] as? Double ?? 0).truncatingRemainder(dividingBy: pitch) == 0, "\(landed)")

            // ---- Enter on the centre photo opens the viewer at it, in this window.
            _ = try driver.execute("document.querySelector('#flow .tiler-photo[aria-current=\"true\"]').focus()")
            let opened = try #require(driver.execute("return tilerEmbed.state()[0].centre") as? Int)
            try driver.press(WebDriver.Key.enter)
            let id = ColourPhotos.id("flow", opened)
            try driver.wait(
                for: "the viewer at \(id)",
                """
                return location.origin === 'http://127.0.0.1:\(port)' && location.hash === '#/image/\(id)'
                  && window.tilerViewer && tilerViewer.view() && tilerViewer.view().id === '\(id)'
                """)
        }
    }

    // MARK: - 1,000 photos

    /// With 1,000 photos (every image: no album), both widgets keep fewer than 100
    /// elements, at the start and at the far end (the strip at its last photo, the cover
    /// flow one step back from the first, at the last), asking for only the listing pages
    /// they show; the cover flow's page control has the size it has for five photos.
    @Test(.timeLimit(.minutes(10))) func aThousandPhotosKeepFewElements() throws {
        let root = try AlbumScaleTests.makeRoot()
        let five = try ViewerPyramids.port()
        guard let driver = try startBrowser(width: 900, height: 300) else { return }
        defer { driver.quit() }
        let log = CollectedLog()
        try withTileServer(root, accessLog: log) { port in
            // ---- The strip, to its end.
            var start = log.linesWithMetadata.count
            try driver.navigate("http://127.0.0.1:\(port)/embed/strip")
            let strip = try Self.rested(driver, "the strip of 1,000", "s.total > 0 && s.thumbnailsLoaded > 0")
            #expect(strip["total"] as? Int == 1000 && strip["elements"] as? Int ?? 999 < 100, "\(strip)")
            // A finger's swipe: on by whole photos.
            try driver.swipe(fromX: 700, toX: 250, y: 150)
            let swiped = try Self.rested(driver, "the strip after a swipe", "s.scrollLeft > 0")
            let pitch = swiped["pitch"] as? Double ?? Double(swiped["pitch"] as? Int ?? 0)
            #expect(pitch > 0 && (swiped["scrollLeft"] as? Double ?? 0).truncatingRemainder(dividingBy: pitch) == 0, "\(swiped)")
            _ = try driver.execute("document.querySelector('.tiler-photo[tabindex=\"0\"]').focus()")
            try driver.press(WebDriver.Key.end)
            let end = try Self.rested(driver, "the strip's last photo", "s.current === 999")
            #expect(end["elements"] as? Int ?? 999 < 100 && (end["thumbnailsRequested"] as? Int ?? 999) < 60, "\(end)")
            #expect(Set(Self.listingOffsets(log, from: start)).isSubset(of: [0, 960, 980]), "\(Self.listingOffsets(log, from: start))")
            let last = try driver.rect(".tiler-photo[data-id=\"img-999\"]")
            let seen = Self.colour(try Self.screenshot(driver, "strip-1000-end"), last.x + last.width / 2, last.y + last.height / 2)
            #expect(Self.same(seen, AlbumScaleTests.colour(999)), "the last photo shows \(seen)")
            #expect(try driver.execute("return document.activeElement.dataset.id") as? String == "img-999")

            // ---- The cover flow, one step back from the first photo.
            start = log.linesWithMetadata.count
            try driver.navigate("http://127.0.0.1:\(port)/embed/coverflow")
            let flow = try Self.rested(driver, "the cover flow of 1,000", "s.total > 0 && s.thumbnailsLoaded > 0")
            #expect(flow["total"] as? Int == 1000 && flow["elements"] as? Int ?? 999 < 100, "\(flow)")
            let dots = try driver.rect("[role=tablist]")
            _ = try driver.execute("document.querySelector('.tiler-photo[aria-current=\"true\"]').focus()")
            try driver.press(WebDriver.Key.arrowLeft)
            let wrapped = try Self.rested(driver, "the last photo at the centre", "s.centre === 999")
            #expect(wrapped["elements"] as? Int ?? 999 < 100, "\(wrapped)")
            #expect(Set(Self.listingOffsets(log, from: start)).isSubset(of: [0, 980]), "\(Self.listingOffsets(log, from: start))")
            let centre = try driver.rect(".tiler-photo[aria-current=\"true\"]")
            let shown = Self.colour(
                try Self.screenshot(driver, "coverflow-1000-last"), centre.x + centre.width / 2, centre.y + centre.height / 2)
            #expect(Self.same(shown, AlbumScaleTests.colour(999)), "the centre shows \(shown)")
            #expect(try driver.rect("[role=tablist]") == dots)
            #expect(try driver.execute("return document.querySelectorAll('[role=tab]').length") as? Int == 7)

            // ---- Five photos: five dots, in a page control of the same size.
            try driver.navigate("http://127.0.0.1:\(five)/embed/coverflow")
            try Self.rested(driver, "the cover flow of five", "s.total === 5 && s.thumbnailsLoaded > 0")
            #expect(try driver.execute("return document.querySelectorAll('[role=tab]').length") as? Int == 5)
            #expect(try driver.rect("[role=tablist]") == dots)
            try driver.expectNoScriptErrors()
        }
    }

    // MARK: - The README's page

    /// The README's host page (between `<!-- tested: embed-page -->` and its end), served
    /// from another origin with only the server's address replaced: `embed.js` mounts a
    /// strip and a cover flow of the album, every photo on screen loads, the cover flow's
    /// photos open in a new tab, and the page logs no error or warning.
    @Test(.timeLimit(.minutes(10))) func theReadmesEmbedPageShowsBothWidgets() throws {
        let root = try PyramidRoot()
        try ColourPhotos.add(to: root, prefix: "holiday", count: 8, album: "Holidays")
        try ColourPhotos.add(to: root, prefix: "work", count: 3, album: "Work")
        try withTileServer(root) { port in
            let page = try ReadmePagesTests.instrumented(
                try ReadmePagesTests.readmePage("embed-page"), [ReadmePagesTests.readmeServer: "http://127.0.0.1:\(port)"])
            let site = try StaticSite(["/holidays.html": (Array(page.utf8), "text/html; charset=utf-8")])
            defer { site.stop() }
            guard let driver = try startBrowser(width: 900, height: 700) else { return }
            defer { driver.quit() }
            try driver.navigate("http://127.0.0.1:\(site.port)/holidays.html")
            let states = try #require(
                driver.wait(
                    for: "both widgets' photos",
                    """
                    const states = window.tilerEmbed ? tilerEmbed.state() : [];
                    const pending = [...document.querySelectorAll('.tiler-photo img[src]')].filter((i) => !i.classList.contains('loaded'));
                    return states.length === 2 && states.every((s) => s.total === 8 && s.thumbnailsLoaded > 0) && pending.length === 0
                      ? states : null
                    """) as? [[String: Any]])
            #expect(states.map { $0["mode"] as? String } == ["strip", "coverflow"], "\(states)")
            let targets = try driver.execute(
                "return [...document.querySelectorAll('[data-tiler-album]')].map((e) => e.querySelector('.tiler-photo[href]').target)")
            #expect(targets as? [String] == ["_top", "_blank"])
            try driver.expectNoScriptErrors()
        }
    }

    // MARK: - Private images

    /// With private images, the embed page's `?token=` opens them: the strip shows them
    /// (every request it makes carries the token, so none is refused), and a photo opens
    /// the viewer with the token, which shows the private image's tiles. Without it, only
    /// the public photos. No token reaches the access log.
    @Test(.timeLimit(.minutes(10))) func aTokenOnTheEmbedAddressIsCarried() throws {
        let setup = try AccessTests.Setup()
        defer { setup.scratch.cleanUp() }
        let root = try PyramidRoot()
        try ColourPhotos.add(to: root, prefix: "public", count: 2, album: "trip")
        try ColourPhotos.add(to: root, prefix: "secret", count: 3, album: "trip")
        let token = try setup.keys.tokens([TokenSpec(alg: "RS256", kid: "idp", claims: AccessTests.Setup.claims(["secret-*"]))])[0]
        let log = CollectedLog()
        try withTileServer(root, access: try setup.access(), accessLog: log) { port in
            let site = try StaticSite([
                "/post.html": (
                    Array(
                        """
                        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>A post</title>\(Self.errorCollector)</head><body>
                        <iframe id="strip" title="Photos" src="http://127.0.0.1:\(port)/embed/strip?album=trip&token=\(token)"
                          style="border:0;width:760px;height:200px"></iframe></body></html>
                        """.utf8), "text/html; charset=utf-8"
                )
            ])
            defer { site.stop() }
            guard let driver = try startBrowser(width: 900, height: 400) else { return }
            defer { driver.quit() }
            let start = log.linesWithMetadata.count
            try driver.navigate("http://127.0.0.1:\(site.port)/post.html")
            try driver.switchToFrame("#strip")
            let s = try Self.rested(driver, "the private photos", "s.total > 0 && s.thumbnailsLoaded === s.total")
            #expect(s["total"] as? Int == 5, "\(s)")
            let requests = LoggedRequest.all(in: log, from: start)
            #expect(requests.filter { $0.path.contains("/thumbnail.") }.count == 5, "\(requests)")
            #expect(requests.allSatisfy { $0.status == 200 || $0.status == 304 }, "\(requests)")
            let href = try #require(driver.execute("return document.querySelector('.tiler-photo[data-id=\"secret-000\"]').href") as? String)
            #expect(href == "http://127.0.0.1:\(port)/?token=\(token)#/image/secret-000", "\(href.prefix(60))")
            try driver.click(".tiler-photo[data-id=\"secret-000\"]")
            try driver.switchToFrame(nil)
            try driver.wait(
                for: "the viewer at the private photo",
                "const v = window.tilerViewer && tilerViewer.view(); return v && v.id === 'secret-000' && v.pending === 0 && v.activeTiles > 0"
            )
            #expect(try driver.execute("return tilerViewer.stats.tileErrors") as? Int == 0)

            // Without the token: the album holds the public photos only.
            try driver.navigate("http://127.0.0.1:\(port)/embed/coverflow?album=trip")
            let bare = try Self.rested(driver, "the public photos", "s.total > 0 && s.thumbnailsLoaded > 0")
            #expect(bare["total"] as? Int == 2, "\(bare)")
            try driver.expectNoScriptErrors()
        }
        let signature = String(token.split(separator: ".")[2])
        #expect(!log.linesWithMetadata.isEmpty && !log.linesWithMetadata.contains { $0.contains(signature) }, "a token in the access log")
    }

    // MARK: - Behind a proxy

    /// Behind nginx under a path prefix, with `--base-url` naming it: the embed page and a
    /// host page's `embed.js` ask for everything under the prefix (no 404 in nginx's log),
    /// and the photos link to the viewer there.
    @Test(.timeLimit(.minutes(10))) func underAPathPrefix() throws {
        let root = try PyramidRoot()
        try ColourPhotos.add(to: root, prefix: "feed", count: 6, album: "feed")
        let proxyPort = try freePort()
        let base = "http://127.0.0.1:\(proxyPort)/some/prefix"
        try withTileServer(root, { $0.baseURL = try? BaseURL(parsing: base) }) { port in
            let pages = try temporaryFolder("embed-host")
            defer { try? FileManager.default.removeItem(at: pages) }
            try """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><title>Host</title><link rel="icon" href="data:,">\(Self.errorCollector)</head><body>
            <div data-tiler-album="feed" data-tiler-mode="coverflow" style="width:700px;height:260px"></div>
            <script src="\(base)/viewer/embed.js"></script></body></html>
            """.write(to: pages.appendingPathComponent("index.html"), atomically: true, encoding: .utf8)
            let nginx = try Nginx(
                port: proxyPort,
                locations: """
                            location /some/prefix/ {
                                proxy_pass http://127.0.0.1:\(port)/;
                                proxy_http_version 1.1;
                                proxy_set_header Connection "";
                            }
                            location /host/ { alias \(pages.path)/; }
                    """)
            defer { nginx.stop() }
            guard let driver = try startBrowser(width: 900, height: 400) else { return }
            defer { driver.quit() }
            for page in ["\(base)/embed/strip?album=feed", "http://127.0.0.1:\(proxyPort)/host/"] {
                try driver.navigate(page)
                let s = try Self.rested(driver, "the photos through the proxy", "s.total === 6 && s.thumbnailsLoaded > 0")
                #expect((s["thumbnailsLoaded"] as? Int ?? 0) == (s["thumbnailsRequested"] as? Int ?? -1), "\(s)")
                let href = try driver.execute("return document.querySelector('.tiler-photo[data-id]').href") as? String
                #expect(href?.hasPrefix(base + "/#/image/feed-") == true, "\(String(describing: href))")
                try driver.expectNoScriptErrors()
            }
            let requests = try nginx.requests()
            #expect(!requests.isEmpty && requests.allSatisfy { $0.status < 400 }, "\(requests.filter { $0.status >= 400 })")
            #expect(
                requests.contains { $0.uri.hasPrefix("/some/prefix/images?") }
                    && requests.contains { $0.uri.hasPrefix("/some/prefix/viewer/embed.css") })
        }
    }
}
