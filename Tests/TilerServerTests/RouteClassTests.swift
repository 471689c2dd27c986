import Testing

@testable import TilerHTTP
@testable import TilerServer

/// The `route` label of the metrics: every path the routes answer gets its class, and no
/// path (however long, odd or hostile) gets anything outside the fixed set.
@Suite struct RouteClassTests {
    @Test(arguments: [
        ("/images/a/tiles/3/2/1.png", RouteClass.tile),
        ("/images/a/tiles/3/2/1.png?token=x", .tile),
        ("/images/a%20b/tiles/0/0/0.jpg", .tile),
        ("/images/a/thumbnail.jpg", .thumbnail),
        ("/images/a", .manifest),
        ("/images/a?x=1", .manifest),
        ("/images", .list),
        ("/images/", .list),
        ("/images?offset=0&limit=5", .list),
        ("/images?sort=-date&album=Trip%202", .list),
        ("/albums", .list),
        ("/albums?token=x", .list),
        ("/albums/x", .other),
        ("/images/a/visible?x=0&y=0&width=1&height=1&scale=1", .visible),
        ("/images/a.dzi", .deepzoom),
        ("/images/a_files/9/0_0.png", .deepzoom),
        ("/iiif/3/a/info.json", .iiifInfo),
        ("/iiif/3/a", .iiifInfo),
        ("/iiif/3/a/full/max/0/default.jpg", .iiifImage),
        ("/iiif/3/a/0,0,10,10/!5,5/90/gray.png", .iiifImage),
        ("/iiif/3/a/manifest.json", .iiifPresentation),
        ("/iiif/3/collection.json", .iiifPresentation),
        ("/iiif/3/albums/Trip%202/collection.json", .iiifPresentation),
        ("/iiif/3/albums/full/max/0/default.jpg", .iiifImage),
        ("/iiif/2/a/info.json", .iiifInfo),
        ("/iiif/2/a", .iiifInfo),
        ("/iiif/2/a/full/full/0/default.jpg", .iiifImage),
        ("/iiif/2/a/pct:0,0,10,10/!5,5/!90/bitonal.png", .iiifImage),
        ("/", .viewer),
        ("/index.html", .viewer),
        ("/viewer/viewer.js", .viewer),
        ("/embed/strip", .viewer),
        ("/embed/coverflow?album=a", .viewer),
        ("/healthz", .health),
        ("/readyz", .health),
        ("/metrics", .metrics),
        ("/nowhere", .other),
        ("", .other),
        ("*", .other),
        ("/images/a/other/x", .other),
        ("/iiif/3", .other),
    ])
    func classOfPath(_ path: String, _ expected: RouteClass) {
        #expect(RouteClass.of(target: Array(path.utf8)) == expected, "\(path)")
    }

    /// Random bytes never crash it and always land in the set.
    @Test func anyBytesGetAClass() {
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array("/?#%.a_-0123456789imagestilviewr".utf8)
        for _ in 0..<20_000 {
            let n = Int.random(in: 0..<80, using: &rng)
            let bytes = (0..<n).map { _ in alphabet.randomElement(using: &rng)! }
            #expect(RouteClass.allCases.contains(RouteClass.of(target: bytes)))
        }
    }

    /// The tile paths' fast path (a word compare, the id scanned eight bytes at a time)
    /// agrees with the full classification on every path under `/images/`, whatever the
    /// id's length and wherever a `/`, `?` or `#` falls in it.
    @Test func theTileFastPathAgreesWithTheFullClassification() {
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array("/?#._-aefilsz09".utf8)
        let tails = ["/tiles/0/0/0.jpg", "/tiles/", "/tiles", "/tile/0", "/visible?x=1", "?/tiles/0", "#/tiles/0", ""]
        for _ in 0..<50_000 {
            let n = Int.random(in: 0..<30, using: &rng)
            var id = (0..<n).map { _ in alphabet.randomElement(using: &rng)! }
            if Bool.random(using: &rng) { id += Array("_files".utf8) }
            let path = Array("/images/".utf8) + id + Array(tails.randomElement(using: &rng)!.utf8)
            let full = path.withUnsafeBufferPointer { RouteClass.classify(path: $0) }
            #expect(RouteClass.of(target: path) == full, "\(String(decoding: path, as: UTF8.self))")
        }
    }

    @Test func labelsAreDistinct() {
        #expect(Set(RouteClass.allCases.map(\.label)).count == RouteClass.allCases.count)
    }
}

/// The metrics' memory does not grow with the URLs requested: a million answers to a
/// million distinct paths (and statuses from the whole range) leave the same series, and
/// the same size of scrape, as the first thousand.
@Suite struct MetricsCardinalityTests {
    @Test func aMillionDistinctURLsAddNoSeries() throws {
        let metrics = ServerMetrics(version: "test")
        func answer(_ range: Range<Int>) {
            var head = HTTPRequestHead()
            for i in range {
                let path =
                    switch i % 5 {
                    case 0: "/images/id\(i)/tiles/\(i % 9)/\(i)/\(i).png"
                    case 1: "/images/id\(i)"
                    case 2: "/iiif/3/id\(i)/full/\(i),/0/default.jpg"
                    case 3: "/x/\(i)?token=\(i)"
                    default: "/images/id\(i).dzi"
                    }
                head.target = Array(path.utf8)
                let status = [200, 304, 404, 400 + i % 200][i % 4]
                metrics.answered(head, status: status, bytes: i % 1000, milliseconds: Int64(i % 3000))
            }
        }
        func series(_ scrape: [UInt8]) -> Set<String> {
            Set(
                String(decoding: scrape, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }
                    .map { String($0.split(separator: " ").first!) })
        }
        answer(0..<1000)
        let first = series(metrics.scrape())
        answer(1000..<1_000_000)
        let scrape = metrics.scrape()
        let after = series(scrape)
        #expect(after == first, "new series: \(after.subtracting(first).prefix(10))")
        #expect(after.count < 400, "\(after.count) series")
        #expect(scrape.count < 64 << 10, "\(scrape.count) bytes")
        let total = String(decoding: scrape, as: UTF8.self).split(separator: "\n")
            .filter { $0.hasPrefix("tiler_http_requests_total{") }
            .map { Int($0.split(separator: " ").last!)! }.reduce(0, +)
        #expect(total == 1_000_000)
    }
}
