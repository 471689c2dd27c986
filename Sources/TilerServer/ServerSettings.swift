import ObjectStorage
import TilerCore
import TilerHTTP
import TilerImaging
import TilerSettings
import TilerStorage

extension ServerConfiguration {
    /// One setting of `tiler serve`: a flag (`--idle-timeout`) and, for all but
    /// `--s3-endpoint`, the `TILER_*` variable named after it (`TILER_IDLE_TIMEOUT`).
    ///
    /// What each means, its range and its default are declared here, once (a
    /// `SettingTable`): the help text is made from them (`help`), the command line only
    /// declares the flags, and `init(root:flags:environment:)` reads and checks every
    /// value. The cases are in the order values are applied (`--sources` before the
    /// settings that need it).
    public enum Setting: String, SettingTable {
        case sources
        case sourcesFormat = "sources-format"
        case sourcesQuality = "sources-quality"
        case sourcesCacheMB = "sources-cache-mb"
        case sourcesSpillMB = "sources-spill-mb"
        case maxPixels = "max-pixels"
        case allowVector = "allow-vector"
        case keep
        case s3Endpoint = "s3-endpoint"
        case storageTimeout = "storage-timeout"
        case storageThreads = "storage-threads"
        case maxQueuedStorageReads = "max-queued-storage-reads"
        case directoryCacheEntries = "directory-cache-entries"
        case host
        case port
        case threads
        case blockingThreads = "blocking-threads"
        case renderThreads = "render-threads"
        case maxQueuedReads = "max-queued-reads"
        case maxQueuedRenders = "max-queued-renders"
        case cacheMB = "cache-mb"
        case openTiles = "open-tiles"
        case cacheControl = "cache-control"
        case corsOrigin = "cors-origin"
        case maxConnections = "max-connections"
        case idleTimeout = "idle-timeout"
        case headerTimeout = "header-timeout"
        case writeTimeout = "write-timeout"
        case shutdownGrace = "shutdown-grace"
        case maxRequestLine = "max-request-line"
        case maxHeaderBytes = "max-header-bytes"
        case maxHeaders = "max-headers"
        case maxVisibleTiles = "max-visible-tiles"
        case viewerMaxZoom = "viewer-max-zoom"
        case frameAncestors = "frame-ancestors"
        case iiifMaxWidth = "iiif-max-width"
        case iiifMaxHeight = "iiif-max-height"
        case iiifMaxArea = "iiif-max-area"
        case renderMemoryMB = "render-memory-mb"
        case renderWait = "render-wait"
        case rescanInterval = "rescan-interval"
        case baseURL = "base-url"
        case trustProxy = "trust-proxy"
        case access
        case tokenCache = "token-cache"
        case accessLog = "access-log"
        case logFormat = "log-format"
        case metricsPort = "metrics-port"

        /// `TILER_NAME`, or nil for `--s3-endpoint` (which every S3 tool reads from
        /// `AWS_ENDPOINT_URL`).
        public var variable: String? {
            self == .s3Endpoint ? nil : "TILER_" + rawValue.uppercased().replacingOccurrences(of: "-", with: "_")
        }

        public var declaration: SettingDeclaration<ServerConfiguration> { spec.declaration }

        public static var defaults: ServerConfiguration { ServerConfiguration.defaults }

        /// A row of the table, and whether it needs `--sources`.
        struct Spec {
            var declaration: SettingDeclaration<ServerConfiguration>
            /// Only with `--sources`: the flag without it is a usage error, the variable
            /// is ignored.
            var needsSources: Bool

            init(
                summary: String, valueName: String? = nil, value: SettingValue<ServerConfiguration>,
                defaultText: String? = nil, needsSources: Bool = false
            ) {
                declaration = SettingDeclaration(summary: summary, value: value, valueName: valueName, defaultText: defaultText)
                self.needsSources = needsSources
            }
        }

