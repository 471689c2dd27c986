import Foundation
import Testing
import TilerCore
import TilerImaging
@testable import TilerServer

/// The viewer's album with 1,000 images, in Chromium: it pages to the last one and back
/// by keys, scrubber and scrolling, keeps only the rows near the screen in the page (and
/// fetches only the listing pages they need), and its layout stays on screen, with a page
/// indicator whose size does not depend on the count. Screenshots show each chosen
/// image's own thumbnail (every image is one colour of its own).
@Suite(.serialized) struct AlbumScaleTests {
    static let count = 1000

    static func id(_ i: Int) -> String { "img-" + String(1000 + i).dropFirst() }
    /// A colour per image: 10 steps of red, green and blue.
    static func colour(_ i: Int) -> [Double] { [Double(i % 10 * 25 + 10), Double(i / 10 % 10 * 25 + 10), Double(i / 100 * 25 + 10)] }

    /// 1,000 pyramids of 64 × 48 pixels, each one colour: one level, whose one tile is
    /// also the thumbnail (real PNGs, so the browser draws them).
    static func makeRoot() throws -> PyramidRoot {
        let root = try PyramidRoot()
        let geometry = try PyramidGeometry(width: 64, height: 48, tileSize: 256)
        for i in 0..<count {
            let c = colour(i).map { UInt8($0) }
            let png = try PNGEncoder().encode([UInt8]((0..<(64 * 48)).flatMap { _ in c }), width: 64, height: 48, bands: 3)
            let dir = URL(fileURLWithPath: root.path).appendingPathComponent(id(i))
            try FileManager.default.createDirectory(at: dir.appendingPathComponent("0/0"), withIntermediateDirectories: true)
            try Data(png).write(to: dir.appendingPathComponent("0/0/0.png"))
            try Data(png).write(to: dir.appendingPathComponent("thumbnail.png"))
            try root.write(
                PyramidManifest(
                    id: PyramidID(id(i))!, geometry: geometry, format: .png,
                    thumbnail: .init(file: "thumbnail.png", width: 64, height: 48)))
        }
        return root
    }

    /// The parts of the album that must stay on screen.
    static let albumParts = ["#grid", "#pager", "#album-prev", "#scrubber", "#album-next", "#page-number", ".cell.current"]
    static var albumPartsJS: String { "[" + albumParts.map { "'\($0)'" }.joined(separator: ", ") + "]" }

