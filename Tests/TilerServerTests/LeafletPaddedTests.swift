import Foundation
import Testing
import TilerCore
import TilerImaging
@testable import TilerServer

/// Leaflet (Debian's libjs-leaflet) with `L.CRS.Simple` over tiler's XYZ tile URLs, in
/// Chromium: Leaflet draws every tile at the full tile size, so a pyramid cut with `--pad`
/// shows the image's bottom-right corner pixel for pixel, and one cut without it (clipped
/// edge tiles) shows it stretched. The page is served by the test; the tiles by tiler.
@Suite(.serialized) struct LeafletPaddedTests {
    static let width = 1537, height = 997  // edge tiles 1 px wide and 229 px tall at full resolution

    @Test(.timeLimit(.minutes(10))) func paddedPyramidShowsTheCornerUndistorted() throws {
        let leaflet = "/usr/share/javascript/leaflet"
        guard FileManager.default.fileExists(atPath: "\(leaflet)/leaflet.js") else {
            Issue.record("Leaflet is missing: run scripts/install-deps test (apt: libjs-leaflet)")
            return
        }
        let folder = try temporaryFolder("leaflet")
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = folder.appendingPathComponent("source.png").path
        try writeCoordinateImage(source, width: Self.width, height: Self.height)
        let root = folder.appendingPathComponent("tiles")
        let padded = try PyramidCutter(
            root: root, options: CutOptions(format: .png, pad: true, background: BackgroundColour(parsing: "#0000ff"))
        )
        .cut(source, id: PyramidID("padded")!).manifest
        _ = try PyramidCutter(root: root, options: CutOptions(format: .png)).cut(source, id: PyramidID("clipped")!)
        let image = try DecodedImage(encoded: Array(try Data(contentsOf: URL(fileURLWithPath: source))))

        var configuration = ServerConfiguration(root: root.path)
        configuration.http.port = 0
        configuration.http.threads = 2
        let server = TileServer(configuration: configuration)
        try server.start()
        defer {
            server.stop()
            server.wait()
        }
        let site = try StaticSite([
            "/map.html": (Array(Self.page.utf8), "text/html; charset=utf-8"),
            "/leaflet/leaflet.js": (Array(try Data(contentsOf: URL(fileURLWithPath: "\(leaflet)/leaflet.js"))), "text/javascript"),
            "/leaflet/leaflet.css": (Array(try Data(contentsOf: URL(fileURLWithPath: "\(leaflet)/leaflet.css"))), "text/css"),
        ])
        defer { site.stop() }
        guard let driver = try startBrowser() else { return }
        defer { driver.quit() }

        /// The screen's colour where Leaflet shows image pixel (x, y) at `zoom`, after
        /// showing (cx, cy) in the middle; with `image` given, also the source's colour
        /// there (the mean of the 2^(maxLevel − zoom) square of pixels it stands for).
        func show(_ id: String, zoom: Int, centre: (Int, Int), points: [(Int, Int)]) throws -> (shot: DecodedImage, screen: [[Double]]) {
            let maxLevel = padded.maxLevel
            let tiles = "http://127.0.0.1:\(server.port)/images/\(id)/tiles/{z}/{y}/{x}.png"
            var query = URLComponents()
            query.queryItems = [
                .init(name: "tiles", value: tiles), .init(name: "maxLevel", value: "\(maxLevel)"),
                .init(name: "width", value: "\(Self.width)"), .init(name: "height", value: "\(Self.height)"),
            ]
            try driver.navigate("http://127.0.0.1:\(site.port)/map.html?\(query.percentEncodedQuery!)")
            try driver.wait(for: "Leaflet", "return window.showAt !== undefined")
            _ = try driver.execute("showAt(\(centre.0), \(centre.1), \(zoom)); return 1")
            try driver.wait(for: "the tiles at zoom \(zoom)", "return tileState.ready && tileState.loaded > 0")
            #expect(try driver.execute("return tileState.errors") as? Int == 0)
            let positions = try #require(
                driver.execute(
                    "return arguments[0].map(([x, y]) => screenPoint(x, y))",
                    [points.map { [$0.0, $0.1] }]) as? [[Double]])
            let png = try driver.screenshot()
            try Data(png).write(to: testArtifacts.appendingPathComponent("leaflet-\(id)-z\(zoom).png"))
            let shot = try DecodedImage(encoded: png)
            // Image pixel (x, y) covers screen [p, p + 2^(zoom − maxLevel)): sample the screen
            // pixel holding that square's centre.
            let size = pow(2, Double(zoom - maxLevel))
            let screen = positions.map { p in
                shot.mean(x: Int((p[0] + size / 2).rounded(.down)), y: Int((p[1] + size / 2).rounded(.down)), width: 1, height: 1)
            }
            return (shot, screen)
        }
        func sourceColour(_ x: Int, _ y: Int, zoom: Int) -> [Double] {
            let f = 1 << (padded.maxLevel - zoom)
            return image.mean(x: x, y: y, width: min(f, Self.width - x), height: min(f, Self.height - y))
        }
        func close(_ a: [Double], _ b: [Double], _ tolerance: Double) -> Bool {
            zip(a.prefix(3), b.prefix(3)).allSatisfy { abs($0 - $1) <= tolerance }
        }

