import Foundation
import S3TestSupport
import Testing
import TilerTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Operating `tiler serve`: its metrics scraped by a real Prometheus (Debian's) and checked
/// with `promtool`, `/readyz` apart from `/healthz`, JSON logs that `jq` reads and that hold
/// no token, and `X-Request-Id` on every answer. The built binary, on loopback ports.
@Suite(.serialized) struct OperatingTests {
    /// `tiler serve ARGUMENTS` with a metrics listener, both on ports of its choosing.
    func serve(_ arguments: [String], environment: [String: String] = [:]) throws -> ServeProcess {
        let served = try ServeProcess(arguments + ["--port", "0", "--metrics-port", "0", "--threads", "2"], environment: environment)
        guard served.metricsPort != nil else { throw SupportError(description: "no metrics address in '\(served.startLine)'") }
        return served
    }

    /// A folder root with one 2000×1500 PNG pyramid `photo` (levels 0…3; 8×6 tiles at the top).
    static func root(_ scratch: Scratch) throws -> String {
        let input = scratch.path("photo.png")
        try CutCommandTests.makeImage(input, width: 2000, height: 1500, bands: 3, scratch: scratch)
        let cut = try run(try tilerBinary(), ["cut", input, "-o", scratch.path("tiles"), "--format", "png", "--quiet"])
        guard cut.status == 0 else { throw SupportError(description: "cut failed: \(cut.stderr)") }
        return scratch.path("tiles")
    }

    // MARK: Prometheus

    /// Debian's Prometheus scrapes the server every second while the test sends a known
    /// mix; through Prometheus' HTTP API, the request counts by route and code equal what
    /// was sent, the tile histogram answers `histogram_quantile`, cache hits and misses add
    /// up to the tile requests, and the storage fault is counted. `promtool check metrics`
    /// accepts the scrape.
    @Test(.timeLimit(.minutes(10))) func prometheusSeesWhatWasSent() throws {
        let prometheus = "/usr/bin/prometheus"
        guard FileManager.default.isExecutableFile(atPath: prometheus) else {
            Issue.record("prometheus is missing: run scripts/install-deps test (apt: prometheus)")
            return
        }
        let scratch = try Scratch("metrics-prometheus")
        defer { scratch.cleanUp() }
        let root = try Self.root(scratch)
        // A storage fault: a tile replaced by a truncated one (damaged: 500, counted as an error).
        let damaged = "\(root)/photo/3/0/0.png"
        let bytes = try Data(contentsOf: URL(fileURLWithPath: damaged))
        try bytes.prefix(40).write(to: URL(fileURLWithPath: damaged))
        let served = try serve([root])
        defer { served.stop() }

        // Prometheus, scraping every second.
        let prometheusPort = try freeLowPort()
        let configuration = """
            global: { scrape_interval: 1s, evaluation_interval: 1s }
            scrape_configs:
              - job_name: tiler
                static_configs: [{ targets: ["127.0.0.1:\(served.metricsPort ?? 0)"] }]
            """
        try configuration.write(toFile: scratch.path("prometheus.yml"), atomically: true, encoding: .utf8)
        let server = Process()
        server.executableURL = URL(fileURLWithPath: prometheus)
        server.arguments = [
            "--config.file=\(scratch.path("prometheus.yml"))", "--storage.tsdb.path=\(scratch.path("tsdb"))",
            "--web.listen-address=127.0.0.1:\(prometheusPort)", "--log.level=warn",
        ]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer {
            server.terminate()
            server.waitUntilExit()
        }
        /// One instant query's vector: each series' labels and value.
        func query(_ promQL: String) throws -> [(labels: [String: String], value: Double)] {
            var components = URLComponents()
            components.queryItems = [URLQueryItem(name: "query", value: promQL)]
            let encoded = components.percentEncodedQuery!.replacingOccurrences(of: "+", with: "%2B")
            let r = try fetch(prometheusPort, "/api/v1/query?\(encoded)")
            guard r.status == 200, let data = r.json["data"] as? [String: Any], let result = data["result"] as? [[String: Any]]
            else { throw SupportError(description: "\(promQL): \(r.status) \(r.text.prefix(300))") }
            return result.map { series in
                let labels = series["metric"] as? [String: String] ?? [:]
                let value = ((series["value"] as? [Any])?.last as? String).flatMap(Double.init) ?? .nan
                return (labels, value)
            }
        }
        // Once Prometheus has scraped the server (before any traffic), so that rates see it grow.
        #expect(eventually(within: 120) { ((try? query("up"))?.first?.value ?? 0) == 1 }, "Prometheus never scraped")

        var sent: [String: Int] = [:]  // "route code" → count
        func get(_ path: String, expecting status: Int, _ route: String) throws {
            let r = try fetch(served.port, path)
            #expect(r.status == status, "\(path): \(r.status)")
            sent["\(route) \(status)", default: 0] += 1
        }
        // Every tile of level 2 (4×3) twice: 12 misses, then 12 hits; the damaged tile once.
        for _ in 0..<2 {
            for row in 0..<3 {
                for column in 0..<4 { try get("/images/photo/tiles/2/\(row)/\(column).png", expecting: 200, "tile") }
            }
        }
        try get("/images/photo/tiles/3/0/0.png", expecting: 500, "tile")
        for _ in 0..<3 { try get("/images/missing", expecting: 404, "manifest") }
        try get("/images", expecting: 200, "list")
        try get("/images/photo", expecting: 200, "manifest")
        try get("/images/photo/visible?x=0&y=0&width=800&height=600&scale=0.25", expecting: 200, "visible")
        try get("/iiif/3/photo/info.json", expecting: 200, "iiif_info")
        try get("/iiif/3/photo/full/200,/0/default.jpg", expecting: 200, "iiif_image")
        try get("/images/photo.dzi", expecting: 200, "deepzoom")
        try get("/healthz", expecting: 200, "health")
        try get("/nowhere", expecting: 404, "other")
        let tileRequests = 25

        // The scrape passes promtool.
        let text = try served.scrape()
        let checked = try run("/usr/bin/promtool", ["check", "metrics"], input: text)
        #expect(checked.status == 0, "promtool check metrics: \(checked.stdout) \(checked.stderr)")

        // Until Prometheus has scraped after the traffic: every tile request counted.
        let counted = eventually(within: 120) {
            ((try? query(#"sum(tiler_http_requests_total{route="tile"})"#))?.first?.value ?? 0) == Double(tileRequests)
        }
        #expect(counted, "Prometheus never saw the \(tileRequests) tile requests")

        var seen: [String: Int] = [:]
        for series in try query("tiler_http_requests_total") {
            seen["\(series.labels["route"] ?? "?") \(series.labels["code"] ?? "?")"] = Int(series.value)
        }
        #expect(seen == sent, "Prometheus has \(seen), the test sent \(sent)")

        let hits = try query("tiler_tile_cache_hits_total").first?.value
        let misses = try query("tiler_tile_cache_misses_total").first?.value
        #expect(hits == 12, "hits \(String(describing: hits))")
        #expect(
            (hits ?? 0) + (misses ?? 0) == Double(tileRequests), "hits \(String(describing: hits)) + misses \(String(describing: misses))")

        let p99 = try query(#"histogram_quantile(0.99, sum by (le) (rate(tiler_http_request_duration_seconds_bucket{route="tile"}[1m])))"#)
        #expect(p99.count == 1 && p99[0].value.isFinite && p99[0].value > 0, "\(p99)")
        let tileBytes = try query(#"tiler_http_response_bytes_total{route="tile"}"#).first?.value ?? 0
        #expect(tileBytes > 0)

        let faults = try query(#"tiler_storage_requests_total{backend="folder",outcome="error"}"#)
        #expect(faults.first?.value == 1, "storage errors: \(faults)")
        let rendered = try query(#"tiler_renders_total{outcome="done"}"#)
        #expect(rendered.first?.value == 1, "renders: \(rendered)")
        let images = try query(#"tiler_images{layout="folder"}"#)
        #expect(images.first?.value == 1, "images: \(images)")
        #expect(try query("tiler_ready").first?.value == 1)
        #expect(try query("up").first?.value == 1)
        #expect((try query("process_resident_memory_bytes").first?.value ?? 0) > 1_000_000)
    }

    /// The alert rules the docs give load into `promtool check rules`.
    @Test func alertRulesPassPromtool() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool") else {
            Issue.record("promtool is missing: run scripts/install-deps test (apt: prometheus)")
            return
        }
        let rules = ArchiveCommandTests.packageRoot.appendingPathComponent("deploy/prometheus/alerts.yml").path
        let checked = try run("/usr/bin/promtool", ["check", "rules", rules])
        #expect(checked.status == 0, "\(checked.stdout) \(checked.stderr)")
        #expect(checked.stdout.contains("SUCCESS: 8 rules found"), "\(checked.stdout)")
    }

    /// The series do not grow with the URLs asked for: 20,000 distinct paths (ids, tiles,
    /// queries) leave the scrape with the same series as 20.
    @Test func labelsStayBounded() throws {
        let scratch = try Scratch("metrics-bounded")
        defer { scratch.cleanUp() }
        let root = try Self.root(scratch)
        let served = try serve([root])
        defer { served.stop() }
        func series() throws -> Set<String> {
            Set(try served.scrape().split(separator: "\n").filter { !$0.hasPrefix("#") }.map { String($0.split(separator: " ").first!) })
        }
        let c = try RawHTTPClient(port: served.port)
        func send(_ n: Int, from start: Int) throws {
            for i in start..<(start + n) {
                let path =
                    switch i % 4 {
                    case 0: "/images/id\(i)"
                    case 1: "/images/photo/tiles/0/0/\(i).png"
                    case 2: "/x\(i)/y?token=\(i)"
                    default: "/iiif/3/id\(i)/info.json"
                    }
                try c.request(path)
                _ = try c.readResponse()
            }
        }
        try send(20, from: 0)
        let few = try series()
        try send(20_000, from: 20)
        let many = try series()
        #expect(many == few, "new series: \(many.subtracting(few).prefix(10))")
        #expect(many.count < 400, "\(many.count) series")
    }

    // MARK: Readiness

    /// With a bucket root, `/readyz` is 503 while storage is down (and `/healthz` still
    /// 200: the process is alive), and 200 again once storage answers.
    @Test(.timeLimit(.minutes(10))) func readinessFollowsStorage() throws {
        let storage = try S3TestServer(buckets: ["tiles"])
        defer { storage.shutdown() }
        let scratch = try Scratch("metrics-ready")
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try CutCommandTests.makeImage(input, width: 600, height: 400, bands: 3, scratch: scratch)
        let environment = storage.environment.merging([
            "TILER_S3_STAGING": scratch.path("staging"), "TILER_S3_RETRIES": "0",
        ]) { $1 }
        let cut = try run(
            try tilerBinary(), ["cut", input, "-o", "s3://tiles/ready", "--archive", "--quiet"], environment: environment)
        #expect(cut.status == 0, "\(cut.stderr)")
        let served = try serve(["s3://tiles/ready", "--storage-timeout", "2", "--rescan-interval", "1"], environment: environment)
        defer { served.stop() }
        // Ready once the first listing (in the background: the server listens first) has ended.
        #expect(eventually(within: 60) { (try? fetch(served.port, "/readyz"))?.status == 200 }, "never ready")
        try storage.stop()
        #expect(
            eventually(within: 60) { (try? fetch(served.port, "/readyz"))?.status == 503 },
            "readyz stayed 200 with storage down")
        let notReady = try fetch(served.port, "/readyz")
        #expect(notReady.header("Retry-After") == "1")
        #expect((notReady.json["reason"] as? String)?.contains("object storage") == true, "\(notReady.text)")
        #expect(try fetch(served.port, "/healthz").status == 200)
        #expect(try served.scrape().contains("tiler_ready 0.0"))
        try storage.start()
        #expect(eventually(within: 60) { (try? fetch(served.port, "/readyz"))?.status == 200 }, "readyz never came back")
    }

    // MARK: Logs and request ids

    /// `--log-format json --access-log`: every line on stderr and the start line parse
    /// with `jq`; the access lines carry time, client, method, path, status, bytes,
    /// duration_ms and the request id of the answer's `X-Request-Id`; a token in the query
    /// never reaches the log.
    @Test func jsonLogsParseAndHoldNoToken() throws {
        let scratch = try Scratch("metrics-json-logs")
        defer { scratch.cleanUp() }
        let root = try Self.root(scratch)
        let served = try serve([root, "--log-format", "json", "--access-log"])
        let secret = "s3cr3t-\(UUID().uuidString)"
        let tile = try fetch(served.port, "/images/photo/tiles/0/0/0.png?token=\(secret)")
        let id = try #require(tile.header("X-Request-Id"))
        _ = try fetch(served.port, "/images/photo?access_token=\(secret)&x=1")
        _ = try fetch(served.port, "/images/missing", headers: ["X-Request-Id: trace-42"])
        let c = try RawHTTPClient(port: served.port)
        try c.send("GARBAGE\r\n\r\n")
        _ = try c.readResponse()
        let stderr = served.stop()

        var lines = stderr.split(separator: "\n").map(String.init)
        lines.append(served.startLine)
        #expect(lines.count >= 6, "\(lines)")
        #expect(!stderr.contains(secret) && !served.startLine.contains(secret), "the token reached the log")
        let parsed = try run("/usr/bin/jq", ["-c", "."], input: lines.joined(separator: "\n") + "\n")
        #expect(parsed.status == 0, "jq: \(parsed.stderr)")
        let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(objects.count == lines.count, "lines that are not JSON objects: \(lines)")
        let access = objects.filter { $0["logger"] as? String == "tiler.access" }
        #expect(access.count == 4, "\(access)")
        let first = try #require(access.first)
        for key in ["time", "client", "method", "path", "status", "bytes", "duration_ms", "request_id"] {
            #expect(first[key] != nil, "no \(key) in \(first)")
        }
        #expect(first["request_id"] as? String == id)
        #expect(first["status"] as? Int == 200)
        #expect(first["path"] as? String == "/images/photo/tiles/0/0/0.png?token=REDACTED")
        #expect(access.contains { $0["request_id"] as? String == "trace-42" && $0["status"] as? Int == 404 })
        #expect(access.contains { $0["status"] as? Int == 400 && ($0["request_id"] as? String)?.isEmpty == false })
        #expect(objects.contains { $0["message"] as? String == "serving" && $0["metrics_url"] != nil })
        #expect(objects.contains { $0["message"] as? String == "stopped" })
    }

    /// Every answer carries `X-Request-Id`: the client's own when it is sane, else one the
    /// server made, distinct per request, also on 404, 400 and answers on the pool.
    @Test func everyAnswerCarriesARequestID() throws {
        let scratch = try Scratch("metrics-request-id")
        defer { scratch.cleanUp() }
        let root = try Self.root(scratch)
        let served = try serve([root])
        defer { served.stop() }
        var made: Set<String> = []
        for path in ["/images/photo/tiles/0/0/0.png", "/images/missing", "/iiif/3/photo/full/64,/0/default.png", "/healthz"] {
            let r = try fetch(served.port, path)
            let id = try #require(r.header("X-Request-Id"), "\(path) has no X-Request-Id")
            #expect(id.wholeMatch(of: /[0-9a-f]{16}-[0-9]+/) != nil, "\(id)")
            made.insert(id)
        }
        #expect(made.count == 4)
        // On one connection the number counts up.
        let c = try RawHTTPClient(port: served.port)
        try c.request("/healthz")
        let one = try #require(try c.readResponse().header("X-Request-Id"))
        try c.request("/healthz")
        let two = try #require(try c.readResponse().header("X-Request-Id"))
        #expect(one.hasSuffix("-1") && two.hasSuffix("-2") && one.dropLast() == two.dropLast())
        // Sane ids are kept; others replaced.
        let kept = "0b1c-Trace_ID.42:x+y/z=@"
        #expect(try fetch(served.port, "/healthz", headers: ["X-Request-Id: \(kept)"]).header("X-Request-Id") == kept)
        for bad in ["has space", String(repeating: "a", count: 129), "quote\"d", "semi;colon"] {
            let answered = try fetch(served.port, "/healthz", headers: ["X-Request-Id: \(bad)"]).header("X-Request-Id")
            #expect(answered != bad && answered?.wholeMatch(of: /[0-9a-f]{16}-[0-9]+/) != nil, "\(bad) → \(String(describing: answered))")
        }
        // A request that never parsed.
        let raw = try RawHTTPClient(port: served.port)
        try raw.send("NOT HTTP\r\n\r\n")
        let refused = try raw.readResponse()
        #expect(refused.status == 400 && refused.header("X-Request-Id") != nil)
    }
}

/// A TCP port nothing listens on now, for a process that binds it itself (Prometheus),
/// from a range no other test uses.
func freeLowPort() throws -> Int { try unusedLoopbackPort(in: 19_000..<20_000) }

extension ServeProcess {
    /// What its metrics listener answers.
    func scrape() throws -> String { try fetch(metricsPort ?? 0, "/metrics").text }
}
