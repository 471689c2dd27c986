/// Every limit and knob of the HTTP layer, with its default. `tiler serve` exposes the
/// useful ones as flags and `TILER_*` environment variables.
public struct HTTPConfiguration: Sendable, Hashable {
    /// The address to listen on: an IPv4 or IPv6 literal (`localhost` means 127.0.0.1).
    /// Default `127.0.0.1`; containers pass `0.0.0.0`.
    public var host: String = "127.0.0.1"
    /// The TCP port; 0 picks a free one (read it back from `HTTPServer.port`). Default 8080.
    public var port: Int = 8080
    /// Event-loop threads, each with its own `SO_REUSEPORT` listening socket. Default:
    /// one per core.
    public var threads: Int = HTTPConfiguration.coreCount
    /// Threads for work that may block, so that it never stalls an event loop: tile
    /// files that are not in the page cache (read from disk) and images drawn on demand
    /// (IIIF regions). Default: four per core, at least 4 (disk reads mostly wait).
    public var blockingThreads: Int = max(4, 4 * HTTPConfiguration.coreCount)
    /// `listen(2)` backlog per loop. Default 1024.
    public var backlog: Int = 1024

    /// Longest request line in bytes; longer gets 414 and the connection closes. Default 8 KiB.
    public var maximumRequestLineBytes: Int = 8192
    /// Largest header section in bytes; larger gets 431 and closes. Default 16 KiB.
    public var maximumHeaderBytes: Int = 16384
    /// Most header fields in one request; more gets 431 and closes. Default 100.
    public var maximumHeaderCount: Int = 100
    /// Largest request body accepted (and discarded); larger, or any chunked body, gets
    /// 413 and closes. Default 0: this server takes no bodies.
    public var maximumBodyBytes: Int = 0

    /// Seconds a keep-alive connection may sit without a request before it is closed.
    /// Default 60.
    public var idleTimeout: Double = 60
    /// Seconds a client may take to send a complete request head once it has started
    /// (slow clients, slowloris); past it the server answers 408 and closes. Default 10.
    public var requestHeadTimeout: Double = 10
    /// Seconds a response may wait for the client to read it without progress before the
    /// connection is closed. Default 30.
    public var writeTimeout: Double = 30
    /// Seconds given to in-flight requests after SIGTERM/SIGINT or `stop()`. Default 10.
    public var shutdownGracePeriod: Double = 10

    /// Most open client connections across all loops; past it a connection gets 503 and
    /// is closed. nil (the default) means min(8192, the file limit − 64) after raising the
    /// soft `RLIMIT_NOFILE` to the hard limit.
    public var maximumConnections: Int?
    /// Responses queued on one connection (pipelining) before the server stops reading
    /// from it until the client catches up. Default 1 MiB.
    public var maximumQueuedOutputBytes: Int = 1 << 20

    /// `Access-Control-Allow-Origin` on every response and the OPTIONS answer; nil sends
    /// no CORS headers. Default `*`.
    public var corsAllowOrigin: String? = "*"

    public init() {}

    /// The parser limits these settings imply.
    public var parserLimits: HTTPRequestParser.Limits {
        .init(maximumRequestLineBytes: maximumRequestLineBytes, maximumHeaderBytes: maximumHeaderBytes,
              maximumHeaderCount: maximumHeaderCount, maximumBodyBytes: maximumBodyBytes)
    }

    /// Online processors.
    public static var coreCount: Int {
        max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }
}

#if canImport(Glibc)
import Glibc
#endif
