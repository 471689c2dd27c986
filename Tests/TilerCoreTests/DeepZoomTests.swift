import Foundation
import Testing
@testable import TilerCore

/// OpenSeadragon's published DeepZoom arithmetic (`src/tilesource.js`), transcribed with
/// the same floating-point operations so the comparison is with what the client computes:
///   maxLevel = ceil(log(max(w, h)) / log(2))
///   getLevelScale(l) = 1 / 2^(maxLevel − l)
///   getNumTiles(l) = (ceil(scale·w / tileSize), ceil(scale·h / tileSize))
/// and the level's image size a DeepZoom server delivers, `ceil(scale·w)`.
private struct OpenSeadragonDZI {
    let width: Int, height: Int, tileSize: Int
    var maxLevel: Int { Int((log(Double(max(width, height))) / log(2.0)).rounded(.up)) }
    func levelScale(_ level: Int) -> Double { 1 / pow(2, Double(maxLevel - level)) }
    func numTiles(_ level: Int) -> (x: Int, y: Int) {
        let s = levelScale(level)
        return (
            Int((s * Double(width) / Double(tileSize)).rounded(.up)),
            Int((s * Double(height) / Double(tileSize)).rounded(.up))
        )
    }
    func levelSize(_ level: Int) -> (w: Int, h: Int) {
        let s = levelScale(level)
        return (Int((s * Double(width)).rounded(.up)), Int((s * Double(height)).rounded(.up)))
    }
}

/// Sides where `log(n)/log(2)` in binary64 lands just above the integer (2^29, 2^31,
/// 2^39): OpenSeadragon's floating-point formula then says one level more than the exact
/// ceil(log2). Checked below so the list stays honest.
private let floatQuirkSides: Set<Int> = [1 << 29, 1 << 31, 1 << 39]

@Suite struct DeepZoomTests {
    @Test func openSeadragonFormulaOverGeneratedSizes() throws {
        var checked = 0
        for (w, h, t) in generatedSizes(count: 4000, seed: 0xD21) {
            let g = try PyramidGeometry(width: w, height: h, tileSize: t)
            let dz = DeepZoomGeometry(pyramid: g)
            let osd = OpenSeadragonDZI(width: w, height: h, tileSize: t)
            if floatQuirkSides.contains(max(w, h)) { continue }
            #expect(dz.maxLevel == osd.maxLevel, "\(w)×\(h)")
            for l in dz.levelNumbers {
                let level = dz.level(l)
                let tiles = osd.numTiles(l)
                let size = osd.levelSize(l)
                #expect(level.columns == tiles.x && level.rows == tiles.y, "\(w)×\(h) T=\(t) level \(l)")
                #expect(level.width == size.w && level.height == size.h, "\(w)×\(h) T=\(t) level \(l)")
                checked += 1
            }
        }
        #expect(checked > 20_000)
    }

    @Test func floatQuirkSidesAreExactlyWhereOpenSeadragonDisagrees() {
        for k in 0...40 {
            let side = 1 << k
            let osd = OpenSeadragonDZI(width: side, height: 1, tileSize: 256).maxLevel
            #expect((osd != k) == floatQuirkSides.contains(side), "2^\(k)")
        }
        // Our count stays the exact one.
        #expect(DeepZoomGeometry(pyramid: try! PyramidGeometry(width: 1 << 29, height: 7)).maxLevel == 29)
    }

