import Foundation
import Testing
import TilerCore
import TilerImaging
@testable import TilerServer
import TilerTestSupport

/// The viewer as a lightbox (issue 34), in Chromium: ← and → page between photos while a
/// photo fits the window and pan once it is zoomed in; zoom stops at `--viewer-max-zoom`
/// (200 % by default); `?` lists the keys; every button says what it does on hover; the
/// details panel, the slideshow (around the album), the download of the IIIF full image,
/// the link to the view; a missing image after a valid one shows nothing of it; album
/// captions in full on hover.
@Suite(.serialized) struct LightboxTests {
    @Test(.timeLimit(.minutes(10))) func theViewerIsALightbox() throws {
        let root = try PyramidRoot()
        try root.cut(try root.solidImage("a", width: 600, height: 400, rgb: (220, 30, 30)), as: "img-a")
        try root.cut(try root.solidImage("b", width: 500, height: 500, rgb: (30, 200, 30)), as: "img-b")
        try root.cut(try root.solidImage("c", width: 400, height: 300, rgb: (30, 30, 220)), as: "img-c")
        // Last in natural order, first by bytes: the viewer must learn its place from the
        // server, not guess it from the id.
        try root.cut(try root.solidImage("d", width: 300, height: 300, rgb: (200, 200, 30)), as: "Img-d")
        guard let driver = try startBrowser() else { return }
        defer { driver.quit() }
        try withTileServer(root) { port throws in
            let base = "http://127.0.0.1:\(port)/"
            func view() throws -> [String: Any] { try #require(driver.execute("return tilerViewer.view()") as? [String: Any]) }
            func waitFitted(_ id: String) throws {
                try driver.wait(
                    for: "\(id), fitted and drawn",
                    """
                    const v = tilerViewer.view(); return v && v.id === '\(id)' && v.index !== null && v.pending === 0
                        && location.hash.startsWith('#/image/\(id)')
                    """)
            }
            try driver.navigate(base + "#/image/Img-d")
            try waitFitted("Img-d")
            try driver.wait(
                for: "its place in the album",
                "return document.getElementById('viewer-position').textContent === '4 / 4' && tilerViewer.view().index === 3")
            try driver.navigate(base + "#/image/img-a")
            try waitFitted("img-a")

            // Every control says what it does, and its key, on hover; none lies under another
            // (the navigator) where a click would miss it.
            let untitled = try driver.execute(
                "return [...document.querySelectorAll('#viewer .button')].filter((b) => !b.title).map((b) => b.id)")
            #expect((untitled as? [String]) == [], "buttons without a tooltip: \(String(describing: untitled))")
            let covered = try driver.execute(
                """
                return [...document.querySelectorAll('#viewer .controls .button')].filter((b) => !b.hidden).filter((b) => {
                  const r = b.getBoundingClientRect();
                  return document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2)?.closest('.button') !== b;
                }).map((b) => b.id)
                """)
            #expect((covered as? [String]) == [], "buttons under something else: \(String(describing: covered))")

            // At the fitted size ← and → page (as Page Up and Page Down do).
            try driver.sendKeys("#stage", WebDriver.Key.arrowRight)
            try waitFitted("img-b")
            try driver.sendKeys("#stage", WebDriver.Key.arrowLeft)
            try waitFitted("img-a")

            // Zoom stops at 200 % of the image's pixels, and there → pans instead of paging.
            for _ in 0..<8 { try driver.sendKeys("#stage", "+") }
            try driver.wait(for: "the zoom cap", "const v = tilerViewer.view(); return v.pending === 0 && v.scale >= 1.999")
            let capped = try view()
            #expect(capped["scale"] as? Double == 2, "capped at 2: \(capped)")
            #expect(try driver.execute("return tilerViewer.maxZoom") as? Double == 2)
            let x = try #require(try view()["x"] as? Double)
            try driver.sendKeys("#stage", WebDriver.Key.arrowRight)
            try driver.wait(for: "a pan to the right", "return tilerViewer.view().x > \(x)")
            #expect(try view()["id"] as? String == "img-a", "zoomed in, → pans")
            let zoomedPNG = try driver.screenshot()
            try Data(zoomedPNG).write(to: testArtifacts.appendingPathComponent("lightbox-zoomed.png"))
            let zoomed = try DecodedImage(encoded: zoomedPNG)
            let stage = try driver.rect("#stage")
            let middle = zoomed.mean(x: Int(stage.x + stage.width / 2), y: Int(stage.y + stage.height / 2), width: 3, height: 3)
            #expect(middle[0] > 200 && middle[1] < 50 && middle[2] < 50, "the zoomed photo on screen: \(Array(middle.prefix(3)))")
            try driver.sendKeys("#stage", "0")
            try waitFitted("img-a")

            // ? lists the keys; Esc closes the list and stays on the photo.
            try driver.sendKeys("#stage", "?")
            try driver.wait(for: "the keys", "return !document.getElementById('help').hidden")
            try Data(try driver.screenshot()).write(to: testArtifacts.appendingPathComponent("lightbox-keys.png"))
            #expect(
                (try driver.execute("return document.getElementById('help').textContent") as? String)?.contains("slideshow")
                    == true)
            try driver.sendKeys("#stage", WebDriver.Key.escape)
            try driver.wait(for: "the keys closed", "return document.getElementById('help').hidden")
            #expect(try view()["id"] as? String == "img-a")

            // I: about this image (no metadata here: its id and size).
            try driver.sendKeys("#stage", "i")
            try driver.wait(
                for: "the details",
                """
                return !document.getElementById('details').hidden && document.getElementById('details-title').textContent === 'img-a'
                    && document.getElementById('details-list').textContent.includes('600 × 400 pixels')
                """)
            try Data(try driver.screenshot()).write(to: testArtifacts.appendingPathComponent("lightbox-details.png"))
            try driver.sendKeys("#stage", "i")
            try driver.wait(for: "the details closed", "return document.getElementById('details').hidden")

            // The download: the IIIF full image, as large as the server gives it.
            let download = try driver.execute(
                """
                const a = document.getElementById('download');
                return fetch(a.href).then((r) => [a.hidden, new URL(a.href).pathname, r.status, r.headers.get('content-type')].join(' '))
                """)
            #expect(download as? String == "false /iiif/3/img-a/full/max/0/default.jpg 200 image/jpeg", "\(String(describing: download))")

            // The link to this view.
            try driver.click("#share")
            try driver.wait(
                for: "the link",
                """
                return document.getElementById('share').dataset.link === location.href && location.hash.includes('z=')
                    && /Link copied|Copy this link/.test(document.getElementById('status').textContent)
                """)

            // The slideshow goes round the album (after the last, the first); a key stops it.
            try driver.click("#slideshow")
            #expect(try driver.execute("return document.getElementById('slideshow').getAttribute('aria-pressed')") as? String == "true")
            try driver.click("#slideshow")
            #expect(try driver.execute("return tilerViewer.slideshowRunning()") as? Bool == false)
            _ = try driver.execute("tilerViewer.slideshow(0.4); return 1")
            try waitFitted("img-b")
            try waitFitted("img-c")
            try waitFitted("Img-d")
            try waitFitted("img-a")
            try driver.sendKeys("#stage", "0")
            #expect(try driver.execute("return tilerViewer.slideshowRunning()") as? Bool == false)

            // A missing image after a valid one: nothing of the last one stays.
            _ = try driver.execute("location.hash = '#/image/no-such-image'; return 1")
            try driver.wait(
                for: "the missing image",
                """
                const n = document.getElementById('navigator');
                return document.getElementById('status').textContent.includes('no image named')
                    && n.hidden && !document.getElementById('navigator-image').hasAttribute('src')
                    && document.getElementById('viewer-position').textContent === ''
                    && document.getElementById('download').hidden && document.title === 'tiler'
                    && tilerViewer.view() === null && document.querySelectorAll('#plane img.tile').length === 0
                """)
            let missing = try DecodedImage(encoded: try driver.screenshot())
            let nav = missing.mean(x: Int(stage.x + stage.width) - 60, y: Int(stage.y + stage.height) - 50, width: 3, height: 3)
            #expect(nav[0] < 80, "no overview of the last image: \(Array(nav.prefix(3)))")

            // The album: each caption in full on hover.
            try driver.navigate(base)
            try driver.wait(
                for: "the album", "return tilerViewer.album().total === 4 && document.querySelectorAll('.cell[title]').length === 4")
            let titles = try driver.execute("return [...document.querySelectorAll('.cell')].map((c) => c.title).sort()")
            #expect(titles as? [String] == ["Img-d", "img-a", "img-b", "img-c"])
            try driver.expectNoScriptErrors()
        }

        // --viewer-max-zoom reaches the page.
        try withTileServer(root, { $0.viewerMaxZoomPercent = 400 }) { port throws in
            try driver.navigate("http://127.0.0.1:\(port)/#/image/img-b")
            try driver.wait(for: "the viewer", "return window.tilerViewer && tilerViewer.view() !== null")
            #expect(try driver.execute("return tilerViewer.maxZoom") as? Double == 4)
            for _ in 0..<12 { try driver.sendKeys("#stage", "+") }
            try driver.wait(for: "the zoom cap", "return tilerViewer.view().scale >= 3.999")
            #expect(try view(driver)["scale"] as? Double == 4)
        }
    }

