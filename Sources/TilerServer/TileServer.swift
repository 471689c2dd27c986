import Logging
import TilerHTTP

/// `tiler serve` as a library: the store, and the HTTP server with a router per loop.
public final class TileServer: Sendable {
    public let configuration: ServerConfiguration
    public let store: TileStore
    public let http: HTTPServer

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
        loadingFirst: Bool = true
    ) {
        self.configuration = configuration
        store = TileStore(configuration: configuration, log: log, loadingFirst: loadingFirst)
        let store = store
        let hints = Router.proxyHints(store: store)
        // A router per event loop: what a router keeps (`RecentPyramid`) is never shared
        // with another loop; the proxy hints are, so that each is logged once.
        http = HTTPServer(
            configuration: configuration.http, accessLog: accessLog, log: log,
            makeHandler: { Router(store: store, routes: nil, answersPlainTilesDirectly: true, proxyHints: hints) })
    }

    /// Binds and starts serving; returns at once.
    public func start() throws(SocketError) { try http.start() }
    /// The bound port.
    public var port: Int { http.port }
    /// Stops accepting and finishes in-flight responses; stops scanning ROOT.
    public func stop() {
        store.stopRescanning()
        http.stop()
    }
    /// Blocks until the server has stopped.
    public func wait() { http.wait() }
}
