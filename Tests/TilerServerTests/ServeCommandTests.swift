import Foundation
import S3TestSupport
import Testing
import TilerCore
import TilerServer
import TilerTestSupport
#if canImport(Glibc)
    import Glibc
#endif

/// `tiler serve` as a process: start-up line, environment variables, signals.
@Suite struct ServeCommandTests {
    func waitForExit(_ p: Process, seconds: Double = 30) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while p.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        return !p.isRunning
    }

    /// Runs `tiler serve ARGUMENTS` (no TILER_ variable inherited, `environment` added),
    /// which should refuse to start: the ended process and its standard error, or nil when
    /// it was still running after 30 s (then it is stopped).
    func refusal(_ arguments: [String], environment: [String: String] = [:]) throws -> (Process, String)? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try tilerBinary())
        process.arguments = ["serve"] + arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("TILER_") }.merging(environment) { $1 }
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        guard waitForExit(process) else {
            process.terminate()
            process.waitUntilExit()
            return nil
        }
        return (process, String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }

    @Test func sigtermFinishesInFlightRequestsAndExitsZero() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 300, height: 200)
        let server = try ServeProcess([root.path, "--port", "0"])
        #expect(server.startLine == "tiler: serving \(root.path) at http://127.0.0.1:\(server.port)/")
        #expect(try fetch(server.port, "/images/a/tiles/0/0/0.png").status == 200)

        let idle = try RawHTTPClient(port: server.port)
        try idle.request("/healthz")
        _ = try idle.readResponse()
        let inFlight = try RawHTTPClient(port: server.port)
        try inFlight.send("GET /images/a/tiles/1/0/1.png HTTP/1.1\r\nHost: x\r\n")

        kill(server.process.processIdentifier, SIGTERM)
        // Draining once the listener is closed; the half-sent request is still in flight
        // (whether or not the server had read its first part before the signal).
        #expect(eventually { (try? RawHTTPClient(port: server.port)) == nil })
        try inFlight.send("\r\n")
        let r = try inFlight.readResponse()
        #expect(r.status == 200)
        #expect(r.header("Connection") == "close")
        #expect(r.body == root.file("a/1/0/1.png"))
        #expect(idle.waitForClose())
        #expect(waitForExit(server.process))
        #expect(server.process.terminationReason == .exit)
        #expect(server.process.terminationStatus == 0)
    }

    @Test func sigintExitsZeroAndEnvironmentConfigures() throws {
        let root = try PyramidRoot()
        // TILER_ROOT and TILER_PORT instead of arguments; TILER_CORS_ORIGIN applies.
        let server = try ServeProcess(
            [],
            environment: [
                "TILER_ROOT": root.path, "TILER_PORT": "0",
                "TILER_CORS_ORIGIN": "https://x.example",
            ])
        let r = try fetch(server.port, "/healthz")
        #expect(r.status == 200)
        #expect(r.header("Access-Control-Allow-Origin") == "https://x.example")
        kill(server.process.processIdentifier, SIGINT)
        #expect(waitForExit(server.process))
        #expect(server.process.terminationStatus == 0)
    }

    @Test func flagsWinOverEnvironment() throws {
        let root = try PyramidRoot()
        let server = try ServeProcess(
            [root.path, "--port", "0", "--cache-control", "no-cache"],
            environment: ["TILER_PORT": "not-a-port", "TILER_CACHE_CONTROL": "max-age=1"])
        try root.addPyramid("a", width: 300, height: 200)
        #expect(try fetch(server.port, "/images/a/tiles/0/0/0.png").header("Cache-Control") == "no-cache")
        kill(server.process.processIdentifier, SIGTERM)
        #expect(waitForExit(server.process))
        #expect(server.process.terminationStatus == 0)
    }

    /// Numbers outside a setting's range, by flag or by variable, are usage errors that
    /// name the flag or variable (exit 64), never a trap at start-up (`--idle-timeout
    /// 1e16` used to trap in `Int64(seconds * 1000)`) nor a silent wrap (`--cache-mb`
    /// shifted by 20 bits).
    @Test(
        arguments: [
            (["--idle-timeout", "1e16"], [:], "--idle-timeout"),
            (["--header-timeout", "inf"], [:], "--header-timeout"),
            (["--header-timeout", "nan"], [:], "--header-timeout"),
            (["--write-timeout", "0"], [:], "--write-timeout"),
            (["--shutdown-grace=-1"], [:], "--shutdown-grace"),
            (["--cache-mb", "35184372088832"], [:], "--cache-mb"),
            (["--max-request-line", "4611686018427387904"], [:], "--max-request-line"),
            (["--max-connections", "0"], [:], "--max-connections"),
            (["--render-threads", "0"], [:], "--render-threads"),
            (["--max-queued-renders", "0"], [:], "--max-queued-renders"),
            (["--max-queued-reads", "100000000"], [:], "--max-queued-reads"),
            (["--iiif-max-area", "0"], [:], "--iiif-max-area"),
            (["--max-visible-tiles", "9223372036854775807"], [:], "--max-visible-tiles"),
            ([], ["TILER_IDLE_TIMEOUT": "1e16"], "TILER_IDLE_TIMEOUT"),
            ([], ["TILER_HEADER_TIMEOUT": "inf"], "TILER_HEADER_TIMEOUT"),
            ([], ["TILER_CACHE_MB": "35184372088832"], "TILER_CACHE_MB"),
            ([], ["TILER_SHUTDOWN_GRACE": "1e9"], "TILER_SHUTDOWN_GRACE"),
            (["--storage-timeout", "0"], [:], "--storage-timeout"),
            (["--storage-threads", "0"], [:], "--storage-threads"),
            (["--max-queued-storage-reads", "0"], [:], "--max-queued-storage-reads"),
            (["--directory-cache-entries=-1"], [:], "--directory-cache-entries"),
            ([], ["TILER_OPEN_TILES": "-5"], "TILER_OPEN_TILES"),
            ([], ["TILER_STORAGE_TIMEOUT": "nan"], "TILER_STORAGE_TIMEOUT"),
            (["--sources", "/tmp", "--sources-cache-mb=-1"], [:], "--sources-cache-mb"),
            (["--sources", "/tmp", "--sources-format", "jpeg", "--sources-quality", "0"], [:], "--sources-quality"),
            ([], ["TILER_SOURCES": "/tmp", "TILER_MAX_PIXELS": "0"], "TILER_MAX_PIXELS"),
            (["--keep"], [:], "--keep"),
            (["--base-url", "ftp://example.org/tiles"], [:], "--base-url"),
            (["--base-url", "https://example.org/tiles?x=1"], [:], "--base-url"),
            ([], ["TILER_BASE_URL": "https://example.org/tiles#top"], "TILER_BASE_URL"),
            ([], ["TILER_BASE_URL": "example.org/tiles"], "TILER_BASE_URL"),
        ] as [([String], [String: String], String)])
    func outOfRangeSettingsAreUsageErrors(arguments: [String], environment: [String: String], named: String) throws {
        let root = try PyramidRoot()
        guard let (process, message) = try refusal([root.path, "--port", "0"] + arguments, environment: environment) else {
            Issue.record("\(arguments) \(environment) was accepted: the server started")
            return
        }
        #expect(process.terminationReason == .exit && process.terminationStatus == 64, "\(message)")
        #expect(message.contains(named), "\(message)")
        #expect(!message.contains("Fatal error"), "\(message)")
    }

    @Test func helpNamesTheRoutesAndTheProxySettings() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try tilerBinary())
        process.arguments = ["serve", "--help"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        // The text as one line: the argument parser wraps it to the terminal's width.
        let help = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .split(whereSeparator: \.isWhitespace).joined(separator: " ")
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        for text in [
            "DeepZoom", "OpenSeadragon", "IIIF Image API 3.0", "IIIF Presentation API 3.0", "/iiif/3/collection.json",
            "web viewer", "--base-url", "TILER_BASE_URL", "--trust-proxy", "TILER_TRUST_PROXY", "--access-log",
        ] {
            #expect(help.contains(text), "`tiler serve --help` does not mention \(text)")
        }
    }

    /// `--base-url` (or `TILER_BASE_URL`) and `TILER_TRUST_PROXY` reach the server; the
    /// access log names the client and the duration of each request.
    @Test func baseURLTrustProxyAndAccessLog() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 300, height: 200)
        let server = try ServeProcess([root.path, "--port", "0", "--base-url", "https://example.org/tiles/"])
        #expect(server.startLine.hasSuffix("(public address https://example.org/tiles/)"), "\(server.startLine)")
        #expect(
            try fetch(server.port, "/images/a").json["tiles"] as? String
                == "https://example.org/tiles/images/a/tiles/{level}/{row}/{column}.png")
        kill(server.process.processIdentifier, SIGTERM)
        #expect(waitForExit(server.process))

        let proxied = try ServeProcess(
            [root.path, "--port", "0", "--access-log"],
            environment: ["TILER_TRUST_PROXY": "1", "TILER_ACCESS_LOG": "0"])
        let info = try fetch(
            proxied.port, "/iiif/3/a/info.json", headers: ["X-Forwarded-Proto: https", "X-Forwarded-Host: public.example"])
        #expect(info.json["id"] as? String == "https://public.example/iiif/3/a")
        #expect(eventually { proxied.errorOutput.contains("/iiif/3/a/info.json") })
        let text = proxied.errorOutput
        let entry = try #require(text.split(separator: "\n").first { $0.contains("/iiif/3/a/info.json") })
        #expect(entry.contains("client=127.0.0.1:") && entry.contains("duration_ms=") && entry.contains("status=200"), "\(entry)")
        kill(proxied.process.processIdentifier, SIGTERM)
        #expect(waitForExit(proxied.process))

        // The flag, over a variable that says no.
        let flagged = try ServeProcess(
            [root.path, "--port", "0", "--trust-proxy"],
            environment: ["TILER_TRUST_PROXY": "0"])
        let flaggedInfo = try fetch(
            flagged.port, "/iiif/3/a/info.json", headers: ["X-Forwarded-Proto: https", "X-Forwarded-Host: public.example"])
        #expect(flaggedInfo.json["id"] as? String == "https://public.example/iiif/3/a")
        kill(flagged.process.processIdentifier, SIGTERM)
        #expect(waitForExit(flagged.process))
    }

    /// Every setting's flag reaches the library's reader: a value it cannot use is a usage
    /// error (exit 64) that starts by naming the flag. (A flag declared but not handed over
    /// would be ignored, and the server would start.) The switches `--trust-proxy` and
    /// `--access-log` are shown to work in `baseURLTrustProxyAndAccessLog`.
    @Test func everyFlagReachesTheLibrary() throws {
        typealias Setting = ServerConfiguration.Setting
        let refused: [Setting: ([String], String)] = [
            .sources: (["--sources", "/tmp", "--sources-format", "gif"], "--sources-format='gif' is not auto, png, jpeg or webp"),
            .sourcesFormat: (["--sources-format", "gif"], "--sources-format applies with --sources DIR only"),
            .sourcesQuality: (["--sources", "/tmp", "--sources-quality", "x"], "--sources-quality='x' is not an integer"),
            .sourcesCacheMB: (["--sources", "/tmp", "--sources-cache-mb", "x"], "--sources-cache-mb='x' is not an integer"),
            .sourcesSpillMB: (["--sources", "/tmp", "--sources-spill-mb", "0"], "--sources-spill-mb must be 1...1073741824, not 0"),
            .maxPixels: (["--sources", "/tmp", "--max-pixels", "x"], "--max-pixels='x' is not an integer"),
            .allowVector: (["--allow-vector"], "--allow-vector applies with --sources DIR only"),
            .keep: (["--keep"], "--keep applies with --sources DIR only"),
            .s3Endpoint: (["--s3-endpoint", "http://minio:9000"], "--s3-endpoint applies to an s3://BUCKET/PREFIX ROOT only"),
            .host: (["--host", "example.org"], "--host='example.org' is not an IPv4 or IPv6 address"),
            .cacheControl: (["--cache-control", "a\u{7}b"], "--cache-control holds a control character"),
            .corsOrigin: (["--cors-origin", "a\u{7}b"], "--cors-origin holds a control character"),
            .baseURL: (["--base-url", "ftp://example.org/t"], "--base-url: "),
            .logFormat: (["--log-format", "x"], "--log-format='x' is neither text nor json"),
            .frameAncestors: (["--frame-ancestors", "x; y"], "--frame-ancestors='x; y' is not a CSP source list"),
            .access: (["--access", "x"], "--access: cannot read the access policy, x:"),
        ]
        let covered: Set<Setting> = [.trustProxy, .accessLog]
        for setting in Setting.allCases where !covered.contains(setting) {
            let (arguments, message) = refused[setting] ?? ([setting.flag, "x"], "\(setting.flag)='x' is not")
            let root = try PyramidRoot()
            guard let (process, text) = try refusal([root.path] + arguments) else {
                Issue.record("\(arguments) was accepted: the server started")
                continue
            }
            #expect(process.terminationReason == .exit && process.terminationStatus == 64, "\(arguments): \(text)")
            #expect(text.hasPrefix("Error: \(message)"), "\(arguments): \(text)")
        }
    }

    @Test func aMissingRootIsAClearError() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try tilerBinary())
        process.arguments = ["serve", "/nonexistent/tiler-root", "--port", "0"]
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus != 0)
        #expect(message.contains("/nonexistent/tiler-root"))
    }

    /// `tiler serve s3://BUCKET/PREFIX`, and the same ROOT from `TILER_ROOT`: the archives
    /// in the bucket are served with the credentials and endpoint from the AWS variables.
    @Test func servesABucketGivenAsArgumentOrTilerRoot() throws {
        let storage = try S3TestServer.shared.get()
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 600, height: 400)
        let served = try root.serve(as: .bucket)
        for arguments in [[served.root, "--port", "0"], ["--port", "0"]] {
            var environment = storage.environment
            if arguments.count == 2 { environment["TILER_ROOT"] = served.root }
            let server = try ServeProcess(arguments, environment: environment)
            defer { server.stop() }
            #expect(server.startLine.contains(served.root), "\(server.startLine)")
            let tile = try fetch(server.port, "/images/a/tiles/2/1/2.png")
            #expect(tile.status == 200 && tile.body == PyramidRoot.tileBytes("a", TileCoordinate(level: 2, row: 1, column: 2)))
            #expect(try fetch(server.port, "/healthz").json["storage"] as? String == "ok")
        }
    }

    /// A bucket that does not exist or refuses the credentials ends `tiler serve` with one
    /// line (exit 1); missing credentials, a malformed address or `--s3-endpoint` with a
    /// folder are usage errors (exit 64).
    @Test func bucketErrorsAreOneLine() throws {
        let storage = try S3TestServer.shared.get()
        func run(_ arguments: [String], _ environment: [String: String]) throws -> (Int32, String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try tilerBinary())
            process.arguments = ["serve"] + arguments + ["--port", "0"]
            var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("TILER_") && !$0.key.hasPrefix("AWS_") }
            env.merge(environment) { $1 }
            process.environment = env
            let err = Pipe()
            process.standardError = err
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, text)
        }
        let (missing, missingText) = try run(["s3://no-such-bucket/x"], storage.environment)
        #expect(missing == 1 && missingText.contains("no-such-bucket") && missingText.contains("NoSuchBucket"), "\(missingText)")
        var wrong = storage.environment
        wrong["AWS_SECRET_ACCESS_KEY"] = "wrong"
        let (refused, refusedText) = try run(["s3://tiles/x"], wrong)
        #expect(refused == 1 && refusedText.contains("SignatureDoesNotMatch"), "\(refusedText)")
        #expect(refusedText.split(separator: "\n").count == 1, "\(refusedText)")
        let (noCredentials, noCredentialsText) = try run(["s3://tiles/x"], [:])
        #expect(noCredentials == 64 && noCredentialsText.contains("AWS_ACCESS_KEY_ID"), "\(noCredentialsText)")
        let (malformed, malformedText) = try run(["s3://A_B/x"], storage.environment)
        #expect(malformed == 64 && malformedText.contains("bucket name"), "\(malformedText)")
        let (endpoint, endpointText) = try run([NSTemporaryDirectory(), "--s3-endpoint", storage.endpoint], [:])
        #expect(endpoint == 64 && endpointText.contains("--s3-endpoint"), "\(endpointText)")
    }
}
