import Foundation
import Testing
import TilerCore
import TilerTestSupport
@testable import TilerServer

/// `/images?sort=…&album=…`, `/albums`, the albums' IIIF collections and what IIIF
/// Presentation manifests say of a photo: over folders and archives (metadata written into
/// the manifests, as `tiler cut --album --title` records it), and under `--access`.
@Suite struct AlbumRoutesTests {
    /// Writes `metadata` into the manifest of the pyramid `id` of `root`.
    static func add(
        _ id: String, _ metadata: PhotoMetadata?, to root: PyramidRoot, width: Int = 300, height: Int = 200
    ) throws {
        var manifest = try root.addPyramid(id, width: width, height: height, writeManifest: false)
        manifest.metadata = metadata
        try root.write(manifest)
    }

    static func ids(_ r: RawResponse) -> [String] {
        (r.json["images"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
    }

    /// Generated dates with generated offsets (some undated, some equal instants written
    /// with different offsets): `sort=date` is by instant, oldest first, and `-date` newest
    /// first, ties in name order both ways, undated last both ways. The instants the test
    /// expects come from Foundation's ISO 8601 parser, not from tiler's.
    @Test(arguments: [RootKind.folders, .archives]) func sortByDateComparesInstants(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        var random = SplitMix(seed: 34)
        var dates: [String: String] = [:]
        // The example of the contract: 01:30 UTC on 2 May comes after 00:10 UTC.
        dates["late-evening"] = "2024-05-01T23:30:00-02:00"
        dates["just-after-midnight"] = "2024-05-02T00:10:00+00:00"
        for k in 0..<30 {
            let id = "photo-\(k)"
            guard random.next() % 5 != 0 else {
                try Self.add(id, PhotoMetadata(title: "Photo \(k)", album: "generated"), to: root)
                continue
            }
            // Few distinct instants, so that ties are common.
            let utcMinutes = Int(random.next() % 6) * 97
            let offsetMinutes = (Int(random.next() % 9) - 4) * 90
            let local = Date(timeIntervalSince1970: 1_714_521_600 + Double((utcMinutes + offsetMinutes) * 60))
            var c = Calendar(identifier: .gregorian)
            c.timeZone = TimeZone(identifier: "UTC")!
            let d = c.dateComponents([.year, .month, .day, .hour, .minute, .second], from: local)
            let sign = offsetMinutes < 0 ? "-" : "+"
            let o = abs(offsetMinutes)
            dates[id] = String(
                format: "%04d-%02d-%02dT%02d:%02d:%02d%@%02d:%02d", d.year!, d.month!, d.day!, d.hour!, d.minute!, d.second!,
                sign, o / 60, o % 60)
        }
        for (id, date) in dates {
            try Self.add(id, PhotoMetadata(title: id.capitalized, dateTaken: date, album: "generated"), to: root)
        }
        try withTileServer(root, as: kind) { port throws in
            let byName = Self.ids(try fetch(port, "/images?limit=100"))
            #expect(byName.count == 32)
            #expect(Self.ids(try fetch(port, "/images?sort=name&limit=100")) == byName)
            let parser = ISO8601DateFormatter()
            let rank = Dictionary(uniqueKeysWithValues: byName.enumerated().map { ($1, $0) })
            let dated = byName.filter { dates[$0] != nil }
            let undated = byName.filter { dates[$0] == nil }
            func instant(_ id: String) -> Date { parser.date(from: dates[id]!)! }
            let oldest = dated.sorted { instant($0) != instant($1) ? instant($0) < instant($1) : rank[$0]! < rank[$1]! }
            let newest = dated.sorted { instant($0) != instant($1) ? instant($0) > instant($1) : rank[$0]! < rank[$1]! }
            let ascending = Self.ids(try fetch(port, "/images?sort=date&limit=100"))
            let descending = Self.ids(try fetch(port, "/images?sort=-date&limit=100"))
            #expect(ascending == oldest + undated)
            #expect(descending == newest + undated)
            let i = try #require(ascending.firstIndex(of: "late-evening")),
                j = try #require(ascending.firstIndex(of: "just-after-midnight"))
            #expect(i > j, "2024-05-01T23:30:00-02:00 is after 2024-05-02T00:10:00+00:00")
            // Paged, with the album filter too, the same order.
            var paged: [String] = []
            for offset in stride(from: 0, to: 32, by: 7) {
                paged += Self.ids(try fetch(port, "/images?album=generated&sort=-date&offset=\(offset)&limit=7"))
            }
            #expect(paged == descending)
        }
    }

    /// Albums in natural order with counts and covers (the first image in name order);
    /// `album=` filters `/images`; bad parameters are 400 with a message.
    @Test(arguments: [RootKind.folders, .archives]) func albumsAndTheAlbumFilter(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        let members: [(String, String?, String?)] = [
            ("b1", "Bridge 10", "Trip 10"), ("b2", "bridge 2", "Trip 10"), ("c", nil, "trip 2"),
            ("e1", "Été", "Été à Paris"), ("loose", "Loose", nil), ("d", "Zebra", "trip 2"),
        ]
        for (id, title, album) in members { try Self.add(id, PhotoMetadata(title: title, album: album), to: root) }
        try withTileServer(root, as: kind) { port throws in
            let r = try fetch(port, "/albums")
            #expect(r.status == 200 && r.header("Content-Type") == "application/json")
            let albums = try #require(r.json["albums"] as? [[String: Any]])
            #expect(albums.map { $0["name"] as? String } == ["trip 2", "Trip 10", "Été à Paris"])
            #expect(albums.map { $0["count"] as? Int } == [2, 2, 1])
            let covers = albums.map { ($0["cover"] as? [String: Any])?["id"] as? String }
            #expect(covers == ["c", "b2", "e1"])  // "c" by its id, before "Zebra"; "bridge 2" before "Bridge 10"
            #expect((albums[0]["cover"] as? [String: Any])?["thumbnail"] as? String == "/images/c/thumbnail.png")
            #expect(albums[2]["collection"] as? String == "/iiif/3/albums/%C3%89t%C3%A9%20%C3%A0%20Paris/collection.json")

            #expect(Self.ids(try fetch(port, "/images?album=Trip%2010")) == ["b2", "b1"])
            #expect(Self.ids(try fetch(port, "/images?album=%C3%89t%C3%A9%20%C3%A0%20Paris")) == ["e1"])
            let none = try fetch(port, "/images?album=nope")
            #expect(none.status == 200 && Self.ids(none).isEmpty && none.json["total"] as? Int == 0)

            for (query, message) in [
                ("sort=size", "parameter 'sort' must be 'name', 'date' or '-date', not 'size'"),
                ("sort=", "parameter 'sort' must be 'name', 'date' or '-date', not ''"),
                ("album=", "parameter 'album' must be an album's name (1...512 bytes)"),
                ("album=\(String(repeating: "a", count: 513))", "parameter 'album' must be an album's name (1...512 bytes)"),
            ] {
                let bad = try fetch(port, "/images?\(query)")
                #expect(bad.status == 400 && bad.errorMessage == message, "\(query): \(bad.status) \(bad.text)")
            }
            #expect(try fetch(port, "/albums/x").status == 404)
        }
    }

    /// A Presentation manifest says what the photo says of itself.
    @Test func presentationManifestsCarryTheMetadata() throws {
        let root = try PyramidRoot()
        try Self.add(
            "cc",
            PhotoMetadata(
                title: "Harbour at dusk", description: "Boats.\nGulls.", creator: "Ann Lee",
                copyright: "https://creativecommons.org/licenses/by/4.0/", dateTaken: "2024-05-01T23:30:00-02:00",
                camera: "Canon EOS R5", lens: "RF 24-70mm", exposure: "1/250 s, f/8, ISO 100", album: "Harbour"),
            to: root)
        try Self.add("plain", PhotoMetadata(copyright: "© 2024 Ann Lee", dateTaken: "2024-05-01T14:03:22"), to: root)
        try Self.add("bare", nil, to: root)
        try withTileServer(root) { port throws in
            let m = try fetch(port, "/iiif/3/cc/manifest.json").json
            #expect(m["label"] as? [String: [String]] == ["none": ["Harbour at dusk"]])
            #expect(m["summary"] as? [String: [String]] == ["none": ["Boats.\nGulls."]])
            #expect(m["rights"] as? String == "https://creativecommons.org/licenses/by/4.0/")
            let statement = try #require(m["requiredStatement"] as? [String: [String: [String]]])
            #expect(
                statement["label"] == ["en": ["Rights"]] && statement["value"] == ["none": ["https://creativecommons.org/licenses/by/4.0/"]]
            )
            #expect(m["navDate"] as? String == "2024-05-02T01:30:00Z")
            let pairs = (m["metadata"] as? [[String: [String: [String]]]] ?? []).map {
                ($0["label"]?["en"]?.first, $0["value"]?["none"]?.first)
            }
            #expect(pairs.map(\.0) == ["Creator", "Date", "Camera", "Lens", "Exposure", "Album", "Size"])
            #expect(
                pairs.map(\.1)[0...5] == [
                    "Ann Lee", "2024-05-01T23:30:00-02:00", "Canon EOS R5", "RF 24-70mm", "1/250 s, f/8, ISO 100", "Harbour",
                ])

            let plain = try fetch(port, "/iiif/3/plain/manifest.json").json
            #expect(plain["label"] as? [String: [String]] == ["none": ["plain"]])
            #expect(plain["rights"] == nil && plain["summary"] == nil)
            #expect((plain["requiredStatement"] as? [String: [String: [String]]])?["label"] == ["en": ["Attribution"]])
            #expect(plain["navDate"] as? String == "2024-05-01T14:03:22Z")  // no offset: read as UTC

            let bare = try fetch(port, "/iiif/3/bare/manifest.json").json
            #expect(bare["navDate"] == nil && bare["requiredStatement"] == nil && bare["summary"] == nil)

            let album = try fetch(port, "/iiif/3/albums/Harbour/collection.json")
            #expect(album.status == 200 && album.json["type"] as? String == "Collection")
            #expect(album.json["label"] as? [String: [String]] == ["none": ["Harbour"]])
            #expect((album.json["items"] as? [[String: Any]])?.map { $0["id"] as? String } == ["http://127.0.0.1/iiif/3/cc/manifest.json"])
            let unknown = try fetch(port, "/iiif/3/albums/Nope/collection.json")
            #expect(unknown.status == 404 && unknown.errorMessage == "no album named 'Nope'")
        }
    }

