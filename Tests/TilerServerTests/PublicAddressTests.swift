import Foundation
import Testing
import TilerCore
import TilerHTTP
import TilerTestSupport
@testable import TilerServer

/// `--base-url` and `--trust-proxy`: every URL the server writes starts with the public
/// address, forwarded headers count only when trusted, and no document made for one
/// client's forwarded host is served to another.
@Suite struct PublicAddressTests {
    @Test(arguments: [
        ("https://example.org/tiles", "https", "example.org", "/tiles"),
        ("HTTPS://Example.ORG:8443/tiles/", "https", "example.org:8443", "/tiles"),
        ("http://127.0.0.1:8080", "http", "127.0.0.1:8080", ""),
        ("http://[::1]:9000/a/b%20c/", "http", "[::1]:9000", "/a/b%20c"),
        ("https://tiles.example.org/", "https", "tiles.example.org", ""),
    ])
    func validBaseURLs(text: String, scheme: String, authority: String, path: String) throws {
        let url = try BaseURL(parsing: text)
        #expect(url.scheme == scheme && url.authority == authority && url.path == path)
        #expect(url.description == "\(scheme)://\(authority)\(path)")
    }

    @Test(arguments: [
        ("ftp://example.org/tiles", "http:// or https://"),
        ("example.org/tiles", "scheme"),
        ("https:example.org", "must start with https://"),
        ("https://example.org/tiles?x=1", "query"),
        ("https://example.org/tiles#top", "fragment"),
        ("https://user:secret@example.org/", "user name"),
        ("https:///tiles", "host"),
        ("https://exa mple.org/", "host"),
        ("https://example.org:0/", "host"),
        ("https://example.org:99999/", "host"),
        ("https://[nothex]/", "host"),
        ("https://example.org/a//b", "empty path segment"),
        ("https://example.org/a/../b", "'..'"),
        ("https://example.org/a b", "escaped"),
        ("https://example.org/a\"b", "escaped"),
        ("https://example.org/<script>", "escaped"),
        ("https://example.org/%zz", "escaped"),
    ])
    func invalidBaseURLsSayWhy(text: String, reason: String) {
        #expect {
            try BaseURL(parsing: text)
        } throws: { error in
            "\(error)".contains(reason) && "\(error)".contains(text.prefix(20))
        }
    }

    @Test(arguments: RootKind.allCases) func everyURLStartsWithTheBaseURL(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 1000, height: 700)
        let base = "https://example.org/tiles"
        try withTileServer(root, as: kind, { $0.baseURL = try! BaseURL(parsing: base + "/") }) { port throws in
            // Forwarded headers and Host are ignored: the base URL is the public address.
            let headers = ["Host: internal:1", "X-Forwarded-Host: evil.example", "X-Forwarded-Proto: http"]
            let list = try request(port, "GET", "/images", headers: headers).json
            let entry = try #require((list["images"] as? [[String: Any]])?.first)
            #expect(entry["url"] as? String == "\(base)/images/a")
            #expect((entry["thumbnail"] as? [String: Any])?["url"] as? String == "\(base)/images/a/thumbnail.png")

            let manifest = try request(port, "GET", "/images/a", headers: headers).json
            #expect(manifest["url"] as? String == "\(base)/images/a")
            #expect(manifest["tiles"] as? String == "\(base)/images/a/tiles/{level}/{row}/{column}.png")

            let visible = try request(port, "GET", "/images/a/visible?x=0&y=0&width=1000&height=700&scale=1", headers: headers).json
            let tiles = try #require(visible["tiles"] as? [[String: Any]])
            #expect(tiles.count == 12)
            for t in tiles {
                let url = try #require(t["url"] as? String)
                #expect(url == "\(base)/images/a/tiles/2/\(t["row"]!)/\(t["column"]!).png")
                // The URL, with the base swapped for this server, is the tile.
                let path = String(url.dropFirst(base.count))
                try #require(root.served).expect(try fetch(port, path).body, servedAs: "a/2/\(t["row"]!)/\(t["column"]!).png")
            }

            let info = try request(port, "GET", "/iiif/3/a/info.json", headers: headers)
            #expect(info.json["id"] as? String == "\(base)/iiif/3/a")
            #expect(info.header("Vary") == "Accept")
            let redirect = try request(port, "GET", "/iiif/3/a", headers: headers)
            #expect(redirect.status == 303 && redirect.header("Location") == "\(base)/iiif/3/a/info.json")
            let image = try request(port, "GET", "/iiif/3/a/full/250,/0/default.png", headers: headers)
            #expect(image.header("Link")?.contains("<\(base)/iiif/3/a/full/250,175/0/default.png>;rel=\"canonical\"") == true)

            let presentation = try request(port, "GET", "/iiif/3/a/manifest.json", headers: headers).text
            let collection = try request(port, "GET", "/iiif/3/collection.json", headers: headers).text
            for document in [presentation, collection] {
                #expect(document.contains("\"\(base)/iiif/3/a/manifest.json\""))
                #expect(!document.contains("evil") && !document.contains("internal"))
            }

            // The viewer resolves its assets and API calls against the base URL.
            let page = try request(port, "GET", "/", headers: headers)
            #expect(page.text.contains("<base href=\"\(base)/\">"))
            #expect(page.text.contains("href=\"viewer/viewer.css\"") && page.text.contains("src=\"viewer/viewer.js\""))
            #expect(!page.text.contains("\"/viewer/"))
        }
    }

    @Test(arguments: RootKind.allCases) func withoutABaseURLLinksAreRootRelativeAndIIIFIdsUseTheHost(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 300, height: 200)
        try withTileServer(root, as: kind) { port throws in
            let forwarded = [
                "Host: inside.example:81", "X-Forwarded-Host: outside.example", "X-Forwarded-Proto: https",
                "Forwarded: proto=https;host=other.example",
            ]
            #expect(
                try request(port, "GET", "/images/a", headers: forwarded).json["tiles"] as? String
                    == "/images/a/tiles/{level}/{row}/{column}.png")
            // Untrusted forwarded headers change nothing.
            let info = try request(port, "GET", "/iiif/3/a/info.json", headers: forwarded)
            #expect(info.json["id"] as? String == "http://inside.example:81/iiif/3/a")
            #expect(info.header("Vary") == "Accept, Host")
            let manifest = try request(port, "GET", "/iiif/3/a/manifest.json", headers: forwarded)
            #expect((manifest.json["id"] as? String) == "http://inside.example:81/iiif/3/a/manifest.json")
            #expect(manifest.header("Vary") == "Host" && manifest.header("Cache-Control") == "no-cache")
            let page = try request(port, "GET", "/", headers: forwarded).text
            #expect(!page.contains("<base") && !page.contains("tiler:base"))
        }
    }

    @Test(arguments: RootKind.allCases) func trustedProxyHeadersBuildTheIdsPerRequest(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 300, height: 200)
        try withTileServer(root, as: kind, { $0.trustProxy = true }) { port throws in
            func id(_ headers: [String], _ path: String = "/iiif/3/a/manifest.json") throws -> String? {
                try request(port, "GET", path, headers: headers).json["id"] as? String
            }
            // X-Forwarded-*: the first value of each list.
            #expect(
                try id(["Host: inside:1", "X-Forwarded-Proto: https, http", "X-Forwarded-Host: one.example, inside:1"])
                    == "https://one.example/iiif/3/a/manifest.json")
            // Forwarded wins over X-Forwarded-*; its first element is the outermost proxy's.
            #expect(
                try id([
                    "Host: inside:1", "X-Forwarded-Host: one.example",
                    "Forwarded: for=1.2.3.4;proto=https;host=\"two.example:8443\", for=10.0.0.1;host=inside",
                ])
                    == "https://two.example:8443/iiif/3/a/manifest.json")
            // Only the proto forwarded: the Host stays.
            #expect(try id(["Host: inside:1", "X-Forwarded-Proto: https"], "/iiif/3/a/info.json") == "https://inside:1/iiif/3/a")
            // Implausible values are ignored, not echoed.
            #expect(
                try id(["Host: inside:1", "X-Forwarded-Proto: javascript", "X-Forwarded-Host: a\"b<c>"])
                    == "http://inside:1/iiif/3/a/manifest.json")
            // One client's forwarded host never reaches another: the same document, asked
            // for twice with different hosts, says each client's own.
            #expect(try id(["Host: x", "X-Forwarded-Host: first.example"]) == "http://first.example/iiif/3/a/manifest.json")
            #expect(try id(["Host: x", "X-Forwarded-Host: second.example"]) == "http://second.example/iiif/3/a/manifest.json")
            #expect(
                try id(["Host: x", "X-Forwarded-Host: first.example"], "/iiif/3/collection.json")
                    == "http://first.example/iiif/3/collection.json")
            #expect(
                try id(["Host: x", "X-Forwarded-Host: second.example"], "/iiif/3/collection.json")
                    == "http://second.example/iiif/3/collection.json")
            let r = try request(port, "GET", "/iiif/3/a/info.json", headers: ["Host: x"])
            #expect(r.header("Vary") == "Accept, Host, Forwarded, X-Forwarded-Proto, X-Forwarded-Host")
            // The image API's documents hold no host at all, so they are shared as they are.
            let listing = try request(port, "GET", "/images", headers: ["Host: x", "X-Forwarded-Host: first.example"]).text
            #expect(!listing.contains("first.example") && listing.contains("\"url\":\"/images/a\""))
        }
    }

    /// Issue 31 #8b: a `Host` (or forwarded host) that `--base-url` would refuse (a port
    /// past 65535, an escaped `/`, a user name) is ignored like any implausible one: the
    /// ids use the listening address, never the value sent.
    @Test(arguments: [false, true]) func hostsABaseURLWouldRefuseAreIgnored(trustProxy: Bool) throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 300, height: 200)
        try withTileServer(root, { $0.trustProxy = trustProxy }) { port throws in
            func id(_ headers: [String]) throws -> String? {
                try request(port, "GET", "/iiif/3/a/manifest.json", headers: headers).json["id"] as? String
            }
            for bad in ["evil.example:99999", "evil.example%2fx", "evil.example:0", "a@evil.example", "evil.example:8x", "[::1"] {
                let ignored = try id(["Host: \(bad)"]) ?? "evil"
                #expect(!ignored.contains("evil") && ignored.hasSuffix("/iiif/3/a/manifest.json"), "Host: \(bad)")
                let forwarded = ["Host: inside:1", "X-Forwarded-Host: \(bad)", "Forwarded: host=\"\(bad)\""]
                #expect(try id(forwarded) == "http://inside:1/iiif/3/a/manifest.json", "forwarded \(bad)")
            }
            #expect(try id(["Host: Inside.Example:65535"]) == "http://inside.example:65535/iiif/3/a/manifest.json")
        }
    }

    /// The `/visible` answer with a base URL is the plain answer with every `"url":"`
    /// followed by the base: the same bytes, in the same order, as `JSONWriter` gives.
    @Test func visibleAnswersWithAPrefixMatchTheGenericWriter() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 5000, height: 3000)
        let base = "https://example.org/p\"q"  // a quote to escape (not a valid --base-url; the writer must not care)
        var plain = ""
        try withTileServer(root) { port throws in
            plain = try fetch(port, "/images/a/visible?x=100&y=50&width=2000&height=1500&scale=0.5&margin=1").text
        }
        var json = JSONWriter()
        json.value(base)
        let escaped = Array(json.bytes.dropFirst().dropLast())
        let store = TileStore(configuration: ServerConfiguration(root: root.path))
        defer { store.stopRescanning() }
        let pyramid = try #require(store.pyramids.first)
        let query = try #require(
            try VisibleTilesQuery.parsingCommonForm(Array("x=100&y=50&width=2000&height=1500&scale=0.5&margin=1".utf8)[...]))
        let answer = try pyramid.geometry.visibleTilesPlan(for: query, maximumTiles: 4096)
        let prefixed = String(decoding: visibleDocument(answer, of: pyramid, linkPrefix: escaped), as: UTF8.self)
        #expect(prefixed == plain.replacingOccurrences(of: #""url":""#, with: #""url":"https://example.org/p\"q"#))
        #expect(prefixed.contains(#""url":"https://example.org/p\"q/images/a/tiles/"#))
    }
}
