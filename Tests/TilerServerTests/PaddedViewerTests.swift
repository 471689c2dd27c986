import Foundation
import Testing
import TilerCore
import TilerImaging
@testable import TilerServer

/// The built-in viewer over a padded pyramid (`tiler cut --pad`): edge tiles are stored
/// at the full tile size, so the viewer must place them whole and clip them at the image
/// edge, not stretch them into the clipped rectangle `/visible` gives.
@Suite(.serialized) struct PaddedViewerTests {
    @Test(.timeLimit(.minutes(10))) func paddedEdgeTilesAreShownUndistorted() throws {
        guard let chromium = findExecutable(["chromium", "chromium-browser", "google-chrome"]),
            let chromedriver = findExecutable(["chromedriver", "/usr/lib/chromium/chromedriver"]),
            let vips = findExecutable(["vips"])
        else {
            Issue.record("chromium, chromedriver and vips are needed: run scripts/install-deps test")
            return
        }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("tiler-padded-viewer-\(getpid())")
        try? FileManager.default.removeItem(at: root)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        // 1537 × 997, x and y (mod 256) as red and green, blue 128; padded with pure blue.
        let step = { (i: Int) in root.appendingPathComponent("step-\(i).v").path }
        let source = root.appendingPathComponent("source.png").path
        try runTool(vips, ["xyz", step(0), "1537", "997"])
        try runTool(vips, ["remainder_const", step(0), step(1), "256"])
        try runTool(vips, ["cast", step(1), step(2), "uchar"])
        try runTool(vips, ["bandjoin_const", step(2), source, "128"])
        let options = CutOptions(format: .png, pad: true, background: BackgroundColour(parsing: "#0000ff"))
        let cut = try PyramidCutter(root: root.appendingPathComponent("tiles"), options: options)
            .cut(source, id: PyramidID("padded")!)
        #expect(cut.manifest.isPadded)

        var configuration = ServerConfiguration(root: root.appendingPathComponent("tiles").path)
        configuration.http.port = 0
        configuration.http.threads = 2
        let server = TileServer(configuration: configuration)
        try server.start()
        defer {
            server.stop()
            server.wait()
        }
        let driver = try WebDriver(chromedriver: chromedriver, chromium: chromium, width: 900, height: 700)
        defer { driver.quit() }

        // Near the bottom-right corner at scale 2: the tile at row 3, column 5 is 256 × 229
        // of image and 256 × 256 stored; stretched, its row 222 would show padding.
        try driver.navigate("http://127.0.0.1:\(server.port)/#/image/padded?x=1500&y=960&z=2")
        _ = try driver.wait(
            for: "the full-resolution tiles",
            """
            const v = tilerViewer.view(); return v && v.level === \(cut.manifest.maxLevel) && v.pending === 0 && v.activeTiles > 0 ? v : null
            """)
        try driver.waitForTilesFadedIn()
        let stage = try #require(
            driver.execute(
                "const r = document.getElementById('stage').getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]")
                as? [Double])
        let png = try driver.screenshot()
        try Data(png).write(to: testArtifacts.appendingPathComponent("viewer-padded-corner.png"))
        let shot = try DecodedImage(encoded: png)
        let cx = Int(stage[0].rounded(.down)), cy = Int(stage[1].rounded(.down))
        // Image pixel (1500 + dx, 960 + dy) is on screen at (cx + 2 dx, cy + 2 dy).
        for (dx, dy) in [(0, 0), (20, 30), (30, 34), (-100, 20), (35, -100)] {
            let x = 1500 + dx, y = 960 + dy
            let got = shot.mean(x: cx + 2 * dx - 1, y: cy + 2 * dy - 1, width: 3, height: 3).prefix(3)
            let want = [Double(x % 256), Double(y % 256), 128]
            #expect(zip(got, want).allSatisfy { abs($0 - $1) <= 12 }, "image (\(x), \(y)) shows \(Array(got)), not \(want)")
        }
        // The last column, x = 1536, is a tile one pixel wide (256 stored). Its second
        // screen pixel is where the browser's smoothing of the upscaled tile reaches the
        // padding beyond it, so only the first is checked.
        let last = shot.mean(x: cx + 72, y: cy - 200, width: 1, height: 2).prefix(3)
        #expect(zip(last, [0, Double(860 % 256), 128]).allSatisfy { abs($0 - $1) <= 12 }, "image (1536, 860) shows \(Array(last))")
        // Just past the image's bottom and right edges: no padding on screen.
        for (dx, dy) in [(20, 40), (40, 20), (45, 45)] {
            let got = shot.mean(x: cx + 2 * dx - 1, y: cy + 2 * dy - 1, width: 3, height: 3).prefix(3)
            #expect(!(got[0] < 40 && got[1] < 40 && got[2] > 215), "padding is visible at image (\(1500 + dx), \(960 + dy)): \(Array(got))")
        }
        let errors = try driver.execute("return window.tilerErrors") as? [Any]
        #expect(errors != nil && errors!.isEmpty, "script errors: \(String(describing: errors))")
    }
}