    /// Under `--access` a private image is in no count, cover, listing or collection
    /// without its token; an album of private images only is answered as an unknown one.
    @Test(.timeLimit(.minutes(10))) func privateImagesStayOutOfAlbums() throws {
        let setup = try AccessTests.Setup()
        defer { setup.scratch.cleanUp() }
        let root = try PyramidRoot()
        try Self.add("public-b", PhotoMetadata(dateTaken: "2024-01-02T00:00:00Z", album: "Mixed"), to: root)
        try Self.add("secret-a", PhotoMetadata(dateTaken: "2024-01-01T00:00:00Z", album: "Mixed"), to: root)
        try Self.add("secret-c", PhotoMetadata(album: "Hidden"), to: root)
        let token = try setup.keys.tokens([TokenSpec(alg: "HS256", kid: "site", claims: AccessTests.Setup.claims(["secret-*"]))])[0]
        try withTileServer(root, access: try setup.access()) { port throws in
            func get(_ path: String, _ token: String? = nil) throws -> RawResponse {
                try fetch(port, path, headers: token.map { ["Authorization: Bearer \($0)"] } ?? [])
            }
            func albums(_ token: String?) throws -> [String] {
                let r = try get("/albums", token)
                #expect(r.header("Cache-Control") == "private, no-cache" && r.header("Vary") == "Authorization, Cookie")
                return (r.json["albums"] as? [[String: Any]] ?? []).map {
                    "\($0["name"]!) \($0["count"]!) \(($0["cover"] as? [String: Any])?["id"] ?? "")"
                }
            }
            #expect(try albums(nil) == ["Mixed 1 public-b"])
            #expect(try albums(token) == ["Hidden 1 secret-c", "Mixed 2 public-b"])
            #expect(!(try get("/albums").text.contains("secret")))

            let listed = try get("/images?album=Mixed&sort=date")
            #expect(Self.ids(listed) == ["public-b"] && listed.json["total"] as? Int == 1)
            #expect(Self.ids(try get("/images?album=Mixed&sort=date", token)) == ["secret-a", "public-b"])
            #expect(try get("/images?album=Hidden").json["total"] as? Int == 0)

            let mixed = try get("/iiif/3/albums/Mixed/collection.json")
            #expect(mixed.status == 200 && !mixed.text.contains("secret") && mixed.text.contains("public-b"))
            #expect(mixed.header("Cache-Control") == "private, no-cache")
            #expect(try get("/iiif/3/albums/Mixed/collection.json", token).text.contains("secret-a"))
            // All private, without a token: exactly what an unknown album gets.
            let hidden = try get("/iiif/3/albums/Hidden/collection.json")
            let unknown = try get("/iiif/3/albums/Hiddem/collection.json")
            #expect(hidden.status == 404 && unknown.status == 404)
            #expect(hidden.text.replacingOccurrences(of: "Hidden", with: "Hiddem") == unknown.text)
            #expect(hidden.header("WWW-Authenticate") == nil)
            #expect(try get("/iiif/3/albums/Hidden/collection.json", token).status == 200)
        }
    }

