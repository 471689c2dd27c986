import Foundation
import ObjectStorage
import TilerCore
import TilerHTTP
import TilerImaging
import TilerStorage

/// Everything `tiler serve` can be told, with defaults: where the pyramids are, the HTTP
/// limits (`http`), caching and the API's own limits.
public struct ServerConfiguration: Sendable, Hashable {
    /// The folder holding the pyramids, as folders (`ROOT/ID/pyramid.json`) and archives
    /// (`ROOT/ID.pmtiles`); or `s3://BUCKET/PREFIX`, archives in a bucket
    /// (`PREFIX/ID.pmtiles`).
    public var root: String
    /// How to reach the bucket of an `s3://` root (credentials, endpoint, per-request
    /// bounds); nil reads them from the environment (`AWS_*`, `TILER_S3_*`).
    public var s3: S3Configuration?
    /// Seconds a request that needs object storage may wait for it, from the moment the
    /// server takes it (the wait for a storage thread included): past it the answer is
    /// 504 (the storage did not answer in time) or 503 (no thread was free in time).
    /// Every storage request and retry is cut to what is left. Default 10.
    public var storageTimeout: Double = 10
    /// Entries (24 bytes each) of archive directories, roots and leaves, kept in memory
    /// over all archives: all the memory directories take, besides one being read per
    /// read under way. Also the most one directory may hold: an archive with a larger root
    /// or leaf is refused as damaged. Default 262,144 (about 6 MiB).
    public var directoryCacheEntries = DirectoryCache.defaultCapacity
    /// Sockets, threads, request limits, timeouts, CORS.
    public var http = HTTPConfiguration()
    /// `Cache-Control` on tiles, thumbnails, manifests and visible-tile answers; empty
    /// sends none. Default `public, max-age=86400`.
    public var cacheControl = "public, max-age=86400"
    /// Bytes of tiles, thumbnails and manifest documents kept in memory (LRU). Default 256 MiB.
    public var cacheBytes = 256 << 20
    /// Files larger than this are served from disk every time, never cached. Default 1 MiB.
    public var maximumCachedFileBytes = 1 << 20
    /// Tile files of folder pyramids kept open and sent with `sendfile` (`OpenTiles`);
    /// 0 turns it off. At most what the file limit leaves beside the connection cap
    /// (`openTileLimit(fileLimit:)`). Default 8192.
    public var openTiles = 8192
    /// Seconds between scans of ROOT by a background thread, which notice pyramids cut,
    /// re-cut, replaced or deleted while the server runs (in a folder, a pyramid asked
    /// for by id is also found at once, without waiting for a scan). For an `s3://` root
    /// each scan is a listing (one ListObjectsV2 per 1,000 keys); `tiler serve` then
    /// defaults to 10. Default 1.
    public var rescanInterval: Double = 1
    /// Bytes that drawn images (IIIF regions, small DeepZoom levels) may hold at once,
    /// estimated before each drawing starts; past it drawings wait, then get 503; one
    /// larger than all of it gets 400. Default `defaultRenderMemoryBytes`.
    public var renderMemoryBytes = ServerConfiguration.defaultRenderMemoryBytes
    /// Seconds a drawing may wait for room in `renderMemoryBytes` before its 503.
    /// Default 2.
    public var renderWait: Double = 2
    /// Most tiles one `/images/ID/visible` answer may list; more is 400. Default 4096.
    public var maximumVisibleTiles = PyramidGeometry.defaultMaximumVisibleTiles
    /// Largest `limit` accepted by `/images`. Default 1000; the default limit is 50.
    public var maximumListLimit = 1000
    /// The viewer's deepest zoom, in percent of the image's own pixels (`--viewer-max-zoom`):
    /// past about twice a photo only blurs. Default 200.
    public var viewerMaxZoomPercent = 200
    /// Who may show the embed pages (`/embed/strip`, `/embed/coverflow`) in a frame: the
    /// source list of their `Content-Security-Policy: frame-ancestors` (`--frame-ancestors`),
    /// such as `https://blog.example.org` or `'self'`, or `'none'`. Default `*`, any site.
    public var frameAncestors = "*"
    /// The largest IIIF output (`maxWidth`, `maxHeight`, `maxArea` in info.json).
    public var iiifLimits = IIIFLimits.default
    /// The public address every URL the server writes starts with (`--base-url`), for a
    /// server behind a reverse proxy, possibly under a path prefix. Default nil: links in
    /// the image API are root-relative and IIIF ids start with `http://` and the `Host`.
    public var baseURL: BaseURL?
    /// Whether `Forwarded`, `X-Forwarded-Proto` and `X-Forwarded-Host` are believed when
    /// building absolute URLs (`--trust-proxy`); only without `baseURL`. Default false.
    public var trustProxy = false
    /// One line per request on stderr (`--access-log`): `tiler serve` gives the server an
    /// access logger. Default false.
    public var accessLog = false
    /// How `tiler serve` writes its log lines (`--log-format`).
    public var logFormat = LogFormat.text
    /// The port of the metrics listener (`--metrics-port`), or nil for none.
    public var metricsPort: Int?
    /// The access policy file (`--access`): which images are private and the keys whose
    /// tokens open them; nil (the default) for every image public.
    public var accessPolicy: String?
    /// Verified tokens remembered (`--token-cache`), so that a tile request with a token
    /// seen before pays a lookup, not a signature check.
    public var tokenCacheEntries = 10_000