        // Full resolution: the last row of tiles is 229 px tall and the last column 1 px
        // wide; every pixel near the corner, and the corner itself, is where it belongs.
        let nearCorner = [
            (1536, 996), (1535, 996), (1536, 995), (1530, 990), (1520, 980), (1500, 900),
            (1400, 995), (1536, 800), (1536, 700), (1300, 996), (1290, 780),
        ]
        for zoom in [padded.maxLevel, padded.maxLevel - 1] {
            let points = zoom == padded.maxLevel ? nearCorner : nearCorner.map { ($0.0 & ~1, $0.1 & ~1) }
            let (_, screen) = try show("padded", zoom: zoom, centre: (1400, 900), points: points)
            for (point, got) in zip(points, screen) {
                let want = sourceColour(point.0, point.1, zoom: zoom)
                #expect(
                    close(got, want, 3),
                    "zoom \(zoom): image \(point) shows \(Array(got.prefix(3))), the source is \(Array(want.prefix(3)))")
            }
        }
        // Past the corner: the padding, not a stretched picture.
        let (_, beyond) = try show("padded", zoom: padded.maxLevel, centre: (1400, 900), points: [(1540, 1000), (1600, 990), (1530, 1010)])
        for (i, got) in beyond.enumerated() {
            #expect(close(got, [0, 0, 255], 3), "padding expected beyond the corner (point \(i)): \(Array(got.prefix(3)))")
        }

        // The control: the same view of clipped edge tiles is stretched by Leaflet, so the
        // same comparison fails there (the test can tell the two apart).
        let (_, stretched) = try show("clipped", zoom: padded.maxLevel, centre: (1400, 900), points: nearCorner)
        let wrong = zip(nearCorner, stretched).filter { !close($1, sourceColour($0.0, $0.1, zoom: padded.maxLevel), 3) }
        #expect(wrong.count >= nearCorner.count / 2, "clipped tiles should look distorted in Leaflet; only \(wrong.count) points differ")
        try driver.expectNoScriptErrors()
    }

    /// Leaflet with `L.CRS.Simple`: at zoom z one map unit is 2^z screen pixels, so image
    /// pixel (x, y) of full resolution (level maxLevel) is `map.unproject([x, y], maxLevel)`.
    static let page = """
        <!doctype html>
        <html><head><meta charset="utf-8"><link rel="icon" href="data:,">
        <link rel="stylesheet" href="/leaflet/leaflet.css">
        <style>html, body, #map { margin: 0; width: 100%; height: 100%; background: #000; }</style>
        <script>window.pageErrors = []; addEventListener('error', (e) => pageErrors.push(String(e.message)));</script>
        <script src="/leaflet/leaflet.js"></script>
        </head><body><div id="map"></div>
        <script>
        const p = new URLSearchParams(location.search);
        const maxLevel = Number(p.get('maxLevel')), W = Number(p.get('width')), H = Number(p.get('height'));
        const map = L.map('map', { crs: L.CRS.Simple, minZoom: 0, maxZoom: maxLevel, zoomControl: false,
          attributionControl: false, fadeAnimation: false, zoomAnimation: false, markerZoomAnimation: false });
        const bounds = L.latLngBounds(map.unproject([0, H], maxLevel), map.unproject([W, 0], maxLevel));
        window.tileState = { ready: false, loaded: 0, errors: 0 };
        const layer = L.tileLayer(p.get('tiles'), { tileSize: 256, noWrap: true, bounds, minZoom: 0, maxZoom: maxLevel });
        layer.on('tileerror', () => tileState.errors++);
        layer.on('tileload', () => tileState.loaded++);
        layer.on('loading', () => { tileState.ready = false; });
        layer.on('load', () => { tileState.ready = true; });
        layer.addTo(map);
        window.showAt = (x, y, zoom) => {
          tileState.ready = false;
          tileState.loaded = 0;
          map.setView(map.unproject([x, y], maxLevel), zoom, { animate: false });
        };
        window.screenPoint = (x, y) => {
          const c = map.latLngToContainerPoint(map.unproject([x, y], maxLevel));
          const r = map.getContainer().getBoundingClientRect();
          return [r.left + c.x, r.top + c.y];
        };
        </script></body></html>
        """
}
