import Foundation
import Testing
import TilerCore
import TilerHTTP
import TilerImaging
import TilerTestSupport
@testable import TilerServer

/// The embed pages checked by axe-core.
extension EmbedBrowserTests {
    /// axe-core (as `axe-selenium-python` on PyPI bundles it; `scripts/install-deps test`)
    /// finds no serious or critical violation on either embed page, nor on a page where
    /// `embed.js` mounted both widgets, before and after moving.
    @Test(.timeLimit(.minutes(10))) func axeFindsNothingSerious() throws {
        guard let axe = Self.axeSource() else {
            Issue.record("axe-core is missing: run scripts/install-deps test (PyPI: axe-selenium-python)")
            return
        }
        let root = try PyramidRoot()
        try ColourPhotos.add(to: root, prefix: "feed", count: 30, album: "feed")
        try withTileServer(root) { port in
            let site = try StaticSite([
                "/page.html": (
                    Array(
                        """
                        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>Both widgets</title></head>
                        <body><main><h1>Photos</h1>
                        <div data-tiler-album="feed" style="width:700px;height:180px"></div>
                        <div data-tiler-album="" data-tiler-mode="coverflow" data-tiler-target="_blank" style="width:700px;height:280px"></div>
                        </main><script src="http://127.0.0.1:\(port)/viewer/embed.js"></script></body></html>
                        """.utf8), "text/html; charset=utf-8"
                )
            ])
            defer { site.stop() }
            guard let driver = try startBrowser(width: 900, height: 700) else { return }
            defer { driver.quit() }
            for page in [
                "http://127.0.0.1:\(port)/embed/strip?album=feed", "http://127.0.0.1:\(port)/embed/coverflow?album=feed",
                "http://127.0.0.1:\(site.port)/page.html",
            ] {
                try driver.navigate(page)
                try Self.rested(driver, "the widgets of \(page)", "s.total > 0 && s.thumbnailsLoaded > 0")
                try expectNothingSerious(driver, axe, page)
                // Moved on: the focus on a photo, another at the centre or at the start.
                _ = try driver.execute("document.querySelector('.tiler-photo[tabindex=\"0\"]').focus()")
                for _ in 0..<3 { try driver.press(WebDriver.Key.arrowRight) }
                try Self.rested(driver, "the widgets of \(page) moved", "s.current === 3")
                try expectNothingSerious(driver, axe, page + " (moved)")
            }
        }
    }

    func expectNothingSerious(_ driver: WebDriver, _ axe: String, _ page: String, sourceLocation: SourceLocation = #_sourceLocation) throws
    {
        _ = try driver.execute(
            """
            if (!window.axe) { const s = document.createElement('script'); s.textContent = arguments[0]; document.head.append(s); }
            window.axeResult = null;
            axe.run(document, { resultTypes: ['violations'] }).then(
              (r) => { window.axeResult = r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) })); },
              (e) => { window.axeResult = [{ id: 'axe failed', impact: 'critical', help: String(e), nodes: [] }]; });
            """, [axe])
        let violations = try #require(
            driver.wait(for: "axe's answer on \(page)", timeout: 120, "return window.axeResult") as? [[String: Any]])
        let serious = violations.filter { ["serious", "critical"].contains($0["impact"] as? String ?? "") }
        #expect(serious.isEmpty, "\(page): \(serious)", sourceLocation: sourceLocation)
    }

    /// `axe.min.js` of the `axe_selenium_python` package, found without importing it (its
    /// module imports selenium).
    static func axeSource() -> String? {
        guard let python = findExecutable(["python3"]),
            let folder = try? runTool(
                python,
                [
                    "-c",
                    "import importlib.util as u; s = u.find_spec('axe_selenium_python'); print(s.submodule_search_locations[0] if s else '')",
                ]
            ).trimmingCharacters(in: .whitespacesAndNewlines), !folder.isEmpty
        else { return nil }
        return try? String(contentsOfFile: folder + "/node_modules/axe-core/axe.min.js", encoding: .utf8)
    }
}
