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
}
