import Logging
import TilerHTTP
import TilerSystem

/// `tiler serve` as a library: the store, the HTTP server with a router per loop, and
/// with `metricsPort` a second listener for `/metrics`.
public final class TileServer: Sendable {
    public let configuration: ServerConfiguration
    public let store: TileStore
    public let http: HTTPServer
    /// What `/metrics` shows, when `configuration.metricsPort` is set.
    public let metrics: ServerMetrics?
    /// The metrics listener: `GET /metrics` only, one event loop, on the API's host.
    public let metricsHTTP: HTTPServer?

    /// - Parameters:
    ///   - accessLog: one line per request, or nil for none.
    ///   - log: faults worth an operator's attention (unreadable pyramids, damaged tiles,
    ///     failed drawings), each logged once.
    ///   - loadingFirst: read ROOT before returning (the default, for tests and embedding),
    ///     or, false, read it in the background while the server already listens (`tiler
    ///     serve`: a bucket of thousands of archives, or one whose reads hang, never keeps
    ///     the port closed or SIGTERM waiting; see `TileStore.catalogIsLoading`).
    public init(
        configuration: ServerConfiguration, accessLog: Logger? = nil, log: Logger = Logger(label: "tiler"),
        loadingFirst: Bool = true, access: AccessControl? = nil
    ) {
        self.configuration = configuration
        let metrics = configuration.metricsPort == nil ? nil : ServerMetrics()
        self.metrics = metrics
        store = TileStore(
            configuration: configuration, log: log, loadingFirst: loadingFirst, metrics: metrics, access: access)
        let store = store
        let hints = Router.proxyHints(store: store)
        var serving = configuration.http
        // A connection's token judged once, not on each of its requests (`CredentialMemo`).
        serving.credentialMemos = access != nil
        // A router per event loop: what a router keeps (`RecentPyramid`) is never shared
        // with another loop; the proxy hints are, so that each is logged once.
        http = HTTPServer(
            configuration: serving, accessLog: accessLog, log: log, observer: metrics,
            makeHandler: { Router(store: store, routes: nil, answersPlainTilesDirectly: true, proxyHints: hints) })
        if let metrics, let port = configuration.metricsPort {
            var listener = HTTPConfiguration()
            listener.host = configuration.http.host
            listener.port = port
            listener.threads = 1
            listener.blockingThreads = 1
            listener.renderThreads = 1
            listener.storageThreads = 1
            listener.maximumConnections = 64
            listener.corsAllowOrigin = nil
            metricsHTTP = HTTPServer(configuration: listener, handler: MetricsHandler(metrics: metrics), log: log)
            let http = http
            metrics.addSource { m in
                m.gauge("tiler_connections_open").set(to: Double(http.openConnections))
                let render = http.laneStatistics(.render)
                m.gauge("tiler_renders_queued").set(to: Double(render.queued))
                m.gauge("tiler_renders_running").set(to: Double(render.running))
                m.setCounter("tiler_renders_total", [("outcome", "done")], render.finished)
                m.setCounter("tiler_renders_total", [("outcome", "refused")], render.refused)
                m.setCounter("tiler_renders_total", [("outcome", "dropped")], render.dropped)
                for lane in [BlockingKind.read, .storage] {
                    m.gauge("tiler_reads_queued", [("lane", lane == .read ? "read" : "storage")])
                        .set(to: Double(http.laneStatistics(lane).queued))
                }
                m.gauge("tiler_tile_cache_bytes").set(to: Double(store.cache.totalBytes))
                m.gauge("tiler_tile_cache_entries").set(to: Double(store.cache.count))
                for (layout, count) in store.imagesByLayout() {
                    m.gauge("tiler_images", [("layout", layout)]).set(to: Double(count))
                }
                m.gauge("tiler_storage_up").set(to: store.health.outage == nil ? 1 : 0)
                m.gauge("tiler_ready").set(to: store.readiness == nil ? 1 : 0)
            }
        } else {
            metricsHTTP = nil
        }
    }

    /// Binds and starts serving (and the metrics listener); returns at once.
    public func start() throws(SocketError) {
        try http.start()
        do throws(SocketError) {
            try metricsHTTP?.start()
        } catch {
            http.stop()
            http.wait()
            throw error
        }
    }
    /// The bound port.
    public var port: Int { http.port }
    /// The metrics listener's bound port, if there is one.
    public var metricsPort: Int? { metricsHTTP?.port }
    /// Stops accepting and finishes in-flight responses; stops scanning ROOT.
    public func stop() {
        store.stopRescanning()
        store.access?.stopWatching()
        http.stop()
        metricsHTTP?.stop()
    }
    /// Blocks until the server has stopped.
    public func wait() {
        http.wait()
        metricsHTTP?.wait()
    }
}

/// The metrics listener's one route: `GET /metrics`, written on the blocking pool (it
/// reads /proc), never cached.
struct MetricsHandler: HTTPHandler {
    let metrics: ServerMetrics

    func respond(to head: HTTPRequestHead) -> HTTPResponse {
        let path = head.target.prefix { $0 != UInt8(ascii: "?") }
        guard path.elementsEqual("/metrics".utf8) else {
            return .error(HTTPError(404, "this listener serves /metrics only"))
        }
        return .blocking(.read) { [metrics] in
            .bytes(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: metrics.scrape(), cacheControl: "no-store")
        }
    }
}