    /// The albums bar (from `/albums`) over the grid; an album's page holds its photos by
    /// title, ← and → stay in it, and the details panel shows what each photo says about
    /// itself. Screenshots are kept in `.build/test-artifacts/`.
    @Test(.timeLimit(.minutes(10))) func albumsAndWhatAPhotoSays() throws {
        let root = try PyramidRoot()
        let photos: [(id: String, rgb: (Int, Int, Int), metadata: [String: Any])] = [
            (
                "p1", (200, 120, 40),
                [
                    "title": "Harbour at dawn", "description": "Boats leaving", "creator": "Ada Lovelace",
                    "copyright": "CC BY 4.0", "dateTaken": "2024-05-01T06:03:22+02:00", "camera": "Canon EOS R5",
                    "album": "Trip",
                ]
            ),
            ("p2", (40, 120, 200), ["title": "Lighthouse", "album": "Trip"]),
            ("p3", (40, 200, 40), [:]),
        ]
        for photo in photos {
            try root.cut(try root.solidImage(photo.id, width: 400, height: 300, rgb: photo.rgb), as: photo.id)
            guard !photo.metadata.isEmpty else { continue }
            let path = "\(root.path)/\(photo.id)/pyramid.json"
            var manifest = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
            manifest["metadata"] = photo.metadata
            try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: path))
        }
        guard let driver = try startBrowser() else { return }
        defer { driver.quit() }
        try withTileServer(root) { port throws in
            try driver.navigate("http://127.0.0.1:\(port)/")
            try driver.wait(
                for: "the albums bar",
                """
                const bar = document.getElementById('albums');
                return !bar.hidden && [...bar.querySelectorAll('a')].map((a) => a.textContent).join('|') === 'All images|Trip (2)'
                    && tilerViewer.album().total === 3 && tilerViewer.stats.thumbnailsLoaded === 3
                """)
            let titles = try driver.execute("return [...document.querySelectorAll('.cell .name')].map((n) => n.textContent)")
            #expect(titles as? [String] == ["Harbour at dawn", "Lighthouse", "p3"], "captions are titles, in their order")
            try Data(try driver.screenshot()).write(to: testArtifacts.appendingPathComponent("lightbox-album.png"))
            let bar = try driver.rect("#albums")
            let shot = try DecodedImage(encoded: try driver.screenshot())
            let pill = shot.mean(x: Int(bar.x) + 20, y: Int(bar.y + bar.height / 2), width: 2, height: 2)
            #expect(pill[2] > pill[0] + 40, "the chosen pill (All images) in the accent colour: \(Array(pill.prefix(3)))")

            try driver.click("#albums a:nth-child(2)")
            try driver.wait(
                for: "the album Trip",
                """
                return location.hash === '#/album/Trip' && tilerViewer.album().total === 2
                    && [...document.querySelectorAll('.cell .name')].map((n) => n.textContent).join('|') === 'Harbour at dawn|Lighthouse'
                    && document.querySelector('#albums a[aria-current="true"]').textContent === 'Trip (2)'
                """)
            try driver.click("#cell-0")
            try driver.wait(
                for: "the first photo of the album",
                "const v = tilerViewer.view(); return v && v.id === 'p1' && document.getElementById('viewer-position').textContent === '1 / 2'"
            )
            try driver.sendKeys("#stage", WebDriver.Key.arrowRight)
            try driver.wait(
                for: "the album's second photo",
                "const v = tilerViewer.view(); return v && v.id === 'p2' && document.getElementById('viewer-position').textContent === '2 / 2'"
            )
            try driver.sendKeys("#stage", WebDriver.Key.arrowLeft)
            try driver.wait(for: "back to the first", "const v = tilerViewer.view(); return v && v.id === 'p1' && v.index === 0")

            try driver.sendKeys("#stage", "i")
            try driver.wait(
                for: "what the photo says",
                """
                const list = document.getElementById('details-list').textContent;
                return document.getElementById('details-title').textContent === 'Harbour at dawn'
                    && document.getElementById('details-description').textContent === 'Boats leaving'
                    && ['Ada Lovelace', 'CC BY 4.0', '2024-05-01T06:03:22+02:00', 'Canon EOS R5', 'Trip', '400 × 300 pixels']
                        .every((text) => list.includes(text))
                """)
            let details = try driver.screenshot()
            try Data(details).write(to: testArtifacts.appendingPathComponent("lightbox-photo-details.png"))
            let panel = try driver.rect("#details")
            let panelShot = try DecodedImage(encoded: details)
            let inside = panelShot.mean(x: Int(panel.x) + 4, y: Int(panel.y + panel.height) - 4, width: 2, height: 2)
            #expect(inside[0] < 90 && inside[1] < 90, "the panel is drawn over the photo: \(Array(inside.prefix(3)))")

            // Esc goes back to the album the photo was opened from.
            try driver.sendKeys("#stage", WebDriver.Key.escape)
            try driver.wait(for: "the album again", "return location.hash === '#/album/Trip' && !document.getElementById('album').hidden")
            try driver.expectNoScriptErrors()
        }
    }

    private func view(_ driver: WebDriver) throws -> [String: Any] {
        try #require(driver.execute("return tilerViewer.view()") as? [String: Any])
    }
}