    /// Albums and their collections load into iiif-prezi3 and are followed link by link
    /// (`scripts/check-iiif-presentation --albums`): each album's collection, its
    /// manifests, their image services, images and thumbnails.
    @Test(arguments: [RootKind.folders, .archives]) func albumCollectionsLoadIntoIIIFPrezi3(_ kind: RootKind) throws {
        let root = try PyramidRoot()
        let picture = try root.solidImage("picture", width: 600, height: 400, rgb: (10, 120, 200))
        for (id, album, title) in [("p1", "Harbour", "Boats 10"), ("p2", "Harbour", "Boats 2"), ("p3", "Été", nil)] {
            var manifest = try root.cut(picture, as: id)
            manifest.metadata = PhotoMetadata(
                title: title, copyright: "http://rightsstatements.org/vocab/InC/1.0/", dateTaken: "2024-05-01T14:03:22+02:00",
                album: album)
            try root.write(manifest)
        }
        try FileManager.default.removeItem(atPath: picture)
        try withTileServer(root, as: kind) { port throws in
            let script = repositoryRoot.appendingPathComponent("scripts/check-iiif-presentation").path
            let output: String
            do {
                output = try runTool("/usr/bin/env", ["python3", script, "--albums", "http://127.0.0.1:\(port)/albums"])
            } catch {
                Issue.record("\(error)\n(run scripts/install-deps test for iiif-prezi3)")
                return
            }
            let report = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
            let albums = try #require(report["albums"] as? [[String: Any]])
            // Natural order: letters by their lowercase scalars, so "é" after "h".
            #expect(albums.map { $0["album"] as? String } == ["Harbour", "Été"])
            let harbour = try #require(albums.first?["manifests"] as? [[String: Any]])
            #expect(
                harbour.map { $0["manifest"] as? String } == ["p2", "p1"].map { "http://127.0.0.1:\(port)/iiif/3/\($0)/manifest.json" })
        }
    }
}
