import ArgumentParser
import Foundation
import Logging
import ObjectStorage
import TilerCore
import TilerHTTP
import TilerImaging
import TilerServer

extension Tiler {
    /// `tiler serve [ROOT]`: serve every pyramid under ROOT over HTTP until SIGTERM/SIGINT.
    struct Serve: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve the pyramids under ROOT over HTTP: tiles, manifests, visible tiles, DeepZoom, IIIF and a web viewer.",
            discussion: """
            Routes: the image API (/images, /images/ID, /images/ID/tiles/L/R/C.EXT, \
            /images/ID/visible); DeepZoom for OpenSeadragon (/images/ID.dzi); IIIF Image API 3.0 \
            (/iiif/3/ID/info.json); IIIF Presentation API 3.0 for Mirador and Universal Viewer \
            (/iiif/3/ID/manifest.json, /iiif/3/collection.json); and a web viewer at / (an album \
            of every image and a deep-zoom view of one). Behind a reverse proxy, --base-url \
            names the public address (a path prefix included).

            Every option can also be set by the environment variable named after it \
            (e.g. TILER_PORT, TILER_HOST, TILER_ROOT, TILER_CACHE_MB, TILER_ACCESS_LOG=1); \
            a flag wins over its variable. Pyramids cut into ROOT while the server runs are \
            served without a restart. SIGTERM or SIGINT stops accepting, finishes the \
            responses in flight and exits 0. Prints `tiler: serving ROOT at URL` on start.

            ROOT holds pyramid folders (ROOT/ID/) and archives (ROOT/ID.pmtiles, from \
            `tiler cut --archive` or `tiler pack`); a folder wins over an archive of the same \
            id. ROOT may be s3://BUCKET/PREFIX: every PREFIX/ID.pmtiles is served by range \
            requests, with the credentials and endpoint every S3 tool reads \
            (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, \
            AWS_ENDPOINT_URL or --s3-endpoint) and the TILER_S3_* request bounds.
            """)

        @Argument(help: "The folder of pyramids (folders and .pmtiles archives), as written by `tiler cut --output`, or s3://BUCKET/PREFIX (env TILER_ROOT; default: tiles, where `tiler cut` writes by default).")
        var root: String?

        @Option(help: ArgumentHelp("Also serve every image file in DIR that libvips reads, without cutting it: each as the pyramid `tiler cut` would make (same id, geometry, manifest and routes), tiles made on demand and cached; a pyramid in ROOT with the same id wins (env TILER_SOURCES; default: none).", valueName: "DIR"))
        var sources: String?
        @Option(name: .customLong("sources-format"), help: "Tile format of images served from --sources, as `tiler cut --format` (env TILER_SOURCES_FORMAT; default: png).")
        var sourcesFormat: TileFormat?
        @Option(name: .customLong("sources-quality"), help: ArgumentHelp("JPEG or WebP quality of tiles from --sources, 1-100 (env TILER_SOURCES_QUALITY; default: as `tiler cut`).", valueName: "Q"))
        var sourcesQuality: Int?
        @Option(name: .customLong("sources-cache-mb"), help: "Memory for tile pixels made from --sources, kept to make the levels below them, MiB (env TILER_SOURCES_CACHE_MB; default: 128).")
        var sourcesCacheMB: Int?
        @Option(name: .customLong("max-pixels"), help: ArgumentHelp("Refuse source files with more pixels (width × height) than this, before decoding any, as `tiler cut` (env TILER_MAX_PIXELS; default: \(CutOptions.defaultMaxPixels)).", valueName: "N"))
        var maxPixels: Int?
        @Flag(name: .customLong("allow-vector"), help: "Serve SVG, PDF and ImageMagick files from --sources too (default: refused, as by `tiler cut`).")
        var allowVector = false
        @Flag(help: "Write each tile made from --sources into ROOT/ID/ (atomically; the manifest says partial), so a later `tiler serve ROOT` serves the tiles kept (env TILER_KEEP=1; default: off).")
        var keep = false

        @Option(name: .customLong("s3-endpoint"), help: ArgumentHelp("S3-compatible server for an s3:// ROOT, addressed path-style (default: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else AWS itself).", valueName: "URL"))
        var s3Endpoint: String?

        @Option(name: .customLong("storage-timeout"),
                help: "Seconds a request that needs object storage may wait for it, queueing included; then 504 (or 503) (env TILER_STORAGE_TIMEOUT; default: 10).")
        var storageTimeout: Double?
        @Option(name: .customLong("storage-threads"),
                help: "Threads that read from object storage, apart from the disk-read threads: the most storage requests under way at once (env TILER_STORAGE_THREADS; default: 16).")
        var storageThreads: Int?
        @Option(name: .customLong("max-queued-storage-reads"),
                help: "Reads waiting for a storage thread, else 503 (env TILER_MAX_QUEUED_STORAGE_READS; default: 256).")
        var maxQueuedStorageReads: Int?
        @Option(name: .customLong("directory-cache-entries"),
                help: "Archive directory entries kept in memory, 24 bytes each, over all archives (env TILER_DIRECTORY_CACHE_ENTRIES; default: 262144).")
        var directoryCacheEntries: Int?

        @Option(help: "Address to listen on, an IPv4 or IPv6 literal; 0.0.0.0 for all (env TILER_HOST; default: 127.0.0.1).")
        var host: String?

        @Option(help: "TCP port; 0 picks a free one (env TILER_PORT; default: 8080).")
        var port: Int?

        @Option(help: "Event-loop threads (env TILER_THREADS; default: one per core).")
        var threads: Int?
        @Option(name: .customLong("blocking-threads"),
                help: "Threads that read tiles missing from the page cache, so event loops never wait for the disk (env TILER_BLOCKING_THREADS; default: 4 per core).")
        var blockingThreads: Int?
        @Option(name: .customLong("render-threads"),
                help: "Threads that draw IIIF regions and small DeepZoom levels, apart from the read threads (env TILER_RENDER_THREADS; default: one per core).")
        var renderThreads: Int?
        @Option(name: .customLong("max-queued-reads"),
                help: "Tile reads waiting for a read thread, else 503 (env TILER_MAX_QUEUED_READS; default: 1024).")
        var maxQueuedReads: Int?
        @Option(name: .customLong("max-queued-renders"),
                help: "Drawings (and tiles made from --sources) waiting for a render thread, else 503 (env TILER_MAX_QUEUED_RENDERS; default: 32, or 1024 with --sources).")
        var maxQueuedRenders: Int?

        @Option(name: .customLong("cache-mb"), help: "Memory for cached tiles and documents, MiB (env TILER_CACHE_MB; default: 256).")
        var cacheMB: Int?
        @Option(name: .customLong("open-tiles"),
                help: "Tile files of folder pyramids kept open and sent with sendfile; 0 for none; at most what the file limit leaves beside the connections (env TILER_OPEN_TILES; default: 8192).")
        var openTiles: Int?

        @Option(help: "Cache-Control on tiles, thumbnails and manifests; empty for none (env TILER_CACHE_CONTROL; default: 'public, max-age=86400').")
        var cacheControl: String?

        @Option(help: "Access-Control-Allow-Origin; empty for no CORS headers (env TILER_CORS_ORIGIN; default: *).")
        var corsOrigin: String?

        @Option(help: "Most open connections; past it 503 and close (env TILER_MAX_CONNECTIONS; default: min(8192, file limit − 64)).")
        var maxConnections: Int?

        @Option(help: "Seconds before an idle keep-alive connection is closed (env TILER_IDLE_TIMEOUT; default: 60).")
        var idleTimeout: Double?

        @Option(help: "Seconds a client may take to send a request head, empty lines before it included (env TILER_HEADER_TIMEOUT; default: 10).")
        var headerTimeout: Double?

        @Option(help: "Seconds a response may wait for the client to read it before the connection is closed (env TILER_WRITE_TIMEOUT; default: 30).")
        var writeTimeout: Double?

        @Option(help: "Seconds given to requests in flight after SIGTERM/SIGINT; then 503 (env TILER_SHUTDOWN_GRACE; default: 10).")
        var shutdownGrace: Double?

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

        @Option(name: .customLong("render-memory-mb"),
                help: "Memory drawn IIIF and DeepZoom images may hold at once, MiB; past it they wait, then 503 (env TILER_RENDER_MEMORY_MB; default: half the memory available, at most 2048).")
        var renderMemoryMB: Int?

        @Option(name: .customLong("render-wait"),
                help: "Seconds a drawn image may wait for render memory before its 503 (env TILER_RENDER_WAIT; default: 2).")
        var renderWait: Double?

        @Option(name: .customLong("rescan-interval"),
                help: "Seconds between scans of ROOT for new, re-cut, replaced and deleted pyramids; for s3:// each scan is a listing (env TILER_RESCAN_INTERVAL; default: 1, or 10 for s3://).")
        var rescanInterval: Double?

        @Option(name: .customLong("base-url"),
                help: "The public address every URL the server writes starts with, e.g. https://example.org/tiles behind a reverse proxy that mounts tiler under /tiles/: http or https, no query or fragment (env TILER_BASE_URL; default: none, links are root-relative and IIIF ids use the Host header).")
        var baseURL: String?

        @Flag(name: .customLong("trust-proxy"), inversion: .prefixedNo,
              help: "Build absolute URLs (IIIF ids, Presentation manifests) from the Forwarded, X-Forwarded-Proto and X-Forwarded-Host headers; only behind a proxy that sets them, and only without --base-url (env TILER_TRUST_PROXY=1; default: off).")
        var trustProxy: Bool?

        @Flag(inversion: .prefixedNo, help: "Log one line per request to stderr: client address, method, target, status, bytes and duration (env TILER_ACCESS_LOG=1; default: off).")
        var accessLog: Bool?

        /// Settings out of range are usage errors, with `tiler serve`'s usage.
        func validate() throws {
            _ = try resolvedConfiguration()
        }

        func run() throws {
            let config = try resolvedConfiguration()
            if let s3 = config.s3 {
                try Self.checkBucket(config.root, s3, within: config.storageTimeout)
            } else {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: config.root, isDirectory: &isDirectory), isDirectory.boolValue else {
                    if root == nil, ProcessInfo.processInfo.environment["TILER_ROOT"]?.isEmpty ?? true {
                        throw ValidationError("there is no folder '\(config.root)' here, the default ROOT: cut images into it first (`tiler cut IMAGE` writes ./\(DefaultRoot.folder)), or name the folder of pyramids: `tiler serve ROOT`")
                    }
                    throw ValidationError("ROOT '\(config.root)' is not a folder; pass the --output folder of `tiler cut`")
                }
            }
            if let sources = config.sources {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: sources.directory, isDirectory: &isDirectory), isDirectory.boolValue else {
                    throw ValidationError("--sources '\(sources.directory)' is not a folder; name the folder of image files to serve")
                }
                // Sources without random access (JPEG, PNG, strip-less formats) are decoded
                // once to a temporary file that libvips reads regions of, never to memory.
                if ProcessInfo.processInfo.environment["VIPS_DISC_THRESHOLD"] == nil { setenv("VIPS_DISC_THRESHOLD", "0", 1) }
            }
            let logAccess = accessLog ?? Self.environmentBool("TILER_ACCESS_LOG") ?? false
            let signals = try TerminationSignals()  // before any thread starts
            let server = TileServer(configuration: config,
                                    accessLog: logAccess ? Logger(label: "tiler.access") { StreamLogHandler.standardError(label: $0) } : nil,
                                    log: Logger(label: "tiler") { StreamLogHandler.standardError(label: $0) })
            do {
                try server.start()
            } catch {
                // A run-time failure, not a usage mistake: no usage text after it.
                let hint = error.errno == EADDRINUSE ? " (another server is using that port; choose one with --port or TILER_PORT)" : ""
                throw ServeError(description: "cannot listen: \(error)\(hint)")
            }
            let shownHost = config.http.host.contains(":") ? "[\(config.http.host)]" : config.http.host
            // Unbuffered, so a parent reading our stdout sees the URL at once.
            let publicAddress = config.baseURL.map { " (public address \($0)/)" } ?? ""
            FileHandle.standardOutput.write(Data("tiler: serving \(config.root) at http://\(shownHost):\(server.port)/\(publicAddress)\n".utf8))
            if config.s3 == nil, config.sources == nil, let hint = EmptyRootHint.hint(root: config.root) {
                FileHandle.standardError.write(Data("tiler: serve: \(hint)\n".utf8))
            }
            let signal = signals.wait()
            FileHandle.standardError.write(Data("tiler: signal \(signal), finishing in-flight requests\n".utf8))
            server.stop()
            server.wait()
        }

        /// Flags, then `TILER_*` variables, then defaults. Every number is checked against
        /// its range (`HTTPConfiguration.Range`, `ServerConfiguration.Range`): a value out of
        /// range is a usage error naming the flag or variable, never a trap later.
        func resolvedConfiguration() throws -> ServerConfiguration {
            func env(_ name: String) -> String? {
                guard let v = ProcessInfo.processInfo.environment[name] else { return nil }
                return v
            }
            func int(_ flag: Int?, _ option: String, _ variable: String, _ range: ClosedRange<Int>) throws -> Int? {
                let value: Int, source: String
                if let flag {
                    (value, source) = (flag, "--\(option)")
                } else {
                    guard let text = env(variable), !text.isEmpty else { return nil }
                    guard let v = Int(text) else { throw ValidationError("\(variable)='\(text)' is not an integer") }
                    (value, source) = (v, variable)
                }
                guard range.contains(value) else {
                    throw ValidationError("\(source) must be \(range.lowerBound)...\(range.upperBound), not \(value)")
                }
                return value
            }
            func seconds(_ flag: Double?, _ option: String, _ variable: String, _ range: ClosedRange<Double>) throws -> Double? {
                let value: Double, source: String
                if let flag {
                    (value, source) = (flag, "--\(option)")
                } else {
                    guard let text = env(variable), !text.isEmpty else { return nil }
                    guard let v = Double(text) else { throw ValidationError("\(variable)='\(text)' is not a number") }
                    (value, source) = (v, variable)
                }
                // NaN and infinities are outside every range.
                guard range.contains(value) else {
                    throw ValidationError("\(source) must be a number of seconds from \(range.lowerBound) to \(range.upperBound), not \(value)")
                }
                return value
            }
            typealias R = HTTPConfiguration.Range
            var c = ServerConfiguration(root: root ?? DefaultRoot.resolved())
            if S3Location.isS3(c.root) {
                c.s3 = try Self.bucketConfiguration(c.root, endpoint: s3Endpoint)
                c.rescanInterval = 10
            } else if s3Endpoint != nil {
                throw ValidationError("--s3-endpoint applies to an s3://BUCKET/PREFIX ROOT only.")
            }
            if let v = try seconds(storageTimeout, "storage-timeout", "TILER_STORAGE_TIMEOUT", ServerConfiguration.Range.storageTimeout) {
                c.storageTimeout = v
            }
            if let v = try int(storageThreads, "storage-threads", "TILER_STORAGE_THREADS", R.blockingThreads) { c.http.storageThreads = v }
            if let v = try int(maxQueuedStorageReads, "max-queued-storage-reads", "TILER_MAX_QUEUED_STORAGE_READS", R.queueLength) {
                c.http.maximumQueuedStorageReads = v
            }
            if let v = try int(directoryCacheEntries, "directory-cache-entries", "TILER_DIRECTORY_CACHE_ENTRIES",
                               ServerConfiguration.Range.directoryCacheEntries) {
                c.directoryCacheEntries = v
            }
            if let v = host ?? env("TILER_HOST"), !v.isEmpty { c.http.host = v }
            if let v = try int(port, "port", "TILER_PORT", R.port) { c.http.port = v }
            if let v = try int(threads, "threads", "TILER_THREADS", R.threads) { c.http.threads = v }
            if let v = try int(blockingThreads, "blocking-threads", "TILER_BLOCKING_THREADS", R.blockingThreads) {
                c.http.blockingThreads = v
            }
            if let v = try int(renderThreads, "render-threads", "TILER_RENDER_THREADS", R.renderThreads) { c.http.renderThreads = v }
            if let v = try int(maxQueuedReads, "max-queued-reads", "TILER_MAX_QUEUED_READS", R.queueLength) {
                c.http.maximumQueuedReads = v
            }
            if let v = try int(maxQueuedRenders, "max-queued-renders", "TILER_MAX_QUEUED_RENDERS", R.queueLength) {
                c.http.maximumQueuedRenders = v
            }
            if let v = try int(cacheMB, "cache-mb", "TILER_CACHE_MB", ServerConfiguration.Range.cacheMB) { c.cacheBytes = v << 20 }
            if let v = try int(openTiles, "open-tiles", "TILER_OPEN_TILES", ServerConfiguration.Range.openTiles) { c.openTiles = v }
            if let v = cacheControl ?? env("TILER_CACHE_CONTROL") { c.cacheControl = v }
            if let v = corsOrigin ?? env("TILER_CORS_ORIGIN") { c.http.corsAllowOrigin = v.isEmpty ? nil : v }
            if let v = try int(maxConnections, "max-connections", "TILER_MAX_CONNECTIONS", R.connections) {
                c.http.maximumConnections = v
            }
            if let v = try seconds(idleTimeout, "idle-timeout", "TILER_IDLE_TIMEOUT", R.timeout) { c.http.idleTimeout = v }
            if let v = try seconds(headerTimeout, "header-timeout", "TILER_HEADER_TIMEOUT", R.timeout) {
                c.http.requestHeadTimeout = v
            }
            if let v = try seconds(writeTimeout, "write-timeout", "TILER_WRITE_TIMEOUT", R.timeout) { c.http.writeTimeout = v }
            if let v = try seconds(shutdownGrace, "shutdown-grace", "TILER_SHUTDOWN_GRACE", R.gracePeriod) {
                c.http.shutdownGracePeriod = v
            }
            if let v = try int(maxRequestLine, "max-request-line", "TILER_MAX_REQUEST_LINE", R.requestLineBytes) {
                c.http.maximumRequestLineBytes = v
            }
            if let v = try int(maxHeaderBytes, "max-header-bytes", "TILER_MAX_HEADER_BYTES", R.headerBytes) {
                c.http.maximumHeaderBytes = v
            }
            if let v = try int(maxHeaders, "max-headers", "TILER_MAX_HEADERS", R.headerCount) { c.http.maximumHeaderCount = v }
            if let v = try int(maxVisibleTiles, "max-visible-tiles", "TILER_MAX_VISIBLE_TILES", ServerConfiguration.Range.visibleTiles) {
                c.maximumVisibleTiles = v
            }
            typealias S = ServerConfiguration.Range
            if let v = try int(renderMemoryMB, "render-memory-mb", "TILER_RENDER_MEMORY_MB", S.renderMemoryMB) {
                c.renderMemoryBytes = v << 20
            }
            if let v = try seconds(renderWait, "render-wait", "TILER_RENDER_WAIT", S.renderWait) { c.renderWait = v }
            if let v = try seconds(rescanInterval, "rescan-interval", "TILER_RESCAN_INTERVAL", S.rescanInterval) {
                c.rescanInterval = v
            }
            for (value, option, variable, keyPath, range) in [
                (iiifMaxWidth, "iiif-max-width", "TILER_IIIF_MAX_WIDTH", \IIIFLimits.maxWidth, ServerConfiguration.Range.iiifSide),
                (iiifMaxHeight, "iiif-max-height", "TILER_IIIF_MAX_HEIGHT", \IIIFLimits.maxHeight, ServerConfiguration.Range.iiifSide),
                (iiifMaxArea, "iiif-max-area", "TILER_IIIF_MAX_AREA", \IIIFLimits.maxArea, ServerConfiguration.Range.iiifArea),
            ] {
                if let v = try int(value, option, variable, range) { c.iiifLimits[keyPath: keyPath] = v }
            }
            if let directory = sources ?? env("TILER_SOURCES"), !directory.isEmpty {
                var settings = ServerConfiguration.SourceSettings(directory: directory)
                if let format = sourcesFormat {
                    settings.format = format
                } else if let text = env("TILER_SOURCES_FORMAT"), !text.isEmpty {
                    guard let format = TileFormat(rawValue: text) else {
                        throw ValidationError("TILER_SOURCES_FORMAT='\(text)' is not png, jpeg or webp")
                    }
                    settings.format = format
                }
                if let q = try int(sourcesQuality, "sources-quality", "TILER_SOURCES_QUALITY", 1...100) {
                    guard settings.format != .png else {
                        throw ValidationError("--sources-quality applies to --sources-format jpeg or webp; PNG tiles are lossless.")
                    }
                    settings.quality = q
                }
                if let mb = try int(sourcesCacheMB, "sources-cache-mb", "TILER_SOURCES_CACHE_MB", S.sourcesCacheMB) {
                    settings.pixelCacheBytes = mb << 20
                }
                if let n = try int(maxPixels, "max-pixels", "TILER_MAX_PIXELS", 1...Int.max) { settings.maxPixels = n }
                settings.allowVector = allowVector || Self.environmentBool("TILER_ALLOW_VECTOR") == true
                settings.keep = keep || Self.environmentBool("TILER_KEEP") == true
                if settings.keep, S3Location.isS3(c.root) {
                    throw ValidationError("--keep writes pyramid folders into ROOT, which must then be a folder, not \(c.root).")
                }
                c.sources = settings
                // Tiles made from sources share the render queue with drawings: a viewer
                // asks for dozens of tiles at once, so the queue is longer unless set.
                if maxQueuedRenders == nil, (env("TILER_MAX_QUEUED_RENDERS") ?? "").isEmpty {
                    c.http.maximumQueuedRenders = max(c.http.maximumQueuedRenders, Self.sourcesQueuedRenders)
                }
            } else if sourcesFormat != nil || sourcesQuality != nil || sourcesCacheMB != nil || maxPixels != nil || allowVector || keep {
                throw ValidationError("--sources-format, --sources-quality, --sources-cache-mb, --max-pixels, --allow-vector and --keep apply with --sources DIR only.")
            }
            if let text = baseURL ?? env("TILER_BASE_URL"), !text.isEmpty {
                do {
                    c.baseURL = try BaseURL(parsing: text)
                } catch {
                    throw ValidationError("\(baseURL != nil ? "--base-url" : "TILER_BASE_URL"): \(error)")
                }
            }
            c.trustProxy = trustProxy ?? Self.environmentBool("TILER_TRUST_PROXY") ?? false
            // Every field was range-checked above; this keeps the two in step.
            do {
                try c.validate()
            } catch {
                throw ValidationError("\(error)")
            }
            return c
        }

        /// The S3 settings for an `s3://` ROOT, from the environment; a usage error naming
        /// what is wrong otherwise.
        static func bucketConfiguration(_ root: String, endpoint: String?) throws -> S3Configuration {
            let outcome: Result<S3Configuration, S3Error> = Result { () throws(S3Error) -> S3Configuration in
                _ = try S3Location(parsing: root)
                return try S3Configuration(environment: ProcessInfo.processInfo.environment, endpoint: endpoint)
            }
            switch outcome {
            case let .success(configuration): return configuration
            case let .failure(error): throw ValidationError("ROOT: \(error.message)")
            }
        }

        /// Lists the bucket's prefix once (one key) before serving: refused credentials or a
        /// missing bucket end the command with one line (exit 1); storage that does not
        /// answer only gets a warning, since the server recovers by itself when it returns.
        static func checkBucket(_ root: String, _ configuration: S3Configuration, within seconds: Double) throws {
            guard let location = try? S3Location(parsing: root) else { return }
            do throws(S3Error) {
                _ = try StorageDeadline(seconds: seconds).run { () throws(S3Error) in
                    try S3Client(configuration: configuration).list(bucket: location.bucket, prefix: location.listPrefix, maxKeys: 1)
                }
            } catch {
                if error.isUnavailable {
                    FileHandle.standardError.write(Data("tiler: warning: \(error); serving anyway, images appear when storage answers\n".utf8))
                    return
                }
                throw ServeError(description: "cannot serve \(root): \(error)")
            }
        }

        /// `--max-queued-renders` with `--sources` when not set.
        static let sourcesQueuedRenders = 1024

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
