import Foundation
import Testing
import TilerCore
import TilerHTTP
import TilerServer
import TilerStorage
import TilerTestSupport

/// `tiler serve`'s settings as the library reads them (`ServerConfiguration(root:flags:environment:)`):
/// the environment, flags over it, the defaults declared once, and every value that
/// cannot be used refused with its flag or variable named.
@Suite struct ServerSettingsTests {
    typealias Setting = ServerConfiguration.Setting

    /// With nothing set, the configuration is the library's own defaults.
    @Test func nothingSetIsTheDefaults() throws {
        #expect(try ServerConfiguration(environment: [:]) == ServerConfiguration(root: DefaultRoot.folder))
        #expect(
            try ServerConfiguration(environment: ["TILER_PORT": "", "TILER_ROOT": ""])
                == ServerConfiguration(root: DefaultRoot.folder))
    }

    /// Every variable is read: each set to something other than its default lands in its
    /// field (and this test names every setting's variable).
    @Test func everyVariableIsRead() throws {
        let environment = [
            "TILER_ROOT": "/srv/pyramids",
            "TILER_SOURCES": "/srv/images/", "TILER_SOURCES_FORMAT": "webp", "TILER_SOURCES_QUALITY": "70",
            "TILER_SOURCES_CACHE_MB": "3", "TILER_SOURCES_SPILL_MB": "21", "TILER_MAX_PIXELS": "1000", "TILER_ALLOW_VECTOR": "yes",
            "TILER_KEEP": "TRUE",
            "TILER_STORAGE_TIMEOUT": "2.5", "TILER_STORAGE_THREADS": "3", "TILER_MAX_QUEUED_STORAGE_READS": "4",
            "TILER_DIRECTORY_CACHE_ENTRIES": "5000", "TILER_HOST": "::1", "TILER_PORT": "1234", "TILER_THREADS": "3",
            "TILER_BLOCKING_THREADS": "5", "TILER_RENDER_THREADS": "6", "TILER_MAX_QUEUED_READS": "7",
            "TILER_MAX_QUEUED_RENDERS": "8", "TILER_CACHE_MB": "9", "TILER_OPEN_TILES": "10",
            "TILER_CACHE_CONTROL": "", "TILER_CORS_ORIGIN": "https://x.example", "TILER_MAX_CONNECTIONS": "11",
            "TILER_IDLE_TIMEOUT": "12", "TILER_HEADER_TIMEOUT": "13", "TILER_WRITE_TIMEOUT": "14",
            "TILER_SHUTDOWN_GRACE": "0", "TILER_MAX_REQUEST_LINE": "1000", "TILER_MAX_HEADER_BYTES": "2000",
            "TILER_MAX_HEADERS": "15", "TILER_MAX_VISIBLE_TILES": "16", "TILER_VIEWER_MAX_ZOOM": "400",
            "TILER_FRAME_ANCESTORS": "'self' https://blog.example.org", "TILER_IIIF_MAX_WIDTH": "17",
            "TILER_IIIF_MAX_HEIGHT": "18", "TILER_IIIF_MAX_AREA": "19", "TILER_RENDER_MEMORY_MB": "20",
            "TILER_RENDER_WAIT": "0.5", "TILER_RESCAN_INTERVAL": "30", "TILER_BASE_URL": "https://example.org/t",
            "TILER_TRUST_PROXY": "1", "TILER_ACCESS_LOG": "on", "TILER_LOG_FORMAT": "json", "TILER_METRICS_PORT": "9100",
            "TILER_ACCESS": "/etc/tiler/access.json", "TILER_TOKEN_CACHE": "100",
        ]
        #expect(Set(Setting.allCases.compactMap(\.variable)).union(["TILER_ROOT"]) == Set(environment.keys))

        var expected = ServerConfiguration(root: "/srv/pyramids")
        var sources = ServerConfiguration.SourceSettings(directory: "/srv/images")
        sources.format = .webp
        sources.quality = 70
        sources.pixelCacheBytes = 3 << 20
        sources.spillBytes = 21 << 20
        sources.maxPixels = 1000
        sources.allowVector = true
        sources.keep = true
        expected.sources = sources
        expected.storageTimeout = 2.5
        expected.http.storageThreads = 3
        expected.http.maximumQueuedStorageReads = 4
        expected.directoryCacheEntries = 5000
        expected.http.host = "::1"
        expected.http.port = 1234
        expected.http.threads = 3
        expected.http.blockingThreads = 5
        expected.http.renderThreads = 6
        expected.http.maximumQueuedReads = 7
        expected.http.maximumQueuedRenders = 8  // set: not raised for the sources
        expected.cacheBytes = 9 << 20
        expected.openTiles = 10
        expected.cacheControl = ""  // empty is a value here: no Cache-Control
        expected.http.corsAllowOrigin = "https://x.example"
        expected.http.maximumConnections = 11
        expected.http.idleTimeout = 12
        expected.http.requestHeadTimeout = 13
        expected.http.writeTimeout = 14
        expected.http.shutdownGracePeriod = 0
        expected.http.maximumRequestLineBytes = 1000
        expected.http.maximumHeaderBytes = 2000
        expected.http.maximumHeaderCount = 15
        expected.maximumVisibleTiles = 16
        expected.viewerMaxZoomPercent = 400
        expected.frameAncestors = "'self' https://blog.example.org"
        expected.iiifLimits = IIIFLimits(maxWidth: 17, maxHeight: 18, maxArea: 19)
        expected.renderMemoryBytes = 20 << 20
        expected.renderWait = 0.5
        expected.rescanInterval = 30
        expected.baseURL = try BaseURL(parsing: "https://example.org/t")
        expected.trustProxy = true
        expected.accessLog = true
        expected.logFormat = .json
        expected.metricsPort = 9100
        expected.accessPolicy = "/etc/tiler/access.json"
        expected.tokenCacheEntries = 100
        #expect(try ServerConfiguration(environment: environment) == expected)
    }

    /// A flag wins over its variable; an empty CORS variable turns CORS off; a bucket ROOT
    /// scans every 10 s; sources lengthen the render queue unless it is set.
    @Test func flagsWinAndDependentDefaults() throws {
        let c = try ServerConfiguration(
            flags: [.port: "0", .cacheControl: "no-cache", .sources: "/srv/images"],
            environment: [
                "TILER_PORT": "not-a-port", "TILER_CACHE_CONTROL": "max-age=1",
                "TILER_CORS_ORIGIN": "",
            ])
        #expect(c.http.port == 0 && c.cacheControl == "no-cache" && c.http.corsAllowOrigin == nil)
        #expect(c.http.maximumQueuedRenders == ServerConfiguration.sourcesQueuedRenders)
        let bucket = try ServerConfiguration(root: "s3://tiles/p", environment: Self.credentials)
        #expect(bucket.rescanInterval == ServerConfiguration.bucketRescanInterval && bucket.s3 != nil)
        // A variable of a sources setting without sources is checked, and otherwise unused.
        #expect(try ServerConfiguration(environment: ["TILER_SOURCES_FORMAT": "jpeg"]).sources == nil)
    }

    static let credentials = ["AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"]

    /// Values that cannot be used are refused, naming the flag or variable and saying why.
    @Test(
        arguments: [
            ([:], ["TILER_PORT": "not-a-port"], "TILER_PORT='not-a-port' is not an integer"),
            ([.port: "65536"], [:], "--port must be 0...65535, not 65536"),
            ([:], ["TILER_IDLE_TIMEOUT": "1e16"], "TILER_IDLE_TIMEOUT must be a number of seconds from 0.001 to 86400, not 1e16"),
            ([:], ["TILER_HEADER_TIMEOUT": "nan"], "TILER_HEADER_TIMEOUT must be a number of seconds"),
            ([:], ["TILER_RENDER_WAIT": "soon"], "TILER_RENDER_WAIT='soon' is not a number"),
            ([:], ["TILER_CACHE_MB": "35184372088832"], "TILER_CACHE_MB must be 0...1048576, not 35184372088832"),
            ([:], ["TILER_MAX_CONNECTIONS": "0"], "TILER_MAX_CONNECTIONS must be 1...1048576, not 0"),
            ([:], ["TILER_HOST": "example.org"], "TILER_HOST='example.org' is not an IPv4 or IPv6 address"),
            ([:], ["TILER_CACHE_CONTROL": "max-age=1\r\nSet-Cookie: a=b"], "TILER_CACHE_CONTROL holds a control character"),
            ([.corsOrigin: "*\n"], [:], "--cors-origin holds a control character"),
            ([.frameAncestors: "*; script-src *"], [:], "--frame-ancestors='*; script-src *' is not a CSP source list"),
            ([:], ["TILER_FRAME_ANCESTORS": " "], "TILER_FRAME_ANCESTORS=' ' is not a CSP source list"),
            ([:], ["TILER_ACCESS_LOG": "sometimes"], "TILER_ACCESS_LOG='sometimes' is neither on (1, true, yes, on) nor off"),
            ([:], ["TILER_SOURCES": "/s", "TILER_SOURCES_FORMAT": "gif"], "TILER_SOURCES_FORMAT='gif' is not auto, png, jpeg or webp"),
            ([:], ["TILER_SOURCES_FORMAT": "gif"], "TILER_SOURCES_FORMAT='gif' is not auto, png, jpeg or webp"),
            (
                [:], ["TILER_SOURCES": "/s", "TILER_SOURCES_FORMAT": "png", "TILER_SOURCES_QUALITY": "80"],
                "TILER_SOURCES_QUALITY applies to --sources-format auto, jpeg or webp"
            ),
            ([.sourcesQuality: "101", .sourcesFormat: "jpeg", .sources: "/s"], [:], "--sources-quality must be 1...100, not 101"),
            ([.keep: "1"], [:], "--keep applies with --sources DIR only"),
            ([.s3Endpoint: "http://minio:9000"], [:], "--s3-endpoint applies to an s3://BUCKET/PREFIX ROOT only"),
            ([:], ["TILER_BASE_URL": "ftp://example.org/t"], "TILER_BASE_URL: "),
            ([:], ["TILER_ROOT": "s3://"], "ROOT: "),
        ] as [([Setting: String], [String: String], String)])
    func badValuesAreRefused(flags: [Setting: String], environment: [String: String], message: String) {
        #expect {
            try ServerConfiguration(flags: flags, environment: environment)
        } throws: { error in
            "\(error)".hasPrefix(message)
        }
    }

    /// A configuration made in code is held to the same rules by `validate()`.
    @Test func validateRefusesAHeaderValueWithALineBreak() {
        var c = ServerConfiguration(root: "/srv")
        c.cacheControl = "max-age=1\r\nSet-Cookie: a=b"
        #expect(throws: HTTPConfiguration.InvalidSetting.self) { try c.validate() }
    }

    /// `--keep` writes folders into ROOT, so a bucket ROOT refuses it.
    @Test func keepNeedsAFolderRoot() {
        let environment = Self.credentials.merging(["TILER_SOURCES": "/s", "TILER_KEEP": "1"]) { $1 }
        #expect {
            try ServerConfiguration(root: "s3://tiles/p", environment: environment)
        } throws: { error in
            "\(error)".hasPrefix("TILER_KEEP writes pyramid folders into ROOT, which must then be a folder, not s3://tiles/p")
        }
    }

    /// Each setting's help says what it is, names its variable and gives the default the
    /// configuration has (made from it, not written twice).
    @Test(arguments: Setting.allCases) func helpNamesTheVariableAndTheDefault(_ setting: Setting) {
        if let variable = setting.variable { #expect(setting.help.contains("env \(variable)")) }
        #expect(setting.help.contains("default: \(setting.defaultDescription)"))
        #expect(!setting.defaultDescription.isEmpty)
    }

    @Test func numericDefaultsAreTheConfigurations() {
        let d = ServerConfiguration(root: DefaultRoot.folder)
        #expect(Setting.idleTimeout.defaultDescription == "\(Int(d.http.idleTimeout))")
        #expect(Setting.cacheMB.defaultDescription == "\(d.cacheBytes >> 20)")
        #expect(Setting.openTiles.defaultDescription == "\(d.openTiles)")
        #expect(Setting.port.defaultDescription == "\(d.http.port)")
        #expect(Setting.renderWait.defaultDescription == "\(Int(d.renderWait))")
    }

    /// The README's table of serve settings has a row for every setting, with its
    /// variable, and the same default where that is a number; every row there naming a
    /// `TILER_*` variable is a setting that reads it.
    @Test(arguments: Setting.allCases) func theReadmeHasARow(_ setting: Setting) throws {
        let section = try ReadmeSection("## Serving")
        let numeric = Int(setting.defaultDescription) != nil
        let problems = section.problems(
            flag: setting.flag, variable: setting.variable, defaultMentions: numeric ? ["`\(setting.defaultDescription)`"] : [])
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test func everyVariableTheReadmeNamesIsASetting() throws {
        for (flag, variables) in try ReadmeSection("## Serving").variablesByFlag {
            let setting = Setting.allCases.first { $0.flag == flag }
            #expect(setting?.variable.map { variables == [$0] } == true, "\(flag) names \(variables)")
        }
    }
}
