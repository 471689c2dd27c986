import TilerSystem

/// Every limit and knob of the HTTP layer, with its default. `tiler serve` exposes the
/// useful ones as flags and `TILER_*` environment variables.
public struct HTTPConfiguration: Sendable, Hashable {
    /// The address to listen on: an IPv4 or IPv6 literal (`localhost` means 127.0.0.1).
    /// Default `127.0.0.1`; containers pass `0.0.0.0`.
    public var host: String = "127.0.0.1"
    /// The TCP port; 0 picks a free one (read it back from `HTTPServer.port`). Default 8080.
    public var port: Int = HTTPConfiguration.defaultPort
    /// Event-loop threads, each with its own `SO_REUSEPORT` listening socket. Default:
    /// one per core.
    public var threads: Int = HTTPConfiguration.coreCount
    /// Threads that read tile files that are not in the page cache, so that no event loop
    /// waits for the disk (`BlockingKind.read`). Default: four per core, at least 4 (disk
    /// reads mostly wait).
    public var blockingThreads: Int = max(4, HTTPConfiguration.blockingThreadsPerCore * HTTPConfiguration.coreCount)
    /// `blockingThreads` per core, by default.
    public static let blockingThreadsPerCore = 4
    /// Threads that draw images on demand (IIIF regions, small DeepZoom levels;
    /// `BlockingKind.render`). They are separate from the read threads, so a tile read
    /// never waits behind a drawing. Default: one per core.
    public var renderThreads: Int = HTTPConfiguration.coreCount
    /// Reads waiting for a read thread; past it a read that would wait for the disk is
    /// answered 503 with `Retry-After`. Default 1024.
    public var maximumQueuedReads: Int = 1024
    /// Drawings waiting for a render thread; past it 503 with `Retry-After`. Default 32.
    public var maximumQueuedRenders: Int = 32
    /// Threads that read from object storage (`BlockingKind.storage`), apart from the
    /// disk-read and render threads: at most this many storage requests are under way at
    /// once, and a slow or hung store holds no other thread. Default 16 (they wait on the
    /// network, not on a core).
    public var storageThreads: Int = 16
    /// Reads waiting for a storage thread; past it 503 with `Retry-After`. Default 256.
    public var maximumQueuedStorageReads: Int = 256
    /// `listen(2)` backlog per loop. Default 1024.
    public var backlog: Int = 1024
    /// Whether an event loop offers its core to another ready thread (`sched_yield`)
    /// after each batch of events it has handled. Default on. A loop that always has
    /// work is otherwise preempted only when its time slice ends, and then every
    /// connection it owns waits for its next turn, milliseconds on a busy machine; the
    /// clients (or the pool threads) that share its cores wait the same way for it. With
    /// the yield the threads take turns once per batch. On the benchmark's two shared
    /// cores this took the 99th percentile of JPEG tile answers from 4.7 to 1.3 ms at
    /// 14 % more answers a second (`docs/benchmarks.md`). With no other thread ready the
    /// call returns at once (0.26–0.40 µs per batch, timed here in a loop of a million).
    public var yieldsAfterEachBatch = true

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
    /// Seconds given to the requests in flight after SIGTERM/SIGINT or `stop()`: each is
    /// finished, or (still waiting for the pool, or its head still arriving) answered 503
    /// with `Connection: close` when the period ends. Default 10.
    public var shutdownGracePeriod: Double = 10

    /// Most open client connections across all loops; past it a connection gets 503 and
    /// is closed. nil (the default) means min(`defaultConnectionCeiling`, the file limit −
    /// `reservedDescriptors`) after raising the soft `RLIMIT_NOFILE` to the hard limit.
    public var maximumConnections: Int?
    /// The most connections allowed by default, whatever the file limit.
    public static let defaultConnectionCeiling = 8192
    /// Descriptors the default connection cap leaves for everything but connections.
    public static let reservedDescriptors = 64

    /// The connection cap in force under the file limit `fileLimit` (see
    /// `maximumConnections`).
    public func connectionCap(fileLimit: Int) -> Int {
        maximumConnections ?? max(16, min(Self.defaultConnectionCeiling, fileLimit - Self.reservedDescriptors))
    }

    /// The soft `RLIMIT_NOFILE` after raising it to the hard limit (at most 2^20), as the
    /// server does when it starts; 1024 if it cannot be read.
    public static func raisedFileLimit() -> Int {
        (try? ProcessLimits.raiseFileLimit()) ?? 1024  // getrlimit cannot fail for RLIMIT_NOFILE
    }
    /// Responses queued on one connection (pipelining) before the server stops reading
    /// from it until the client catches up. Default 1 MiB.
    public var maximumQueuedOutputBytes: Int = 1 << 20

    /// `Access-Control-Allow-Origin` on every response and the OPTIONS answer; nil sends
    /// no CORS headers. Default `*`.
    public var corsAllowOrigin: String? = "*"

    /// Whether each connection keeps a `CredentialMemo` for the handler (`tiler serve`
    /// with `--access`): one small object per connection, and the handler's notes.
    public var credentialMemos = false

    /// `port` unless set: what `tiler serve` listens on and `tiler healthcheck` asks.
    public static let defaultPort = 8080

    public init() {}

    /// The parser limits these settings imply.
    public var parserLimits: HTTPRequestParser.Limits {
        .init(
            maximumRequestLineBytes: maximumRequestLineBytes, maximumHeaderBytes: maximumHeaderBytes,
            maximumHeaderCount: maximumHeaderCount, maximumBodyBytes: maximumBodyBytes,
            credentialMemo: credentialMemos)
    }

