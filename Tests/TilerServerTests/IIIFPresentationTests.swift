import Foundation
import Testing
import TilerCore
import TilerTestSupport
@testable import TilerServer

/// IIIF Presentation API 3.0: `/iiif/3/ID/manifest.json` and `/iiif/3/collection.json`,
/// loaded by the iiif-prezi3 models (PyPI) through `scripts/check-iiif-presentation`,
/// which follows every link (manifests, image services, images, thumbnails) on this server;
/// over folders, archives and archives in a bucket (`RootKind`).
@Suite struct IIIFPresentationTests {
    @Test(arguments: RootKind.allCases) func documentsLoadIntoIIIFPrezi3AndPointAtThisServer(_ kind: RootKind) throws {
        let port = try ViewerPyramids.port(kind)
        let script = repositoryRoot.appendingPathComponent("scripts/check-iiif-presentation").path
        let collection = "http://127.0.0.1:\(port)/iiif/3/collection.json"
        let output: String
        do {
            output = try runTool("/usr/bin/env", ["python3", script, collection])
        } catch {
            Issue.record("\(error)\n(run scripts/install-deps test for iiif-prezi3)")
            return
        }
        let report = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        let manifests = try #require(report["manifests"] as? [[String: Any]])
        let ids = [ValidatorImage.id, "film.dzi", "odd-123", "panorama", "tiny"]
        #expect(manifests.map { $0["manifest"] as? String } == ids.map { "http://127.0.0.1:\(port)/iiif/3/\($0)/manifest.json" })
        // Each image service is this server's IIIF Image API endpoint for that image.
        #expect(manifests.map { $0["service"] as? String } == ids.map { "http://127.0.0.1:\(port)/iiif/3/\($0)" })
        let odd = try #require(manifests.first { ($0["manifest"] as? String)?.contains("odd-123") == true })
        #expect(odd["width"] as? Int == 1537 && odd["height"] as? Int == 997)
    }

    @Test(arguments: RootKind.allCases) func manifestShape(_ kind: RootKind) throws {
        let port = try ViewerPyramids.port(kind)
        // JPEG tiles (PNG from sources: `ViewerPyramids.sourcesFormat`), and so JPEG images.
        let (ext, mime) =
            try ViewerPyramids.expected(kind).manifest("panorama").format == .jpeg ? ("jpg", "image/jpeg") : ("png", "image/png")
        let r = try fetch(port, "/iiif/3/panorama/manifest.json")
        #expect(r.status == 200)
        #expect(r.header("Content-Type") == #"application/ld+json;profile="http://iiif.io/api/presentation/3/context.json""#)
        #expect(r.header("Access-Control-Allow-Origin") == "*")
        let m = r.json
        let base = "http://127.0.0.1/iiif/3/panorama"  // `fetch` sends Host: 127.0.0.1
        #expect(m["@context"] as? String == "http://iiif.io/api/presentation/3/context.json")
        #expect(m["id"] as? String == base + "/manifest.json" && m["type"] as? String == "Manifest")
        #expect((m["label"] as? [String: [String]]) == ["none": ["panorama"]])
        let thumbnail = try #require((m["thumbnail"] as? [[String: Any]])?.first)
        #expect(thumbnail["id"] as? String == "http://127.0.0.1/images/panorama/thumbnail.\(ext)")
        #expect(thumbnail["format"] as? String == mime && thumbnail["width"] as? Int == 256)
        let canvas = try #require((m["items"] as? [[String: Any]])?.first)
        #expect(canvas["type"] as? String == "Canvas" && canvas["width"] as? Int == 2400 && canvas["height"] as? Int == 600)
        let page = try #require((canvas["items"] as? [[String: Any]])?.first)
        let annotation = try #require((page["items"] as? [[String: Any]])?.first)
        #expect(annotation["motivation"] as? String == "painting" && annotation["target"] as? String == canvas["id"] as? String)
        let body = try #require(annotation["body"] as? [String: Any])
        #expect(body["id"] as? String == base + "/full/max/0/default.\(ext)")
        #expect(body["format"] as? String == mime && body["width"] as? Int == 2400 && body["height"] as? Int == 600)
        let service = try #require((body["service"] as? [[String: Any]])?.first)
        #expect(
            service["id"] as? String == base && service["type"] as? String == "ImageService3"
                && service["profile"] as? String == "level2")

        // Revalidation, HEAD, and unknown images.
        let etag = try #require(r.header("ETag"))
        #expect(try fetch(port, "/iiif/3/panorama/manifest.json", headers: ["If-None-Match: \(etag)"]).status == 304)
        let head = try fetch(port, "/iiif/3/panorama/manifest.json", method: "HEAD")
        #expect(head.status == 200 && head.body.isEmpty && head.header("Content-Length") == r.header("Content-Length"))
        let missing = try fetch(port, "/iiif/3/nope/manifest.json")
        #expect(missing.status == 404 && missing.errorMessage == "no image named 'nope'")
    }

    /// The painted image is the largest this server draws: a canvas beyond the IIIF
    /// limits is painted by a smaller image that the service really serves.
    @Test(arguments: RootKind.allCases) func theBodyFitsTheIIIFLimits(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try root.addPyramid("wide", width: 30_000, height: 1000, tilesThrough: 0)
        try withTileServer(root, as: kind) { port throws in
            let m = try fetch(port, "/iiif/3/wide/manifest.json").json
            let canvas = try #require((m["items"] as? [[String: Any]])?.first)
            let annotation = try #require(((canvas["items"] as? [[String: Any]])?.first?["items"] as? [[String: Any]])?.first)
            let body = try #require(annotation["body"] as? [String: Any])
            #expect(canvas["width"] as? Int == 30_000 && canvas["height"] as? Int == 1000)
            #expect(body["width"] as? Int == 10_000 && body["height"] as? Int == 333)
        }
    }

    @Test(arguments: RootKind.allCases) func theCollectionIsEveryImageSortedById(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        for id in ["b", "a", "c.1", "A"] { try root.addPyramid(id, width: 300, height: 200) }
        try withTileServer(root, as: kind) { port throws in
            let c = try fetch(port, "/iiif/3/collection.json")
            #expect(c.status == 200 && c.json["type"] as? String == "Collection")
            let items = try #require(c.json["items"] as? [[String: Any]])
            #expect(items.map { $0["id"] as? String } == ["A", "a", "b", "c.1"].map { "http://127.0.0.1/iiif/3/\($0)/manifest.json" })
            #expect(items.allSatisfy { $0["type"] as? String == "Manifest" && $0["thumbnail"] != nil })
            // A pyramid cut later is listed without a restart.
            try root.addPyramid("d", width: 300, height: 200)
            try root.publish()
            #expect(eventually { ((try? fetch(port, "/iiif/3/collection.json").json["items"]) as? [Any])?.count == 5 })
        }
    }
}