    @Test func knownExamples() throws {
        // 1000×1000 (the IIIF validator's image): DZ levels 0…10, ours 0…2.
        let dz = DeepZoomGeometry(pyramid: try PyramidGeometry(width: 1000, height: 1000))
        #expect(dz.maxLevel == 10)
        #expect(dz.levelsBelowPyramid == 8)
        #expect(dz.level(10).pyramidLevel == 2)
        #expect(dz.level(8) == DeepZoomLevel(level: 8, width: 250, height: 250, columns: 1, rows: 1, pyramidLevel: 0))
        #expect(dz.level(7) == DeepZoomLevel(level: 7, width: 125, height: 125, columns: 1, rows: 1, pyramidLevel: nil))
        #expect(dz.level(0).width == 1 && dz.level(0).height == 1)
        #expect(dz.source(level: 10, column: 3, row: 2) == .pyramidTile(TileCoordinate(level: 2, row: 2, column: 3)))
        #expect(dz.source(level: 10, column: 4, row: 0) == nil)
        #expect(dz.source(level: 3, column: 0, row: 0) == .shrunkLevelZero(width: 8, height: 8))
        #expect(dz.source(level: 3, column: 1, row: 0) == nil)
        #expect(dz.source(level: 11, column: 0, row: 0) == nil)
        #expect(dz.source(level: -1, column: 0, row: 0) == nil)

        // The contract's 20000×20000: DZ maxLevel 15, our maxLevel 7.
        let big = DeepZoomGeometry(pyramid: try PyramidGeometry(width: 20000, height: 20000))
        #expect(
            big.maxLevel == 15 && big.level(15).columns == 79 && big.level(8).pyramidLevel == 0 && big.level(9).pyramidLevel == 1
                && big.level(7).pyramidLevel == nil)

        // A 1×1 image: a single DeepZoom level 0 that is our level 0.
        let dot = DeepZoomGeometry(pyramid: try PyramidGeometry(width: 1, height: 1))
        #expect(dot.maxLevel == 0 && dot.level(0).pyramidLevel == 0)
    }

    @Test func everyLevelMapsOntoThePyramidTileForTile() throws {
        for (w, h, t) in generatedSizes(count: 3000, seed: 77) {
            let g = try PyramidGeometry(width: w, height: h, tileSize: t)
            let dz = DeepZoomGeometry(pyramid: g)
            #expect(dz.levelsBelowPyramid >= 0)
            #expect(dz.level(0).width == 1 && dz.level(0).height == 1)
            #expect(dz.level(dz.maxLevel).width == w && dz.level(dz.maxLevel).height == h)
            for l in dz.levelNumbers {
                let level = dz.level(l)
                if l > 0 {
                    // Each level halves the one above, rounding up.
                    let up = dz.level(l)
                    let down = dz.level(l - 1)
                    #expect(down.width == (up.width + 1) / 2 && down.height == (up.height + 1) / 2)
                }
                if let z = level.pyramidLevel {
                    let ours = g.level(z)
                    #expect(
                        ours.width == level.width && ours.height == level.height
                            && ours.columns == level.columns && ours.rows == level.rows, "\(w)×\(h) T=\(t) DZ \(l) → \(z)")
                } else {
                    // Below our level 0: one tile, smaller than level 0 on both sides.
                    #expect(level.columns == 1 && level.rows == 1)
                    #expect(level.width <= g.level(0).width && level.height <= g.level(0).height)
                    #expect(dz.source(level: l, column: 0, row: 0) == .shrunkLevelZero(width: level.width, height: level.height))
                }
            }
            // Every pyramid level appears exactly once.
            #expect(dz.levels.compactMap(\.pyramidLevel) == Array(g.levelNumbers))
        }
    }

    @Test func descriptor() throws {
        let dz = DeepZoomGeometry(pyramid: try PyramidGeometry(width: 12000, height: 8000))
        let xml = dz.descriptorXML(format: "png")
        #expect(xml.contains(#"<Image xmlns="http://schemas.microsoft.com/deepzoom/2008" TileSize="256" Overlap="0" Format="png">"#))
        #expect(xml.contains(#"<Size Width="12000" Height="8000"/>"#))
        #expect(xml.hasPrefix("<?xml"))
    }

    @Test func tilePaths() {
        #expect(DeepZoomGeometry.parseTilePath(level: "12", file: "3_4.png")! == (12, 3, 4, "png"))
        #expect(DeepZoomGeometry.parseTilePath(level: "0", file: "0_0.jpeg")! == (0, 0, 0, "jpeg"))
        for (l, f) in [
            ("x", "0_0.png"), ("1", "0_0"), ("1", "-1_0.png"), ("1", "0-0.png"), ("1", "0_0."),
            ("1", "_0.png"), ("1", "0_.png"), ("+1", "0_0.png"), ("1", "0_0_0.png"), ("1", "1e3_0.png"),
            ("1", "9999999999_0.png"), ("", "0_0.png"),
        ] {
            #expect(DeepZoomGeometry.parseTilePath(level: l, file: f) == nil, "\(l)/\(f)")
        }
    }
}