    /// The accepted range of every numeric setting; `validate()` checks them. Each is far
    /// past any sensible value but small enough that no arithmetic on it overflows.
    public enum Range {
        /// A port to listen on: 0 asks for any free one.
        public static let port = 0...65535
        /// A port to connect to (`tiler healthcheck`): `port` without 0, which names no
        /// server's port.
        public static let connectablePort = (port.lowerBound + 1)...port.upperBound
        public static let threads = 1...256
        public static let blockingThreads = 1...1024
        public static let renderThreads = 1...256
        public static let queueLength = 1...1_000_000
        public static let backlog = 1...65535
        public static let requestLineBytes = 64...(1 << 20)
        public static let headerBytes = 256...(1 << 20)
        public static let headerCount = 1...10_000
        public static let bodyBytes = 0...(1 << 30)
        /// Seconds, for the idle, request-head and write timeouts: 1 ms to one day.
        public static let timeout: ClosedRange<Double> = 0.001...86_400
        /// Seconds, for the shutdown grace period: none to one hour.
        public static let gracePeriod: ClosedRange<Double> = 0...3_600
        public static let connections = 1...(1 << 20)
        public static let queuedOutputBytes = 4096...(1 << 30)
    }

    /// A setting outside its range: which one, its value and the range.
    public struct InvalidSetting: Error, Sendable, Hashable, CustomStringConvertible {
        /// The property's name, e.g. `idleTimeout`.
        public let setting: String
        public let value: String
        public let range: String
        public var description: String { "\(setting) \(value) is outside \(range)" }

        public init(setting: String, value: String, range: String) {
            self.setting = setting
            self.value = value
            self.range = range
        }
    }

    /// Throws for the first setting outside its `Range`.
    public func validate() throws(InvalidSetting) {
        func check<T: Comparable>(_ name: String, _ value: T, _ range: ClosedRange<T>) throws(InvalidSetting) {
            guard range.contains(value) else {
                throw InvalidSetting(setting: name, value: "\(value)", range: "\(range.lowerBound)...\(range.upperBound)")
            }
        }
        guard Self.isListenableHost(host) else {
            throw InvalidSetting(setting: "host", value: host, range: "IPv4 and IPv6 addresses")
        }
        if let corsAllowOrigin, !Self.isHeaderValue(corsAllowOrigin) {
            throw InvalidSetting(
                setting: "corsAllowOrigin", value: corsAllowOrigin.debugDescription,
                range: "header values (no control character but tab)")
        }
        try check("port", port, Range.port)
        try check("threads", threads, Range.threads)
        try check("blockingThreads", blockingThreads, Range.blockingThreads)
        try check("renderThreads", renderThreads, Range.renderThreads)
        try check("maximumQueuedReads", maximumQueuedReads, Range.queueLength)
        try check("maximumQueuedRenders", maximumQueuedRenders, Range.queueLength)
        try check("storageThreads", storageThreads, Range.blockingThreads)
        try check("maximumQueuedStorageReads", maximumQueuedStorageReads, Range.queueLength)
        try check("backlog", backlog, Range.backlog)
        try check("maximumRequestLineBytes", maximumRequestLineBytes, Range.requestLineBytes)
        try check("maximumHeaderBytes", maximumHeaderBytes, Range.headerBytes)
        try check("maximumHeaderCount", maximumHeaderCount, Range.headerCount)
        try check("maximumBodyBytes", maximumBodyBytes, Range.bodyBytes)
        // NaN is outside every range (comparisons with it are false).
        try check("idleTimeout", idleTimeout, Range.timeout)
        try check("requestHeadTimeout", requestHeadTimeout, Range.timeout)
        try check("writeTimeout", writeTimeout, Range.timeout)
        try check("shutdownGracePeriod", shutdownGracePeriod, Range.gracePeriod)
        if let maximumConnections { try check("maximumConnections", maximumConnections, Range.connections) }
        try check("maximumQueuedOutputBytes", maximumQueuedOutputBytes, Range.queuedOutputBytes)
    }

    /// The most milliseconds `milliseconds(_:)` returns: about 73 million years, and far
    /// enough from `Int64.max` that adding it to a clock reading cannot overflow.
    static let maximumMilliseconds: Int64 = 1 << 61

    /// `seconds` as milliseconds, saturating instead of trapping for values no range
    /// allows (an unvalidated configuration still never traps).
    static func milliseconds(_ seconds: Double) -> Int64 {
        guard seconds.isFinite else { return seconds > 0 ? maximumMilliseconds : 0 }
        return Int64(max(0, min(seconds * 1000, Double(maximumMilliseconds))))
    }

    /// Whether the server can listen on `host`: an IPv4 or IPv6 literal, or `localhost`.
    public static func isListenableHost(_ host: String) -> Bool {
        SocketAddress(literal: host == "localhost" ? "127.0.0.1" : host, port: 0) != nil
    }

    /// Whether `text` can be sent as a header's value: no control character but tab (a
    /// CR or LF would end the header and start another).
    public static func isHeaderValue(_ text: String) -> Bool {
        !text.utf8.contains { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }
    }

    /// The processors this process may run on: its CPU affinity (`sched_getaffinity`), so
    /// a server started under `taskset`, or in a container given some of the machine's
    /// cores (`--cpuset-cpus`), runs one loop per core it has, not per core the machine
    /// has. The online processors when the affinity cannot be read. Read once, when the
    /// first configuration is made (each of three defaults asked for it).
    public static let coreCount = ProcessLimits.allowedProcessors()
}

#if canImport(Glibc)
    import Glibc
#endif