        var spec: Spec {
            typealias H = HTTPConfiguration.Range
            typealias S = ServerConfiguration.Range
            switch self {
            case .sources:
                return Spec(
                    summary:
                        "Also serve every image file in DIR that libvips reads, without cutting it: each as the pyramid `tiler cut` would make (same id, geometry, manifest and routes), tiles made on demand and cached; a pyramid in ROOT with the same id wins. No ROOT is needed: unless one is named, a missing ./tiles only means no pyramids yet",
                    valueName: "DIR",
                    value: .other(emptyIsValue: false) { c, text, _ in
                        c.sources = SourceSettings(directory: text)
                    })
            case .sourcesFormat:
                return Spec(
                    summary:
                        "Tile format of images served from --sources, as `tiler cut --format`: auto (JPEG for a file without alpha, PNG for one with it), png, jpeg or webp",
                    valueName: "format",
                    value: .other(emptyIsValue: false) { c, text, source throws(SettingError) in
                        c.sources!.format = try TileSettings.format(text, from: source)
                    },
                    defaultText: ServerConfiguration.defaults.sources!.format?.rawValue ?? "auto", needsSources: true)
            case .sourcesQuality:
                return Spec(
                    summary:
                        "JPEG or WebP quality of tiles from --sources (with auto, of the JPEG ones), \(TileSettings.qualityRange.lowerBound)-\(TileSettings.qualityRange.upperBound)",
                    valueName: "Q",
                    value: .other(emptyIsValue: false) { c, text, source throws(SettingError) in
                        c.sources!.quality = try SettingText.integer(text, from: source, in: TileSettings.qualityRange)
                    },
                    defaultText: "as `tiler cut`", needsSources: true)
            case .sourcesCacheMB:
                return Spec(
                    summary: "Memory for tile pixels made from --sources, kept to make the levels below them, MiB",
                    value: .mebibytes(\.sources!.pixelCacheBytes, S.sourcesCacheMB), needsSources: true)
            case .sourcesSpillMB:
                return Spec(
                    summary:
                        "Temporary disk (in TMPDIR) for decoding --sources files without random access (PNG, JPEG, strip TIFF) whole before their tiles are made, over all sources, MiB: past it the least recently used are closed, and a file needing more is refused (500)",
                    value: .mebibytes(\.sources!.spillBytes, S.sourcesSpillMB), needsSources: true)
            case .maxPixels:
                return Spec(
                    summary: "Refuse source files with more pixels (width × height) than this, before decoding any, as `tiler cut`",
                    value: .integer(\.sources!.maxPixels, TileSettings.maxPixelsRange), needsSources: true)
            case .allowVector:
                return Spec(
                    summary: "Serve SVG, PDF and ImageMagick files from --sources too; `tiler cut` refuses them by default",
                    value: .toggle(\.sources!.allowVector), needsSources: true)
            case .keep:
                return Spec(
                    summary:
                        "Write each tile made from --sources into ROOT/ID/ (atomically; the manifest says partial), so a later `tiler serve ROOT` serves the tiles kept",
                    value: .toggle(\.sources!.keep), needsSources: true)
            case .s3Endpoint:
                // Read with the bucket's other settings, before every other setting.
                return Spec(
                    summary: S3Settings.endpointSummary, valueName: S3Settings.endpointValueName,
                    value: .other(emptyIsValue: false) { _, _, _ in }, defaultText: S3Settings.endpointDefault)
            case .storageTimeout:
                return Spec(
                    summary: "Seconds a request that needs object storage may wait for it, queueing included; then 504 (or 503)",
                    value: .seconds(\.storageTimeout, S.storageTimeout))
            case .storageThreads:
                return Spec(
                    summary:
                        "Threads that read from object storage, apart from the disk-read threads: the most storage requests under way at once",
                    value: .integer(\.http.storageThreads, H.blockingThreads))
            case .maxQueuedStorageReads:
                return Spec(
                    summary: "Reads waiting for a storage thread, else 503",
                    value: .integer(\.http.maximumQueuedStorageReads, H.queueLength))
            case .directoryCacheEntries:
                return Spec(
                    summary:
                        "Archive directory entries (roots and leaves, 24 bytes each) kept in memory over all archives; also the most one directory may hold (an archive with a larger one is refused)",
                    value: .integer(\.directoryCacheEntries, S.directoryCacheEntries))
            case .host:
                return Spec(
                    summary: "Address to listen on, an IPv4 or IPv6 literal; 0.0.0.0 for all",
                    valueName: "address",
                    value: .other(emptyIsValue: false) { c, text, source throws(SettingError) in
                        guard HTTPConfiguration.isListenableHost(text) else {
                            throw SettingError("\(source)='\(text)' is not an IPv4 or IPv6 address (e.g. 127.0.0.1, 0.0.0.0, ::)")
                        }
                        c.http.host = text
                    },
                    defaultText: ServerConfiguration.defaults.http.host)
            case .port:
                return Spec(summary: "TCP port; 0 picks a free one", value: .integer(\.http.port, H.port))
            case .threads:
                return Spec(
                    summary: "Event-loop threads", value: .integer(\.http.threads, H.threads),
                    defaultText: "one per core")
            case .blockingThreads:
                return Spec(
                    summary: "Threads that read tiles missing from the page cache, so event loops never wait for the disk",
                    value: .integer(\.http.blockingThreads, H.blockingThreads),
                    defaultText: "\(HTTPConfiguration.blockingThreadsPerCore) per core")
            case .renderThreads:
                return Spec(
                    summary: "Threads that draw IIIF regions and small DeepZoom levels, apart from the read threads",
                    value: .integer(\.http.renderThreads, H.renderThreads), defaultText: "one per core")
            case .maxQueuedReads:
                return Spec(
                    summary: "Tile reads waiting for a read thread, else 503",
                    value: .integer(\.http.maximumQueuedReads, H.queueLength))
            case .maxQueuedRenders:
                return Spec(
                    summary: "Drawings (and tiles made from --sources) waiting for a render thread, else 503",
                    value: .integer(\.http.maximumQueuedRenders, H.queueLength),
                    defaultText:
                        "\(ServerConfiguration.defaults.http.maximumQueuedRenders), or \(ServerConfiguration.sourcesQueuedRenders) with --sources"
                )
            case .cacheMB:
                return Spec(summary: "Memory for cached tiles and documents, MiB", value: .mebibytes(\.cacheBytes, S.cacheMB))
            case .openTiles:
                return Spec(
                    summary:
                        "Tile files of folder pyramids kept open and sent with sendfile; 0 for none; at most what the file limit leaves beside the connections",
                    value: .integer(\.openTiles, S.openTiles))
            case .cacheControl:
                return Spec(
                    summary: "Cache-Control on tiles, thumbnails and manifests; empty for none",
                    valueName: "value",
                    value: .other(emptyIsValue: true) { c, text, source throws(SettingError) in
                        c.cacheControl = try Setting.headerValue(text, from: source)
                    },
                    defaultText: "'\(ServerConfiguration.defaults.cacheControl)'")
            case .corsOrigin:
                return Spec(
                    summary: "Access-Control-Allow-Origin; empty for no CORS headers",
                    valueName: "origin",
                    value: .other(emptyIsValue: true) { c, text, source throws(SettingError) in
                        let origin = try Setting.headerValue(text, from: source)
                        c.http.corsAllowOrigin = origin.isEmpty ? nil : origin
                    },
                    defaultText: ServerConfiguration.defaults.http.corsAllowOrigin ?? "none")
            case .maxConnections:
                return Spec(
                    summary: "Most open connections; past it 503 and close",
                    valueName: "n",
                    value: .other(emptyIsValue: false) { c, text, source throws(SettingError) in
                        c.http.maximumConnections = try SettingText.integer(text, from: source, in: H.connections)
                    },
                    defaultText: "min(\(HTTPConfiguration.defaultConnectionCeiling), file limit − \(HTTPConfiguration.reservedDescriptors))"
                )
            case .idleTimeout:
                return Spec(
                    summary: "Seconds before an idle keep-alive connection is closed",
                    value: .seconds(\.http.idleTimeout, H.timeout))
            case .headerTimeout:
                return Spec(
                    summary: "Seconds a client may take to send a request head, empty lines before it included; then 408",
                    value: .seconds(\.http.requestHeadTimeout, H.timeout))
            case .writeTimeout:
                return Spec(
                    summary: "Seconds a response may wait for the client to read it before the connection is closed",
                    value: .seconds(\.http.writeTimeout, H.timeout))
            case .shutdownGrace:
                return Spec(
                    summary: "Seconds given to requests in flight after SIGTERM/SIGINT; then 503",
                    value: .seconds(\.http.shutdownGracePeriod, H.gracePeriod))
            case .maxRequestLine:
                return Spec(
                    summary: "Longest request line in bytes, else 414",
                    value: .integer(\.http.maximumRequestLineBytes, H.requestLineBytes))
            case .maxHeaderBytes:
                return Spec(
                    summary: "Largest request header section in bytes, else 431",
                    value: .integer(\.http.maximumHeaderBytes, H.headerBytes))
            case .maxHeaders:
                return Spec(summary: "Most request headers, else 431", value: .integer(\.http.maximumHeaderCount, H.headerCount))
            case .maxVisibleTiles:
                return Spec(
                    summary: "Most tiles one /visible answer may list, else 400",
                    value: .integer(\.maximumVisibleTiles, S.visibleTiles))
            case .viewerMaxZoom:
                return Spec(
                    summary: "The web viewer's deepest zoom, in percent of the image's own pixels",
                    value: .integer(\.viewerMaxZoomPercent, S.viewerMaxZoom))
            case .frameAncestors:
                return Spec(
                    summary:
                        "Who may show the embed pages (/embed/strip, /embed/coverflow) in a frame: their Content-Security-Policy frame-ancestors, a source list such as \"'self' https://blog.example.org https://*.example.com\", or 'none'",
                    valueName: "sources",
                    value: .other(emptyIsValue: false) { c, text, source throws(SettingError) in
                        guard ServerConfiguration.isSourceList(text) else {
                            throw SettingError(
                                "\(source)='\(text.prefix(80))' is not a CSP source list (sources such as *, 'self', 'none' or https://host, separated by spaces; no ';' or ',')"
                            )
                        }
                        c.frameAncestors = text
                    },
                    defaultText: ServerConfiguration.defaults.frameAncestors)
            case .iiifMaxWidth:
                return Spec(summary: "Widest IIIF image output, px", value: .integer(\.iiifLimits.maxWidth, S.iiifSide))
            case .iiifMaxHeight:
                return Spec(summary: "Tallest IIIF image output, px", value: .integer(\.iiifLimits.maxHeight, S.iiifSide))
            case .iiifMaxArea:
                return Spec(summary: "Largest IIIF image output, pixels", value: .integer(\.iiifLimits.maxArea, S.iiifArea))
            case .renderMemoryMB:
                return Spec(
                    summary: "Memory drawn IIIF and DeepZoom images may hold at once, MiB; past it they wait, then 503",
                    value: .mebibytes(\.renderMemoryBytes, S.renderMemoryMB),
                    defaultText: "half the memory available, at most \(ServerConfiguration.renderMemoryCeiling >> 20)")
            case .renderWait:
                return Spec(
                    summary: "Seconds a drawn image may wait for render memory before its 503",
                    value: .seconds(\.renderWait, S.renderWait))
            case .rescanInterval:
                return Spec(
                    summary:
                        "Seconds between scans of ROOT for new, re-cut, replaced and deleted pyramids; for s3:// each scan is a listing",
                    value: .seconds(\.rescanInterval, S.rescanInterval),
                    defaultText:
                        "\(SettingText.decimal(ServerConfiguration.defaults.rescanInterval)), or \(SettingText.decimal(ServerConfiguration.bucketRescanInterval)) for s3://"
                )
            case .baseURL:
                return Spec(
                    summary:
                        "The public address every URL the server writes starts with, e.g. https://example.org/tiles behind a reverse proxy that mounts tiler under /tiles/: http or https, no query or fragment",
                    valueName: "URL",
                    value: .other(emptyIsValue: false) { c, text, source throws(SettingError) in
                        do {
                            c.baseURL = try BaseURL(parsing: text)
                        } catch {
                            throw SettingError("\(source): \(error)")
                        }
                    },
                    defaultText: "none, links are root-relative and IIIF ids use the Host header")
            case .trustProxy:
                return Spec(
                    summary:
                        "Build absolute URLs (IIIF ids, Presentation manifests) from the Forwarded, X-Forwarded-Proto and X-Forwarded-Host headers; only behind a proxy that sets them, and only without --base-url",
                    value: .toggle(\.trustProxy))
            case .access:
                return Spec(
                    summary:
                        "An access policy (JSON): which images are private and the keys whose tokens (JWT) open them; re-read when it changes",
                    valueName: "file",
                    value: .other(emptyIsValue: false) { c, text, _ throws(SettingError) in
                        c.accessPolicy = text
                    },
                    defaultText: "none, every image is public")
            case .tokenCache:
                return Spec(
                    summary: "Verified access tokens remembered, so that a request with one seen before pays no signature check",
                    value: .integer(\.tokenCacheEntries, S.tokenCache))
            case .accessLog:
                return Spec(
                    summary:
                        "Log one line per request to stderr: client address, method, path (credentials in the query redacted), status, bytes, duration and request id",
                    value: .toggle(\.accessLog))
            case .logFormat:
                return Spec(
                    summary:
                        "How log lines are written on stderr: text (one readable line each) or json (one JSON object per line: time, level, message and fields)",
                    valueName: "text|json",
                    value: .other(emptyIsValue: false) { c, text, source throws(SettingError) in
                        guard let format = ServerConfiguration.LogFormat(rawValue: text) else {
                            throw SettingError("\(source)='\(text)' is neither text nor json")
                        }
                        c.logFormat = format
                    },
                    defaultText: "text")
            case .metricsPort:
                return Spec(
                    summary:
                        "Serve Prometheus metrics at /metrics on this TCP port, on the --host address (a second listener apart from the API; 0 picks a free one); off when not given",
                    valueName: "port",
                    value: .other(emptyIsValue: false) { c, text, source throws(SettingError) in
                        c.metricsPort = try SettingText.integer(text, from: source, in: H.port)
                    },
                    defaultText: "off")
            }
        }

