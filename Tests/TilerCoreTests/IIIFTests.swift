import Foundation
import Testing
import TilerTestSupport
@testable import TilerCore

@Suite struct IIIFTests {
    let g1000 = try! PyramidGeometry(width: 1000, height: 1000)
    let g300x200 = try! PyramidGeometry(width: 300, height: 200)

    func image(_ path: String) throws -> IIIFImageRequest {
        guard case let .image(r) = try IIIFRoute.parse(path: Substring(path)) else {
            Issue.record("\(path) is not an image request")
            throw IIIFError.notFound(path)
        }
        return r
    }

    func plan(_ path: String, _ g: PyramidGeometry, limits: IIIFLimits = .default) throws -> IIIFImagePlan {
        try IIIFImagePlan(try image(path), geometry: g, limits: limits)
    }

    func status(_ body: () throws -> Void) -> Int {
        do { try body(); return 200 } catch let e as IIIFError { return e.status } catch { return -1 }
    }

    @Test func routes() throws {
        #expect(try IIIFRoute.parse(path: "abc") == .base(identifier: "abc"))
        #expect(try IIIFRoute.parse(path: "abc/info.json") == .info(identifier: "abc"))
        #expect(try IIIFRoute.parse(path: "67352ccc%2Dd1b0/info.json") == .info(identifier: "67352ccc-d1b0"))
        #expect(try IIIFRoute.parse(path: "a%2Fb/info.json") == .info(identifier: "a/b"))
        #expect(try IIIFRoute.parse(path: "caf%C3%A9").identifier == "café")
        let r = try image("id/full/max/0/default.jpg")
        #expect(
            r
                == IIIFImageRequest(
                    identifier: "id", region: .full, size: IIIFSize(.max), rotation: IIIFRotation(),
                    quality: .default, format: .jpg))
        // Not IIIF URLs: 404 (the validator's unescaped slash in an identifier).
        for p in ["", "a/b/full/max/0/default.jpg", "id/full/max/0", "id/other.json", "/id/info.json", "id/info.json/x"] {
            #expect(status { _ = try IIIFRoute.parse(path: Substring(p)) } == 404, "\(p)")
        }
        // Broken escapes, bad parameters: 400.
        for p in [
            "a%2/info.json", "a%zz", "%FF%FE/info.json", "id/full/max/0/default", "id/full/max/0/default.gif",
            "id/full/max/0/fancy.jpg", "id/nope/max/0/default.jpg", "id/full/nope/0/default.jpg",
            "id/full/max/nope/default.jpg", "id/full/max/0/default.jpg%",
        ] {
            #expect(status { _ = try IIIFRoute.parse(path: Substring(p)) } == 400, "\(p)")
        }
    }

    @Test func regions() throws {
        #expect(try IIIFRoute.parseRegion("full") == .full)
        #expect(try IIIFRoute.parseRegion("square") == .square)
        #expect(try IIIFRoute.parseRegion("1,2,3,4") == .pixels(x: 1, y: 2, width: 3, height: 4))
        #expect(try IIIFRoute.parseRegion("pct:1.5,2,3.25,.5") == .percent(x: 1.5, y: 2, width: 3.25, height: 0.5))
        for bad in [
            "", "1,2,3", "1,2,3,4,5", "-1,2,3,4", "1,2,0,4", "1,2,3,0", "1.5,2,3,4", "pct:1,2,3", "pct:1,2,0,3",
            "pct:-1,2,3,4", "pct:1,2,3,1e2", "pct:1,2,3,nan", "Full", " full", "1, 2,3,4", "pct:1..2,0,1,1",
        ] {
            #expect(status { _ = try IIIFRoute.parseRegion(bad) } == 400, "\(bad)")
        }
    }

    @Test func sizes() throws {
        #expect(try IIIFRoute.parseSize("max") == IIIFSize(.max))
        #expect(try IIIFRoute.parseSize("^max") == IIIFSize(.max, upscale: true))
        #expect(try IIIFRoute.parseSize("150,") == IIIFSize(.width(150)))
        #expect(try IIIFRoute.parseSize("^,150") == IIIFSize(.height(150), upscale: true))
        #expect(try IIIFRoute.parseSize("pct:50") == IIIFSize(.percent(50)))
        #expect(try IIIFRoute.parseSize("^pct:200.5") == IIIFSize(.percent(200.5), upscale: true))
        #expect(try IIIFRoute.parseSize("10,20") == IIIFSize(.exact(width: 10, height: 20)))
        #expect(try IIIFRoute.parseSize("^!10,20") == IIIFSize(.confined(width: 10, height: 20), upscale: true))
        for bad in [
            "", "full", ",", "!10,", "!,10", "0,", ",0", "0,10", "pct:0", "pct:", "pct:-5", "10,20,30", "^^max",
            "!^10,20", "max ", "10.5,", "a,b", "^", "!",
        ] {
            #expect(status { _ = try IIIFRoute.parseSize(bad) } == 400, "\(bad)")
        }
    }

    /// 2.1's sizes: `full` is `max`, there is no `^`, and every explicit size may exceed
    /// the region (`sizeAboveFull`); the rest of the syntax is 3.0's.
    @Test func sizesOfVersion2() throws {
        func size(_ text: String) throws -> IIIFSize { try IIIFRoute.parseSize(text, version: .v2) }
        #expect(try size("full") == IIIFSize(.max) && size("max") == IIIFSize(.max))
        #expect(try size("150,") == IIIFSize(.width(150), upscale: true))
        #expect(try size(",150") == IIIFSize(.height(150), upscale: true))
        #expect(try size("pct:200") == IIIFSize(.percent(200), upscale: true))
        #expect(try size("10,20") == IIIFSize(.exact(width: 10, height: 20), upscale: true))
        #expect(try size("!10,20") == IIIFSize(.confined(width: 10, height: 20), upscale: true))
        for bad in ["", "^max", "^150,", "^pct:50", "^!10,20", "Full", "full ", "0,", "pct:0", "!10,", "10.5,", "^"] {
            #expect(status { _ = try size(bad) } == 400, "\(bad)")
        }
        guard case let .image(r) = try IIIFRoute.parse(path: "id/square/full/!90/gray.png", version: .v2) else {
            Issue.record("not an image request")
            return
        }
        #expect(
            r
                == IIIFImageRequest(
                    identifier: "id", region: .square, size: IIIFSize(.max), rotation: IIIFRotation(mirror: true, degrees: 90),
                    quality: .gray, format: .png))
        #expect(status { _ = try IIIFRoute.parse(path: "id/full/^max/0/default.jpg", version: .v2) } == 400)
        #expect(status { _ = try IIIFRoute.parse(path: "id/full/full/0/default.jpg", version: .v3) } == 400)
    }

    /// The sizes 2.1 draws: as 3.0's with `^` for explicit sizes, and `full` and `max`
    /// never above the region; the limits apply alike.
    @Test func sizeResolutionOfVersion2() throws {
        func wh(_ size: String, _ g: PyramidGeometry, limits: IIIFLimits = .default) throws -> [Int] {
            guard case let .image(r) = try IIIFRoute.parse(path: Substring("i/full/\(size)/0/default.jpg"), version: .v2) else {
                return []
            }
            let plan = try IIIFImagePlan(r, geometry: g, limits: limits)
            return [plan.width, plan.height]
        }
        #expect(try wh("full", g300x200) == [300, 200] && wh("max", g300x200) == [300, 200])
        #expect(try wh("150,", g300x200) == [150, 100] && wh(",50", g300x200) == [75, 50])
        #expect(try wh("!100,100", g300x200) == [100, 67])
        for (size, v3) in [("1500,1500", "^1500,1500"), (",1500", "^,1500"), ("pct:200", "^pct:200"), ("!2000,3000", "^!2000,3000")] {
            let expected = try plan("i/full/\(v3)/0/default.jpg", g1000)
            #expect(try wh(size, g1000) == [expected.width, expected.height], "\(size)")
        }
        let small = IIIFLimits(maxWidth: 400, maxHeight: 1000, maxArea: 1_000_000)
        #expect(try wh("full", g1000, limits: small) == [400, 400] && wh("max", g300x200, limits: small) == [300, 200])
        #expect(status { _ = try wh("500,", g1000, limits: small) } == 400)
    }

    /// Canonical forms: 3.0's `max`, `w,h`, `^w,h`; 2.1's `full`, `w,` (when the height
    /// follows from the width) and `w,h`. Each parses back to the same plan.
    @Test func canonicalForms() throws {
        for (path, v3, v2) in [
            ("full/max/0/default.jpg", "full/max/0/default.jpg", "full/full/0/default.jpg"),
            ("full/150,/0/default.jpg", "full/150,100/0/default.jpg", "full/150,/0/default.jpg"),
            ("full/,50/90/gray.png", "full/75,50/90/gray.png", "full/75,/90/gray.png"),
            ("0,0,100,100/100,50/!22.5/default.webp", "0,0,100,100/100,50/!22.5/default.webp", "0,0,100,100/100,50/!22.5/default.webp"),
            ("square/^400,/0/bitonal.png", "50,0,200,200/^400,400/0/bitonal.png", "50,0,200,200/400,/0/bitonal.png"),
        ] {
            let p = try plan("i/" + path, g300x200)
            #expect(p.canonicalParameters(in: g300x200, version: .v3) == v3, "\(path)")
            #expect(p.canonicalParameters(in: g300x200, version: .v2) == v2, "\(path)")
            for (version, canonical) in [(IIIFVersion.v3, v3), (.v2, v2)] {
                guard case let .image(r) = try IIIFRoute.parse(path: Substring("i/" + canonical), version: version) else { continue }
                let again = try IIIFImagePlan(r, geometry: g300x200)
                #expect(again == p, "\(canonical) in \(version.name)")
            }
        }
    }

    @Test func rotations() throws {
        #expect(try IIIFRoute.parseRotation("0") == IIIFRotation())
        #expect(try IIIFRoute.parseRotation("!180") == IIIFRotation(mirror: true, degrees: 180))
        #expect(try IIIFRoute.parseRotation("22.5") == IIIFRotation(degrees: 22.5))
        #expect(try IIIFRoute.parseRotation("360") == IIIFRotation(degrees: 0))
        #expect(IIIFRotation(degrees: 270).isRightAngle && !IIIFRotation(degrees: 22.5).isRightAngle)
        for bad in ["", "!", "-90", "361", "90deg", "!!90", "1e2", "0x10"] {
            #expect(status { _ = try IIIFRoute.parseRotation(bad) } == 400, "\(bad)")
        }
    }

    @Test func regionResolution() throws {
        #expect(try plan("i/full/max/0/default.jpg", g300x200).region == PixelRect(x: 0, y: 0, width: 300, height: 200))
        #expect(try plan("i/square/max/0/default.jpg", g300x200).region == PixelRect(x: 50, y: 0, width: 200, height: 200))
        // Clipped at the image's edge.
        #expect(try plan("i/250,150,100,100/max/0/default.jpg", g300x200).region == PixelRect(x: 250, y: 150, width: 50, height: 50))
        #expect(try plan("i/pct:10,10,50,50/max/0/default.jpg", g1000).region == PixelRect(x: 100, y: 100, width: 500, height: 500))
        #expect(try plan("i/pct:90,0,50,100/max/0/default.jpg", g1000).region == PixelRect(x: 900, y: 0, width: 100, height: 1000))
        // Wholly outside: 400.
        for p in ["i/300,0,10,10/max/0/default.jpg", "i/0,200,10,10/max/0/default.jpg", "i/pct:100,0,10,10/max/0/default.jpg"] {
            #expect(status { _ = try plan(p, g300x200) } == 400, "\(p)")
        }
    }

    @Test func sizeResolution() throws {
        func wh(_ p: String, _ g: PyramidGeometry, limits: IIIFLimits = .default) throws -> [Int] {
            let r = try plan(p, g, limits: limits)
            return [r.width, r.height]
        }
        #expect(try wh("i/full/max/0/default.jpg", g300x200) == [300, 200])
        #expect(try wh("i/full/150,/0/default.jpg", g300x200) == [150, 100])
        #expect(try wh("i/full/,50/0/default.jpg", g300x200) == [75, 50])
        #expect(try wh("i/full/pct:50/0/default.jpg", g300x200) == [150, 100])
        #expect(try wh("i/full/100,100/0/default.jpg", g300x200) == [100, 100])
        #expect(try wh("i/full/!100,100/0/default.jpg", g300x200) == [100, 67])
        #expect(try wh("i/full/!300,50/0/default.jpg", g300x200) == [75, 50])
        #expect(try wh("i/full/^600,/0/default.jpg", g300x200) == [600, 400])
        #expect(try wh("i/full/^pct:200/0/default.jpg", g1000) == [2000, 2000])
        #expect(try wh("i/full/^!2000,500/0/default.jpg", g1000) == [500, 500])
        #expect(try wh("i/full/^!2000,3000/0/default.jpg", g1000) == [2000, 2000])
        // The validator's level 1 "no upscaling without ^" checks.
        for p in ["1500,1500", ",1500", "1500,", "pct:200", "!2000,3000"] {
            #expect(status { _ = try wh("i/full/\(p)/0/default.jpg", g1000) } == 400, "\(p)")
        }
        // Limits: max shrinks to fit; explicit sizes beyond them are refused; ^max grows to them.
        let small = IIIFLimits(maxWidth: 400, maxHeight: 1000, maxArea: 1_000_000)
        #expect(try wh("i/full/max/0/default.jpg", g1000, limits: small) == [400, 400])
        #expect(try wh("i/full/^max/0/default.jpg", g300x200, limits: small) == [400, 266])
        #expect(status { _ = try wh("i/full/500,/0/default.jpg", g1000, limits: small) } == 400)
        let area = IIIFLimits(maxWidth: 10_000, maxHeight: 10_000, maxArea: 250_000)
        #expect(try wh("i/full/max/0/default.jpg", g1000, limits: area) == [500, 500])
        // Too small to draw.
        #expect(status { _ = try wh("i/full/pct:0.01/0/default.jpg", g300x200) } == 400)
    }

    @Test func sourceLevelIsNeverCoarserThanNeeded() throws {
        let g = try PyramidGeometry(width: 1001, height: 777)  // levels 0…2: 251, 501, 1001 wide
        #expect(try plan("i/full/max/0/default.png", g).sourceLevel(in: g) == 2)
        #expect(try plan("i/full/501,/0/default.png", g).sourceLevel(in: g) == 2)  // 501/1001 > 1/2
        #expect(try plan("i/full/500,/0/default.png", g).sourceLevel(in: g) == 1)
        #expect(try plan("i/full/250,/0/default.png", g).sourceLevel(in: g) == 0)
        #expect(try plan("i/full/10,10/0/default.png", g).sourceLevel(in: g) == 0)
        // Distorted: the tighter axis decides.
        #expect(try plan("i/full/200,700/0/default.png", g).sourceLevel(in: g) == 2)
        // Over many random requests: the chosen level's scale covers the need, and the next
        // coarser one does not.
        var rng = SplitMix(seed: 3)
        for _ in 0..<2000 {
            let x = Int.random(in: 0..<1001, using: &rng), y = Int.random(in: 0..<777, using: &rng)
            let w = Int.random(in: 1...1001, using: &rng), h = Int.random(in: 1...777, using: &rng)
            let ow = Int.random(in: 1...min(w, 1001 - x), using: &rng)
            let oh = Int.random(in: 1...min(h, 777 - y), using: &rng)
            let p = try plan("i/\(x),\(y),\(w),\(h)/\(ow),\(oh)/0/default.png", g)
            let z = p.sourceLevel(in: g)
            let need = max(Double(p.width) / Double(p.region.width), Double(p.height) / Double(p.region.height))
            #expect(g.scale(of: z) >= need || z == g.maxLevel)
            if z > 0 { #expect(g.scale(of: z - 1) < need) }
            let r = p.rectInLevel(z, of: g)
            let l = g.level(z)
            #expect(r.x >= 0 && r.y >= 0 && r.maxX <= l.width && r.maxY <= l.height && r.width >= 1 && r.height >= 1)
            // The level rectangle covers the region.
            #expect(r.x * l.downscale <= p.region.x && r.maxX * l.downscale >= min(p.region.maxX, g.width))
        }
    }

    @Test func exactTilesAreFoundForEveryTileOfEveryLevel() throws {
        for g in [
            g1000, g300x200, try PyramidGeometry(width: 4097, height: 1500), try PyramidGeometry(width: 700, height: 700, tileSize: 100),
        ] {
            for z in g.levelNumbers {
                let l = g.level(z)
                for row in 0..<l.rows {
                    for column in 0..<l.columns {
                        let tile = TileCoordinate(level: z, row: row, column: column)
                        let r = g.rectInImage(tile), s = g.rectInLevel(tile)
                        let region = "\(r.x),\(r.y),\(r.width),\(r.height)"
                        // OpenSeadragon's IIIF 3 form (w,h) and the w, form.
                        for size in ["\(s.width),\(s.height)", "\(s.width),"] {
                            let p = try plan("i/\(region)/\(size)/0/default.png", g)
                            if size.hasSuffix(",") && p.height != s.height { continue }  // rounding of w, on odd edges
                            #expect(p.exactTile(in: g, format: .png) == tile, "\(region)/\(size)")
                            #expect(p.exactTile(in: g, format: .jpeg) == nil)
                        }
                        #expect(try plan("i/\(region)/\(s.width),\(s.height)/90/default.png", g).exactTile(in: g, format: .png) == nil)
                        #expect(try plan("i/\(region)/\(s.width),\(s.height)/0/gray.png", g).exactTile(in: g, format: .png) == nil)
                    }
                }
            }
        }
        // Not aligned to a tile: rendered.
        #expect(try plan("i/1,0,256,256/256,256/0/default.png", g1000).exactTile(in: g1000, format: .png) == nil)
        #expect(try plan("i/0,0,256,256/128,128/0/default.png", g1000).exactTile(in: g1000, format: .png) == nil)
    }

    @Test func infoDocument() throws {
        let info = IIIFImageInfo(id: "http://h:1/iiif/3/x", geometry: g1000, format: .png)
        let data = try JSONEncoder().encode(info)
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(json["@context"] as? String == "http://iiif.io/api/image/3/context.json")
        #expect(json["id"] as? String == "http://h:1/iiif/3/x")
        #expect(json["type"] as? String == "ImageService3")
        #expect(json["protocol"] as? String == "http://iiif.io/api/image")
        #expect(json["profile"] as? String == "level2")
        #expect(json["width"] as? Int == 1000 && json["height"] as? Int == 1000)
        let tiles = try #require(json["tiles"] as? [[String: Any]])
        #expect(tiles.count == 1 && tiles[0]["width"] as? Int == 256 && tiles[0]["scaleFactors"] as? [Int] == [1, 2, 4])
        let sizes = try #require(json["sizes"] as? [[String: Int]])
        #expect(sizes == [["width": 250, "height": 250], ["width": 500, "height": 500], ["width": 1000, "height": 1000]])
        #expect(json["maxArea"] as? Int == IIIFLimits.default.maxArea)
        #expect((json["extraQualities"] as? [String])?.contains("bitonal") == true)
        #expect((json["extraFeatures"] as? [String])?.contains("mirroring") == true)
    }

    /// 2.1's info.json: `@id`, the level 2 profile's URI then what is offered beyond it
    /// (formats, qualities, features, limits), the same sizes and tiles as 3.0's.
    @Test func infoDocumentOfVersion2() throws {
        let limits = IIIFLimits(maxWidth: 800, maxHeight: 900, maxArea: 700_000)
        let info = IIIFImageInfo(id: "http://h:1/iiif/2/x", geometry: g1000, format: .jpeg, limits: limits, version: .v2)
        let json = try #require(try JSONSerialization.jsonObject(with: try JSONEncoder().encode(info)) as? [String: Any])
        #expect(json["@context"] as? String == "http://iiif.io/api/image/2/context.json")
        #expect(json["@id"] as? String == "http://h:1/iiif/2/x" && json["id"] == nil && json["type"] == nil)
        #expect(json["protocol"] as? String == "http://iiif.io/api/image")
        #expect(json["width"] as? Int == 1000 && json["height"] as? Int == 1000)
        let profile = try #require(json["profile"] as? [Any])
        #expect(profile.count == 2 && profile.first as? String == "http://iiif.io/api/image/2/level2.json")
        let offered = try #require(profile.last as? [String: Any])
        #expect(offered["formats"] as? [String] == ["webp"])
        #expect(offered["qualities"] as? [String] == ["color", "gray", "bitonal"])
        let supports = try #require(offered["supports"] as? [String])
        #expect(Set(["mirroring", "rotationArbitrary", "regionSquare", "sizeAboveFull", "canonicalLinkHeader"]).isSubset(of: supports))
        #expect(!supports.contains("sizeUpscaling"))
        #expect(offered["maxWidth"] as? Int == 800 && offered["maxHeight"] as? Int == 900 && offered["maxArea"] as? Int == 700_000)
        #expect(json["maxWidth"] == nil)
        let tiles = try #require(json["tiles"] as? [[String: Any]])
        #expect(tiles.count == 1 && tiles[0]["width"] as? Int == 256 && tiles[0]["scaleFactors"] as? [Int] == [1, 2, 4])
        // Only the levels the limits allow.
        #expect(json["sizes"] as? [[String: Int]] == [["width": 250, "height": 250], ["width": 500, "height": 500]])
    }

    @Test func percentDecoding() {
        #expect(percentDecode("a%20b%2Fc") == "a b/c")
        #expect(percentDecode("plain") == "plain")
        #expect(percentDecode("%") == nil && percentDecode("%4") == nil && percentDecode("%GG") == nil)
        #expect(percentDecode("%C3") == nil)  // truncated UTF-8
    }

    /// Issue #11 item 5: sizes and regions from the request are computed in doubles and
    /// may exceed `Int`; they are refused with a 400, never trapped on.
    @Test func requestArithmeticNeverTraps() throws {
        let huge = "999999999999999999999999"
        for (geometry, path) in [
            (try PyramidGeometry(width: 600, height: 600), "full/^pct:\(huge)/0/default.png"),
            (try PyramidGeometry(width: 600, height: 600), "pct:\(huge),0,10,10/max/0/default.png"),
            (try PyramidGeometry(width: 600, height: 600), "pct:0,\(huge),10,10/max/0/default.png"),
            (try PyramidGeometry(width: 600, height: 600), "pct:0,0,\(huge),\(huge)/^pct:\(huge)/0/default.png"),
            (try PyramidGeometry(width: 1, height: 1 << 40, tileSize: 1024), "full/999999999,/0/default.png"),
            (try PyramidGeometry(width: 1 << 40, height: 1, tileSize: 1024), "full/,999999999/0/default.png"),
            (try PyramidGeometry(width: 1, height: 1 << 40, tileSize: 1024), "full/!999999999,999999999/0/default.png"),
            (try PyramidGeometry(width: 1 << 40, height: 1 << 40, tileSize: 1024), "full/^max/0/default.png"),
        ] {
            guard case let .image(request) = try IIIFRoute.parse(path: Substring("x/" + path)) else {
                Issue.record("\(path) did not parse")
                continue
            }
            let limits = IIIFLimits(maxWidth: .max, maxHeight: .max, maxArea: .max)
            for l in [IIIFLimits.default, limits] {
                do {
                    let plan = try IIIFImagePlan(request, geometry: geometry, limits: l)
                    // Allowed by limits of Int.max: then its numbers must be sane.
                    #expect(plan.width >= 1 && plan.height >= 1, "\(path)")
                } catch {
                    #expect(error.status == 400, "\(path)")
                }
            }
        }
    }
}
