import Foundation
import Testing
import TilerCore
import TilerImaging
import TilerTestSupport
@testable import TilerServer

/// DeepZoom over a live server, walked the way OpenSeadragon walks it: read the .dzi,
/// compute its levels with OpenSeadragon's own formula, fetch every tile of every level.
@Suite struct DeepZoomRouteTests {
    /// The attributes of the descriptor's `<Image>` and `<Size>` elements.
    func parseDZI(_ xml: String) throws -> (tileSize: Int, overlap: Int, format: String, width: Int, height: Int) {
        func attribute(_ name: String) throws -> String {
            guard let r = xml.range(of: " \(name)=\""), let end = xml[r.upperBound...].firstIndex(of: "\"") else {
                throw ClientError("no \(name) in \(xml)")
            }
            return String(xml[r.upperBound..<end])
        }
        guard xml.contains("<Image xmlns=\"http://schemas.microsoft.com/deepzoom/2008\"") else { throw ClientError("not a DZI: \(xml)") }
        return (
            Int(try attribute("TileSize"))!, Int(try attribute("Overlap"))!, try attribute("Format"),
            Int(try attribute("Width"))!, Int(try attribute("Height"))!
        )
    }

    @Test(arguments: RootKind.allCases, [ValidatorImage.id, "panorama", "odd-123", "tiny", "film.dzi"])
    func everyTileOfEveryLevelAnOpenSeadragonClientAsksFor(kind: RootKind, id: String) throws {
        let port = try ViewerPyramids.port(kind)
        let descriptor = try fetch(port, "/images/\(id).dzi")
        #expect(descriptor.status == 200)
        #expect(descriptor.header("Content-Type")?.hasPrefix("application/xml") == true)
        #expect(descriptor.header("Access-Control-Allow-Origin") == "*")
        #expect(descriptor.header("ETag") != nil)
        let dzi = try parseDZI(descriptor.text)
        #expect(dzi.overlap == 0 && dzi.tileSize == 256)

        // OpenSeadragon's TileSource: maxLevel = ceil(log(max(w,h)) / log(2)),
        // scale(l) = 1 / 2^(maxLevel − l), numTiles = ceil(scale·w / tileSize).
        let maxLevel = Int((log(Double(max(dzi.width, dzi.height))) / log(2.0)).rounded(.up))
        let manifest = try ViewerPyramids.expected(kind).manifest(id)
        #expect(dzi.format == manifest.format.fileExtension && dzi.width == manifest.width && dzi.height == manifest.height)
        var fetched = 0
        for level in 0...maxLevel {
            let scale = 1 / pow(2, Double(maxLevel - level))
            let levelWidth = Int((Double(dzi.width) * scale).rounded(.up)), levelHeight = Int((Double(dzi.height) * scale).rounded(.up))
            let columns = Int((scale * Double(dzi.width) / Double(dzi.tileSize)).rounded(.up))
            let rows = Int((scale * Double(dzi.height) / Double(dzi.tileSize)).rounded(.up))
            for column in 0..<columns {
                for row in 0..<rows {
                    let tile = try fetch(port, "/images/\(id)_files/\(level)/\(column)_\(row).\(dzi.format)")
                    try #require(tile.status == 200, "level \(level) tile \(column)_\(row): \(tile.status) \(tile.text.prefix(200))")
                    #expect(tile.header("Content-Type") == manifest.format.mimeType)
                    let image = try DecodedImage(encoded: tile.body)
                    let w = min(dzi.tileSize, levelWidth - column * dzi.tileSize), h = min(dzi.tileSize, levelHeight - row * dzi.tileSize)
                    #expect(
                        image.width == w && image.height == h,
                        "level \(level) tile \(column)_\(row) is \(image.width)×\(image.height), not \(w)×\(h)")
                    fetched += 1
                }
            }
            // Just past the grid: 404, never a made-up tile.
            #expect(try fetch(port, "/images/\(id)_files/\(level)/\(columns)_0.\(dzi.format)").status == 404)
            #expect(try fetch(port, "/images/\(id)_files/\(level)/0_\(rows).\(dzi.format)").status == 404)
        }
        #expect(try fetch(port, "/images/\(id)_files/\(maxLevel + 1)/0_0.\(dzi.format)").status == 404)
        #expect(fetched >= maxLevel + 1)
    }

    @Test(arguments: RootKind.allCases) func pyramidLevelsAreTheStoredTilesAndSmallerLevelsShrinkLevelZero(_ kind: RootKind) throws {
        let port = try ViewerPyramids.port(kind)
        let expected = try ViewerPyramids.expected(kind)
        let id = ValidatorImage.id
        // DZ level 10 is our level 2, tile for tile, byte for byte.
        for (column, row) in [(0, 0), (3, 3), (2, 1)] {
            let tile = try fetch(port, "/images/\(id)_files/10/\(column)_\(row).png")
            expected.expect(tile.body, servedAs: "\(id)/2/\(row)/\(column).png")
        }
        expected.expect(try fetch(port, "/images/\(id)_files/8/0_0.png").body, servedAs: "\(id)/0/0/0.png")
        // DZ level 7 (125 × 125) is level 0 (250 × 250) halved: square (0, 0) at its corner.
        let small = try DecodedImage(encoded: try fetch(port, "/images/\(id)_files/7/0_0.png").body)
        #expect(small.width == 125 && small.height == 125)
        let corner = small.mean(x: 2, y: 2, width: 8, height: 8)
        #expect(abs(corner[0] - 61) < 6 && abs(corner[1] - 170) < 6 && abs(corner[2] - 126) < 6, "\(corner)")
        // Drawn levels are cached with validators: a second fetch revalidates to 304.
        let first = try fetch(port, "/images/\(id)_files/5/0_0.png")
        let etag = try #require(first.header("ETag"))
        #expect(try fetch(port, "/images/\(id)_files/5/0_0.png", headers: ["If-None-Match: \(etag)"]).status == 304)
        let one = try DecodedImage(encoded: try fetch(port, "/images/\(id)_files/0/0_0.png").body)
        #expect(one.width == 1 && one.height == 1)
    }

    @Test(arguments: RootKind.allCases) func errors(_ kind: RootKind) throws {
        let port = try ViewerPyramids.port(kind)
        let id = ValidatorImage.id
        #expect(try fetch(port, "/images/nope.dzi").status == 404)
        #expect(try fetch(port, "/images/nope_files/0/0_0.png").status == 404)
        #expect(try fetch(port, "/images/\(id)_files/1/0_0.jpg").status == 404)  // wrong format
        #expect(try fetch(port, "/images/\(id)_files/x/0_0.png").status == 400)
        #expect(try fetch(port, "/images/\(id)_files/1/0-0.png").status == 400)
        #expect(try fetch(port, "/images/\(id)_files/1/-1_0.png").status == 400)
        #expect(try fetch(port, "/images/\(id)_files/99999999999/0_0.png").status == 400)
        #expect(try fetch(port, "/images/\(id).dzi", method: "HEAD").status == 200)
        // A pyramid whose id ends in .dzi keeps its manifest route; its descriptor is ID.dzi.dzi.
        let manifest = try fetch(port, "/images/film.dzi")
        #expect(manifest.status == 200 && manifest.header("Content-Type") == "application/json")
        #expect(manifest.json["id"] as? String == "film.dzi")
        #expect(try fetch(port, "/images/film.dzi.dzi").status == 200)
        // The image API is untouched.
        #expect(try fetch(port, "/images/\(id)").status == 200)
        #expect(try fetch(port, "/images/\(id)/tiles/0/0/0.png").status == 200)
    }
}