    public enum LogFormat: String, Sendable, CaseIterable {
        /// One readable line each (swift-log's stream format).
        case text
        /// One JSON object per line.
        case json
    }

    /// Image files served on the fly beside ROOT's pyramids (`--sources DIR`); nil for none.
    public var sources: SourceSettings?

    public init(root: String) {
        self.root = root
    }

    /// How `tiler serve --sources DIR` serves the image files in DIR: each as the pyramid
    /// `tiler cut` would make of it with these settings (`format`, `quality`, and the
    /// cut's input limits and defaults).
    public struct SourceSettings: Sendable, Hashable {
        /// The folder of image files.
        public var directory: String
        /// The tiles' format, as `tiler cut --format`; nil for `auto`, the default as the
        /// cut's: JPEG for a file without alpha, PNG for one with it.
        public var format: TileFormat?
        /// JPEG or WebP quality; nil for the format's default (as the cut).
        public var quality: Int?
        /// Files with more pixels are refused before any pixel is decoded (`--max-pixels`).
        public var maxPixels = CutOptions.defaultMaxPixels
        /// Accept SVG, PDF and ImageMagick files (refused by default, as by the cut).
        public var allowVector = false
        /// Apply the EXIF orientation (as the cut, by default).
        public var autorotate = true
        /// Convert an embedded ICC profile to sRGB (as the cut, by default).
        public var convertProfile = true
        /// Bytes of tile pixels kept to make lower levels from (over all sources). Default 128 MiB.
        public var pixelCacheBytes = 128 << 20
        /// Write each tile made into ROOT/ID/ (a partial pyramid folder), atomically.
        public var keep = false
        /// Bytes of temporary disk that sources without random access may take, decoded
        /// whole by libvips before their regions are read (`SpillBudget`). Default 2 GiB.
        public var spillBytes = 2048 << 20

        public init(directory: String) {
            var directory = directory
            while directory.count > 1 && directory.hasSuffix("/") { directory.removeLast() }
            self.directory = directory
        }

        /// The cut's options that make the same pyramid.
        public var cutOptions: CutOptions {
            CutOptions(
                format: format, quality: quality, maxPixels: maxPixels, allowVector: allowVector,
                autorotate: autorotate, convertProfile: convertProfile)
        }
    }

    /// The accepted range of each numeric setting of this level (the HTTP ones are in
    /// `HTTPConfiguration.Range`).
    public enum Range {
        /// MiB of cache, as `--cache-mb` gives it: up to 1 TiB.
        public static let cacheMB = 0...(1 << 20)
        public static let visibleTiles = 1...1_000_000
        public static let listLimit = 1...1_000_000
        /// The viewer's deepest zoom, percent.
        public static let viewerMaxZoom = 100...6400
        /// IIIF output width or height, px.
        public static let iiifSide = 1...1_000_000
        /// IIIF output area, pixels.
        public static let iiifArea = 1...1_000_000_000_000
        /// Seconds between scans of ROOT.
        public static let rescanInterval: ClosedRange<Double> = 0.01...86_400
        /// MiB of render memory, as `--render-memory-mb` gives it: 1 MiB to 1 TiB.
        public static let renderMemoryMB = 1...(1 << 20)
        /// Seconds a drawing may wait for render memory.
        public static let renderWait: ClosedRange<Double> = 0...3600
        /// Seconds a request may wait for object storage.
        public static let storageTimeout: ClosedRange<Double> = 0.01...3600
        /// Directory entries kept, over all archives: at least one leaf as tiler writes
        /// them (4,096 entries), since no directory larger than this is read.
        public static let directoryCacheEntries = 4096...(1 << 28)
        /// MiB of source tile pixels kept, as `--sources-cache-mb` gives it.
        public static let sourcesCacheMB = 0...(1 << 20)
        /// MiB of temporary disk for decoding sources, as `--sources-spill-mb` gives it:
        /// 1 MiB to 1 PiB.
        public static let sourcesSpillMB = 1...(1 << 30)
        /// Tile files kept open.
        public static let openTiles = 0...(1 << 20)
        /// Verified tokens remembered: each takes its bytes (at most 4 KiB) and its globs.
        public static let tokenCache = 16...(1 << 20)
    }

