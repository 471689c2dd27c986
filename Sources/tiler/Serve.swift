import ArgumentParser
import Foundation
import Logging
import TilerCore
import TilerHTTP
import TilerServer

extension Tiler {
    /// `tiler serve [ROOT]`: serve every pyramid under ROOT over HTTP until SIGTERM/SIGINT.
    struct Serve: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve the pyramids under ROOT over HTTP (tiles, manifests, visible tiles).",
            discussion: """
            Every option can also be set by the environment variable named after it \
            (e.g. TILER_PORT, TILER_HOST, TILER_ROOT, TILER_CACHE_MB, TILER_ACCESS_LOG=1); \
            a flag wins over its variable. Pyramids cut into ROOT while the server runs are \
            served without a restart. SIGTERM or SIGINT stops accepting, finishes the \
            responses in flight and exits 0. Prints `tiler: serving ROOT at URL` on start.
            """)

        @Argument(help: "The folder of pyramids, as written by `tiler cut --output` (env TILER_ROOT; default: .).")
        var root: String?

        @Option(help: "Address to listen on, an IPv4 or IPv6 literal; 0.0.0.0 for all (env TILER_HOST; default: 127.0.0.1).")
        var host: String?

        @Option(help: "TCP port; 0 picks a free one (env TILER_PORT; default: 8080).")
        var port: Int?

        @Option(help: "Event-loop threads (env TILER_THREADS; default: one per core).")
        var threads: Int?
        @Option(name: .customLong("blocking-threads"),
                help: "Threads for disk reads and drawn images, so event loops never wait (env TILER_BLOCKING_THREADS; default: 4 per core).")
        var blockingThreads: Int?

        @Option(name: .customLong("cache-mb"), help: "Memory for cached tiles and documents, MiB (env TILER_CACHE_MB; default: 256).")
        var cacheMB: Int?

        @Option(help: "Cache-Control on tiles, thumbnails and manifests; empty for none (env TILER_CACHE_CONTROL; default: 'public, max-age=86400').")
        var cacheControl: String?

        @Option(help: "Access-Control-Allow-Origin; empty for no CORS headers (env TILER_CORS_ORIGIN; default: *).")
        var corsOrigin: String?

        @Option(help: "Most open connections; past it 503 and close (env TILER_MAX_CONNECTIONS; default: min(8192, file limit − 64)).")
        var maxConnections: Int?

        @Option(help: "Seconds before an idle keep-alive connection is closed (env TILER_IDLE_TIMEOUT; default: 60).")
        var idleTimeout: Double?

        @Option(help: "Seconds a client may take to send a request head (env TILER_HEADER_TIMEOUT; default: 10).")
        var headerTimeout: Double?

        @Option(help: "Longest request line in bytes, else 414 (env TILER_MAX_REQUEST_LINE; default: 8192).")
        var maxRequestLine: Int?

        @Option(help: "Largest request header section in bytes, else 431 (env TILER_MAX_HEADER_BYTES; default: 16384).")
        var maxHeaderBytes: Int?

        @Option(help: "Most request headers, else 431 (env TILER_MAX_HEADERS; default: 100).")
        var maxHeaders: Int?

        @Option(help: "Most tiles one /visible answer may list, else 400 (env TILER_MAX_VISIBLE_TILES; default: 4096).")
        var maxVisibleTiles: Int?

        @Option(name: .customLong("iiif-max-width"), help: "Widest IIIF image output, px (env TILER_IIIF_MAX_WIDTH; default: 10000).")
        var iiifMaxWidth: Int?

        @Option(name: .customLong("iiif-max-height"), help: "Tallest IIIF image output, px (env TILER_IIIF_MAX_HEIGHT; default: 10000).")
        var iiifMaxHeight: Int?

        @Option(name: .customLong("iiif-max-area"), help: "Largest IIIF image output, pixels (env TILER_IIIF_MAX_AREA; default: 25000000).")
        var iiifMaxArea: Int?

        @Flag(inversion: .prefixedNo, help: "Log one line per request to stderr (env TILER_ACCESS_LOG=1; default: off).")
        var accessLog: Bool?

        func run() throws {
            let config = try resolvedConfiguration()
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: config.root, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw ValidationError("ROOT '\(config.root)' is not a folder; pass the --output folder of `tiler cut`")
            }
            let logAccess = accessLog ?? Self.environmentBool("TILER_ACCESS_LOG") ?? false
            let signals = try TerminationSignals()  // before any thread starts
            let server = TileServer(configuration: config, accessLog: logAccess ? Logger(label: "tiler.access", factory: { label in StreamLogHandler.standardError(label: label) }) : nil)
            do {
                try server.start()
            } catch {
                // A run-time failure, not a usage mistake: no usage text after it.
                let hint = error.errno == EADDRINUSE ? " (another server is using that port; choose one with --port or TILER_PORT)" : ""
                throw ServeError(description: "cannot listen: \(error)\(hint)")
            }
            let shownHost = config.http.host.contains(":") ? "[\(config.http.host)]" : config.http.host
            // Unbuffered, so a parent reading our stdout sees the URL at once.
            FileHandle.standardOutput.write(Data("tiler: serving \(config.root) at http://\(shownHost):\(server.port)/\n".utf8))
            let signal = signals.wait()
            FileHandle.standardError.write(Data("tiler: signal \(signal), finishing in-flight requests\n".utf8))
            server.stop()
            server.wait()
        }

        /// Flags, then `TILER_*` variables, then defaults.
        func resolvedConfiguration() throws -> ServerConfiguration {
            func env(_ name: String) -> String? {
                guard let v = ProcessInfo.processInfo.environment[name] else { return nil }
                return v
            }
            func int(_ flag: Int?, _ name: String) throws -> Int? {
                if let flag { return flag }
                guard let text = env(name), !text.isEmpty else { return nil }
                guard let v = Int(text) else { throw ValidationError("\(name)='\(text)' is not an integer") }
                return v
            }
            func double(_ flag: Double?, _ name: String) throws -> Double? {
                if let flag { return flag }
                guard let text = env(name), !text.isEmpty else { return nil }
                guard let v = Double(text), v.isFinite else { throw ValidationError("\(name)='\(text)' is not a number") }
                return v
            }
            var c = ServerConfiguration(root: root ?? env("TILER_ROOT") ?? ".")
            if let v = host ?? env("TILER_HOST"), !v.isEmpty { c.http.host = v }
            if let v = try int(port, "TILER_PORT") {
                guard (0...65535).contains(v) else { throw ValidationError("port \(v) is not in 0...65535") }
                c.http.port = v
            }
            if let v = try int(threads, "TILER_THREADS") {
                guard (1...256).contains(v) else { throw ValidationError("threads must be in 1...256") }
                c.http.threads = v
            }
            if let v = try int(blockingThreads, "TILER_BLOCKING_THREADS") {
                guard (1...1024).contains(v) else { throw ValidationError("blocking-threads must be in 1...1024") }
                c.http.blockingThreads = v
            }
            if let v = try int(cacheMB, "TILER_CACHE_MB") {
                guard v >= 0 else { throw ValidationError("cache-mb must not be negative") }
                c.cacheBytes = v << 20
            }
            if let v = cacheControl ?? env("TILER_CACHE_CONTROL") { c.cacheControl = v }
            if let v = corsOrigin ?? env("TILER_CORS_ORIGIN") { c.http.corsAllowOrigin = v.isEmpty ? nil : v }
            if let v = try int(maxConnections, "TILER_MAX_CONNECTIONS") {
                guard v >= 1 else { throw ValidationError("max-connections must be at least 1") }
                c.http.maximumConnections = v
            }
            if let v = try double(idleTimeout, "TILER_IDLE_TIMEOUT") {
                guard v > 0 else { throw ValidationError("idle-timeout must be positive") }
                c.http.idleTimeout = v
            }
            if let v = try double(headerTimeout, "TILER_HEADER_TIMEOUT") {
                guard v > 0 else { throw ValidationError("header-timeout must be positive") }
                c.http.requestHeadTimeout = v
            }
            if let v = try int(maxRequestLine, "TILER_MAX_REQUEST_LINE") {
                guard v >= 64 else { throw ValidationError("max-request-line must be at least 64") }
                c.http.maximumRequestLineBytes = v
            }
            if let v = try int(maxHeaderBytes, "TILER_MAX_HEADER_BYTES") {
                guard v >= 256 else { throw ValidationError("max-header-bytes must be at least 256") }
                c.http.maximumHeaderBytes = v
            }
            if let v = try int(maxHeaders, "TILER_MAX_HEADERS") {
                guard v >= 1 else { throw ValidationError("max-headers must be at least 1") }
                c.http.maximumHeaderCount = v
            }
            if let v = try int(maxVisibleTiles, "TILER_MAX_VISIBLE_TILES") {
                guard v >= 1 else { throw ValidationError("max-visible-tiles must be at least 1") }
                c.maximumVisibleTiles = v
            }
            for (value, variable, name, keyPath) in [(iiifMaxWidth, "TILER_IIIF_MAX_WIDTH", "iiif-max-width", \IIIFLimits.maxWidth),
                                                     (iiifMaxHeight, "TILER_IIIF_MAX_HEIGHT", "iiif-max-height", \IIIFLimits.maxHeight),
                                                     (iiifMaxArea, "TILER_IIIF_MAX_AREA", "iiif-max-area", \IIIFLimits.maxArea)] {
                if let v = try int(value, variable) {
                    guard v >= 1 else { throw ValidationError("\(name) must be at least 1") }
                    c.iiifLimits[keyPath: keyPath] = v
                }
            }
            return c
        }

        static func environmentBool(_ name: String) -> Bool? {
            guard let v = ProcessInfo.processInfo.environment[name]?.lowercased(), !v.isEmpty else { return nil }
            return ["1", "true", "yes", "on"].contains(v)
        }
    }
}

/// A failure of `tiler serve` after its arguments were accepted.
struct ServeError: Error, CustomStringConvertible {
    let description: String
}