        /// `text` if it can be a header's value (no control character but tab).
        static func headerValue(_ text: String, from source: String) throws(SettingError) -> String {
            guard HTTPConfiguration.isHeaderValue(text) else {
                throw SettingError("\(source) holds a control character, which a header value cannot")
            }
            return text
        }
    }

    /// `tiler serve`'s configuration: each setting from its flag (`flags`, by setting, as
    /// typed), else its variable in `environment` (an empty one is unset, except where
    /// empty means none), else its default; ROOT from `root`, else `TILER_ROOT`, else
    /// `DefaultRoot.folder`. Every value is checked: the first one that cannot be used
    /// throws, naming the flag or variable it came from.
    public init(
        root: String? = nil, flags: [Setting: String] = [:],
        environment: [String: String]
    ) throws(SettingError) {
        self.init(root: root ?? DefaultRoot.resolved(environment: environment))
        if S3Location.isS3(self.root) {
            do throws(S3Error) {
                _ = try S3Location(parsing: self.root)
            } catch {
                throw SettingError("ROOT: \(error.message)")
            }
            do {
                s3 = try S3Settings.configuration(environment: environment, endpoint: flags[.s3Endpoint])
            } catch {
                throw SettingError("ROOT: \(error)")
            }
            rescanInterval = Self.bucketRescanInterval
        } else if flags[.s3Endpoint] != nil {
            throw SettingError("\(Setting.s3Endpoint.flag) applies to an s3://BUCKET/PREFIX ROOT only")
        }
        var given: [Setting: String] = [:]  // each setting given, and by which flag or variable
        for setting in Setting.allCases where setting != .s3Endpoint {
            guard let (text, source) = setting.given(flags: flags, environment: environment) else { continue }
            if setting.spec.needsSources, sources == nil {
                if flags[setting] != nil {
                    throw SettingError("\(setting.flag) applies with \(Setting.sources.flag) DIR only")
                }
                // A variable for sources without sources: checked, then nothing to apply it to.
                var unused = self
                unused.sources = SourceSettings(directory: "")
                try setting.apply(text, from: source, to: &unused)
                continue
            }
            try setting.apply(text, from: source, to: &self)
            given[setting] = source
        }
        if let quality = given[.sourcesQuality], sources?.format == .png {
            throw TileSettings.qualityWithPNG(quality, formatFlag: Setting.sourcesFormat.flag)
        }
        if let keep = given[.keep], sources?.keep == true, s3 != nil {
            throw SettingError("\(keep) writes pyramid folders into ROOT, which must then be a folder, not \(self.root)")
        }
        // Tiles made from sources share the render queue with drawings: a viewer asks for
        // dozens of tiles at once, so the queue is longer unless set.
        if sources != nil, given[.maxQueuedRenders] == nil {
            http.maximumQueuedRenders = max(http.maximumQueuedRenders, Self.sourcesQueuedRenders)
        }
        // Every field was checked above; this keeps the two in step.
        do {
            try validate()
        } catch {
            throw SettingError(error.description)
        }
    }

    /// The configuration with every default (ROOT `DefaultRoot.folder`), with the default
    /// source settings.
    static let defaults: ServerConfiguration = {
        var c = ServerConfiguration(root: DefaultRoot.folder)
        c.sources = SourceSettings(directory: "")
        return c
    }()

    /// `rescanInterval` for an `s3://` ROOT, where each scan is a listing.
    public static let bucketRescanInterval: Double = 10
    /// `http.maximumQueuedRenders` with `--sources`, when not set: a viewer asks for
    /// dozens of tiles at once.
    public static let sourcesQueuedRenders = 1024
}