    /// Throws for the first setting outside its range, here or in `http`.
    public func validate() throws(HTTPConfiguration.InvalidSetting) {
        func check<T: Comparable>(_ name: String, _ value: T, _ range: ClosedRange<T>) throws(HTTPConfiguration.InvalidSetting) {
            guard range.contains(value) else {
                throw .init(setting: name, value: "\(value)", range: "\(range.lowerBound)...\(range.upperBound)")
            }
        }
        try http.validate()
        try check("cacheBytes", cacheBytes, 0...(Range.cacheMB.upperBound << 20))
        try check("maximumCachedFileBytes", maximumCachedFileBytes, 0...(1 << 30))
        try check("rescanInterval", rescanInterval, Range.rescanInterval)
        try check("renderMemoryBytes", renderMemoryBytes, (Range.renderMemoryMB.lowerBound << 20)...(Range.renderMemoryMB.upperBound << 20))
        try check("renderWait", renderWait, Range.renderWait)
        try check("storageTimeout", storageTimeout, Range.storageTimeout)
        try check("directoryCacheEntries", directoryCacheEntries, Range.directoryCacheEntries)
        if let sources {
            try check("sources.pixelCacheBytes", sources.pixelCacheBytes, 0...(Range.sourcesCacheMB.upperBound << 20))
            try check("sources.spillBytes", sources.spillBytes, 1...(Range.sourcesSpillMB.upperBound << 20))
            try check("sources.maxPixels", sources.maxPixels, TileSettings.maxPixelsRange)
        }
        try check("openTiles", openTiles, Range.openTiles)
        try check("tokenCacheEntries", tokenCacheEntries, Range.tokenCache)
        try check("maximumVisibleTiles", maximumVisibleTiles, Range.visibleTiles)
        try check("maximumListLimit", maximumListLimit, Range.listLimit)
        try check("viewerMaxZoomPercent", viewerMaxZoomPercent, Range.viewerMaxZoom)
        try check("iiifLimits.maxWidth", iiifLimits.maxWidth, Range.iiifSide)
        try check("iiifLimits.maxHeight", iiifLimits.maxHeight, Range.iiifSide)
        try check("iiifLimits.maxArea", iiifLimits.maxArea, Range.iiifArea)
        guard Self.isSourceList(frameAncestors) else {
            throw .init(
                setting: "frameAncestors", value: frameAncestors.debugDescription,
                range: "a CSP source list: sources (*, 'self', 'none', https://host) separated by spaces")
        }
        guard HTTPConfiguration.isHeaderValue(cacheControl) else {
            throw .init(
                setting: "cacheControl", value: cacheControl.debugDescription,
                range: "header values (no control character but tab)")
        }
    }

    /// Whether `text` can be the source list of a CSP directive: printable ASCII sources
    /// separated by spaces, at least one, none holding the `;` or `,` that would end the
    /// directive or the policy.
    static func isSourceList(_ text: String) -> Bool {
        let printable = { (b: UInt8) in b >= 0x20 && b < 0x7F && b != UInt8(ascii: ";") && b != UInt8(ascii: ",") }
        return text.utf8.count <= 4096 && text.utf8.allSatisfy(printable) && !text.split(separator: " ").isEmpty
    }

    /// The tile files kept open under the file limit `fileLimit`: `openTiles`, but never
    /// more than what is left once every connection the cap allows has its descriptor
    /// (and 256 spare for listeners, epoll, pyramids being read, logs).
    public func openTileLimit(fileLimit: Int) -> Int {
        max(0, min(openTiles, fileLimit - http.connectionCap(fileLimit: fileLimit) - 256))
    }

    /// Half the memory the process may use (its cgroup's limit in a container, else the
    /// machine's memory), and at most 2 GiB: room for the largest drawing the default IIIF
    /// limits allow (a 25-megapixel WebP rotated by 45°, about 1.5 GB) on a large machine,
    /// and never more than half of a small container.
    public static let defaultRenderMemoryBytes: Int = {
        var available = Int(clamping: ProcessInfo.processInfo.physicalMemory)
        for file in ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"] {
            if let text = try? String(contentsOfFile: file, encoding: .utf8),
                let limit = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), limit > 0
            {
                available = min(available, limit)
            }
        }
        return min(renderMemoryCeiling, max(64 << 20, available / 2))
    }()
    /// The most `defaultRenderMemoryBytes` is, however large the machine.
    public static let renderMemoryCeiling = 2 << 30
}
