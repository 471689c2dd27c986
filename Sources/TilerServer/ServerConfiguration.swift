import TilerCore
import TilerHTTP

/// Everything `tiler serve` can be told, with defaults: where the pyramids are, the HTTP
/// limits (`http`), caching and the API's own limits.
public struct ServerConfiguration: Sendable, Hashable {
    /// The folder holding one sub-folder per pyramid (`ROOT/ID/pyramid.json`).
    public var root: String
    /// Sockets, threads, request limits, timeouts, CORS.
    public var http = HTTPConfiguration()
    /// `Cache-Control` on tiles, thumbnails, manifests and visible-tile answers; empty
    /// sends none. Default `public, max-age=86400`.
    public var cacheControl = "public, max-age=86400"
    /// Bytes of tiles, thumbnails and manifest documents kept in memory (LRU). Default 256 MiB.
    public var cacheBytes = 256 << 20
    /// Files larger than this are served from disk every time, never cached. Default 1 MiB.
    public var maximumCachedFileBytes = 1 << 20
    /// Seconds a loaded `pyramid.json` is trusted before it is stat'ed again to notice a
    /// re-cut or a deletion. Default 1.
    public var manifestCheckInterval: Double = 1
    /// Most tiles one `/images/ID/visible` answer may list; more is 400. Default 4096.
    public var maximumVisibleTiles = PyramidGeometry.defaultMaximumVisibleTiles
    /// Largest `limit` accepted by `/images`. Default 1000; the default limit is 50.
    public var maximumListLimit = 1000
    /// The largest IIIF output (`maxWidth`, `maxHeight`, `maxArea` in info.json).
    public var iiifLimits = IIIFLimits.default

    public init(root: String) {
        self.root = root
    }

    /// The accepted range of each numeric setting of this level (the HTTP ones are in
    /// `HTTPConfiguration.Range`).
    public enum Range {
        /// MiB of cache, as `--cache-mb` gives it: up to 1 TiB.
        public static let cacheMB = 0...(1 << 20)
        public static let visibleTiles = 1...1_000_000
        public static let listLimit = 1...1_000_000
        /// IIIF output width or height, px.
        public static let iiifSide = 1...1_000_000
        /// IIIF output area, pixels.
        public static let iiifArea = 1...1_000_000_000_000
        public static let manifestCheckInterval: ClosedRange<Double> = 0...86_400
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
        try check("manifestCheckInterval", manifestCheckInterval, Range.manifestCheckInterval)
        try check("maximumVisibleTiles", maximumVisibleTiles, Range.visibleTiles)
        try check("maximumListLimit", maximumListLimit, Range.listLimit)
        try check("iiifLimits.maxWidth", iiifLimits.maxWidth, Range.iiifSide)
        try check("iiifLimits.maxHeight", iiifLimits.maxHeight, Range.iiifSide)
        try check("iiifLimits.maxArea", iiifLimits.maxArea, Range.iiifArea)
    }
}