    func expectOnScreen(_ driver: WebDriver, _ parts: [String], _ when: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let viewport = try driver.viewportSize()
        for css in parts {
            let r = try driver.rect(css)
            #expect(
                r.isVisible(within: viewport), "\(when): \(css) is at \(r), outside the \(viewport) viewport",
                sourceLocation: sourceLocation)
        }
    }

    /// The screen's colour at the centre of the chosen cell's thumbnail.
    func currentThumbnailColour(_ driver: WebDriver, _ name: String) throws -> [Double] {
        let r = try driver.rect(".cell.current .thumb img")
        let png = try driver.screenshot()
        try Data(png).write(to: testArtifacts.appendingPathComponent("album-\(name).png"))
        let shot = try DecodedImage(encoded: png)
        return Array(shot.mean(x: Int(r.x + r.width / 2) - 2, y: Int(r.y + r.height / 2) - 2, width: 5, height: 5).prefix(3))
    }

    func waitForCurrent(_ driver: WebDriver, _ index: Int) throws {
        try driver.wait(
            for: "image \(index + 1) chosen, shown and its thumbnail faded in",
            """
            const a = tilerViewer.album(), img = document.querySelector('.cell.current .thumb img.loaded');
            return a.current === \(index) && document.getElementById('page-number').textContent === '\(index + 1) / \(Self.count)'
                && img !== null && getComputedStyle(img).opacity === '1'
                && document.querySelector('.cell.current').dataset.id === '\(Self.id(index))'
            """)
    }

    @Test(.timeLimit(.minutes(10))) func aThousandImagesPageToTheLastAndStayOnScreen() throws {
        let root = try Self.makeRoot()
        let small = try ViewerPyramids.port()  // the five-image album, for the indicator's size
        guard let driver = try startBrowser() else { return }
        defer { driver.quit() }
        var thousand: Rect?
        try withTileServer(root) { port throws in
            let base = "http://127.0.0.1:\(port)/"
            try driver.navigate(base)
            try waitForCurrent(driver, 0)
            try driver.wait(
                for: "the thumbnails on screen",
                """
                const asked = document.querySelectorAll('.cell img[src]').length;
                return asked > 0 && tilerViewer.stats.thumbnailsLoaded >= asked
                """)
            let first = try #require(driver.execute("return tilerViewer.album()") as? [String: Any])
            let start = try #require(driver.execute("return tilerViewer.stats") as? [String: Any])
            // Only the rows near the screen exist, and only the first page of the listing
            // was fetched.
            #expect((first["cells"] as? Int ?? 0) < 100, "\(first)")
            #expect((start["thumbnailsLoaded"] as? Int ?? 0) < 100 && start["listingPagesLoaded"] as? Int == 1, "\(start)")
            #expect(try driver.execute("return document.querySelectorAll('.cell').length") as? Int == first["cells"] as? Int)
            try expectOnScreen(driver, Self.albumParts, "at the first image")
            let indicator = try driver.rect("#page-number")
            thousand = indicator
            #expect(zip(try currentThumbnailColour(driver, "first"), Self.colour(0)).allSatisfy { abs($0 - $1) <= 3 })

            // End: the last image, in a few page fetches, the same few cells reused.
            try driver.sendKeys("#grid", WebDriver.Key.end)
            try waitForCurrent(driver, Self.count - 1)
            try expectOnScreen(driver, Self.albumParts, "at the last image")
            let last = try driver.rect("#page-number")
            #expect(
                last.width == indicator.width && last.height == indicator.height,
                "the indicator keeps its size: \(indicator) at 1 / 1000, \(last) at 1000 / 1000")
            let colour = try currentThumbnailColour(driver, "last")
            #expect(
                zip(colour, Self.colour(Self.count - 1)).allSatisfy { abs($0 - $1) <= 3 },
                "the last cell shows \(colour), image 1000 is \(Self.colour(Self.count - 1))")
            let end = try #require(driver.execute("return tilerViewer.stats") as? [String: Any])
            #expect((end["listingPagesLoaded"] as? Int ?? 99) <= 3 && (end["cellsReused"] as? Int ?? 0) > 0, "\(end)")
            #expect((try driver.execute("return tilerViewer.album().cells") as? Int ?? 999) < 100)
            #expect(try driver.execute("return document.getElementById('album-next').disabled") as? Bool == true)

            // Home, then Page Down a screenful at a time to the last image: at every page
            // the layout is on screen, the chosen cell shows, and the page keeps few cells.
            try driver.sendKeys("#grid", WebDriver.Key.home)
            try waitForCurrent(driver, 0)
            var presses = 0, previous = 0
            while previous < Self.count - 1 && presses < 200 {
                try driver.sendKeys("#grid", WebDriver.Key.pageDown)
                presses += 1
                try driver.wait(
                    for: "Page Down \(presses) to move on from image \(previous + 1)",
                    """
                    const a = tilerViewer.album(), cell = document.querySelector('.cell.current');
                    return a.current > \(previous) && cell !== null && cell.dataset.index === String(a.current)
                    """)
                let state = try #require(
                    driver.execute(
                        """
                        const a = tilerViewer.album(), off = \(Self.albumPartsJS).filter((css) => {
                          const e = document.querySelector(css); if (!e) return true;
                          const r = e.getBoundingClientRect();
                          return r.width <= 0 || r.height <= 0 || r.left < 0 || r.top < 0 || r.right > innerWidth || r.bottom > innerHeight;
                        });
                        return { current: a.current, cells: a.cells, off: off };
                        """) as? [String: Any])
                previous = try #require(state["current"] as? Int)
                #expect((state["off"] as? [String]) == [], "Page Down \(presses), image \(previous + 1): off screen \(state)")
                #expect((state["cells"] as? Int ?? 999) < 100, "Page Down \(presses): \(state)")
            }
            try waitForCurrent(driver, Self.count - 1)
            let rowsOnScreen = try #require(
                driver.execute(
                    "return Math.max(1, Math.floor(document.getElementById('grid').clientHeight / tilerViewer.album().cellHeight))") as? Int
            )
            let perPage = try #require(driver.execute("return tilerViewer.album().columns") as? Int) * rowsOnScreen
            #expect(presses == (Self.count - 1 + perPage - 1) / perPage, "\(presses) presses of Page Down at \(perPage) images a page")
            try expectOnScreen(driver, Self.albumParts, "paged to the last image")
            #expect(zip(try currentThumbnailColour(driver, "paged-last"), Self.colour(Self.count - 1)).allSatisfy { abs($0 - $1) <= 3 })

            // Keys, the buttons and the scrubber move the choice; the grid follows.
            try driver.sendKeys("#grid", WebDriver.Key.arrowLeft + WebDriver.Key.arrowUp)
            let columns = try #require(driver.execute("return tilerViewer.album().columns") as? Int)
            try waitForCurrent(driver, Self.count - 2 - columns)
            _ = try driver.execute(
                "const s = document.getElementById('scrubber'); s.value = '500'; s.dispatchEvent(new Event('input')); return 1")
            try waitForCurrent(driver, 499)
            try expectOnScreen(driver, Self.albumParts, "at image 500")
            #expect(zip(try currentThumbnailColour(driver, "500"), Self.colour(499)).allSatisfy { abs($0 - $1) <= 3 })
            try driver.click("#album-next")
            try waitForCurrent(driver, 500)

            // Scrolling the grid (a swipe): the choice follows to an image on screen.
            _ = try driver.execute("document.getElementById('grid').scrollTop = 0; return 1")
            try driver.wait(
                for: "the choice to follow the scroll",
                """
                const a = tilerViewer.album(); return a.current < a.columns * 4 && document.querySelector('.cell.current') !== null
                """)
            try expectOnScreen(driver, Self.albumParts, "after scrolling to the top")

            // Open the last image: the deep-zoom view says where it is, pages back, and
            // returns to the album at the image it showed.
            _ = try driver.execute("tilerViewer.select(\(Self.count - 1)); return 1")
            try waitForCurrent(driver, Self.count - 1)
            try driver.sendKeys("#grid", WebDriver.Key.enter)
            try driver.wait(
                for: "the last image's deep-zoom view",
                """
                const v = tilerViewer.view();
                return v && v.id === '\(Self.id(Self.count - 1))' && v.pending === 0 && v.activeTiles > 0
                    && document.getElementById('viewer-position').textContent === '1000 / 1000'
                    && document.getElementById('next-image').disabled
                """)
            try expectOnScreen(
                driver, ["#stage", "#viewer-position", "#prev-image", "#next-image", "#navigator", "#zoom-in", "#fullscreen"],
                "in the deep-zoom view")
            try driver.sendKeys("#stage", WebDriver.Key.pageUp)
            try driver.wait(
                for: "the previous image",
                """
                const v = tilerViewer.view();
                return v && v.id === '\(Self.id(Self.count - 2))' && document.getElementById('viewer-position').textContent === '999 / 1000'
                """)
            try driver.sendKeys("#stage", WebDriver.Key.escape)
            try waitForCurrent(driver, Self.count - 2)
            try expectOnScreen(driver, Self.albumParts, "back in the album")
            try driver.expectNoScriptErrors()
        }

        // The same indicator with five images: the same size.
        try driver.navigate("http://127.0.0.1:\(small)/")
        try driver.wait(
            for: "the five-image album",
            """
            return window.tilerViewer && tilerViewer.album().total === 5 && document.getElementById('page-number').textContent === '1 / 5'
            """)
        let five = try driver.rect("#page-number")
        #expect(
            five.width == thousand?.width && five.height == thousand?.height,
            "the indicator is \(five) with 5 images and \(String(describing: thousand)) with 1000")
        try driver.expectNoScriptErrors()
    }
}
