import Dispatch
import Foundation
import Logging
import Synchronization
import TilerSystem

/// Answers requests. Called on event-loop threads, concurrently, so it must be
/// `Sendable`; it must not block for long (a slow handler stalls its whole loop).
public protocol HTTPHandler: Sendable {
    /// The response to a GET or HEAD (the server answers OPTIONS and other methods itself).
    func respond(to head: HTTPRequestHead) -> HTTPResponse
}

/// An HTTP/1.1 server: one epoll loop per thread, each with its own `SO_REUSEPORT`
/// listening socket, keep-alive, pipelining, and every limit of `HTTPConfiguration`.
///
/// ```swift
/// let server = HTTPServer(configuration: config, handler: router)
/// try server.start()          // binds and starts the loops; returns at once
/// print(server.port)
/// server.stop()               // stop accepting, finish in-flight responses
/// server.wait()               // until every loop has exited
/// ```
public final class HTTPServer: Sendable {
    public let configuration: HTTPConfiguration
    private let makeHandler: @Sendable () -> any HTTPHandler
    private let accessLog: Logger?
    private let observer: (any HTTPObserver)?
    private let log: Logger
    private let clock: any ServerClock

    /// Makes a loop's epoll instance and eventfd for a listening socket; tests replace it
    /// to make one fail.
    typealias PrepareLoop = @Sendable (Socket) throws(SystemCallError) -> EventLoop.Resources

    private struct State {
        var mailboxes: [EventLoop.Mailbox] = []
        var shared: EventLoop.Shared?
        /// When the grace period given by the first `stop()` ends.
        var stopDeadline: DispatchTime?
        /// The port actually bound.
        var port = 0
        /// `SO_SNDBUF` for accepted sockets; nil leaves the kernel's (tests make it tiny to
        /// force partial writes).
        var sendBufferBytes: Int?
        var prepareLoop: PrepareLoop = { listener throws(SystemCallError) in try EventLoop.Resources.make(listener: listener) }
    }

    /// `start()`, `stop()` and `wait()` may be called from different threads.
    private let state = Mutex(State())
    private let finished = DispatchGroup()

    /// The port actually bound (differs from the configuration's when it asked for 0).
    public var port: Int { state.withLock { $0.port } }
    /// The effective connection cap.
    public var maximumConnections: Int { state.withLock { $0.shared?.maximumConnections ?? 0 } }

    /// - Parameters:
    ///   - accessLog: a logger that receives one `info` line per request, or nil for none
    ///     (the default; then logging costs one branch per request).
    ///   - log: faults an operator must see, which no request's answer shows: an event
    ///     loop that stopped, a connection that could not be set up.
    public convenience init(
        configuration: HTTPConfiguration, handler: any HTTPHandler, accessLog: Logger? = nil,
        log: Logger = Logger(label: "tiler.http"), observer: (any HTTPObserver)? = nil
    ) {
        self.init(configuration: configuration, accessLog: accessLog, log: log, observer: observer, makeHandler: { handler })
    }

    /// - Parameters:
    ///   - makeHandler: called once per event loop at `start()`, so that each loop can
    ///     have state (caches) no other loop touches.
    ///   - clock: the clock the loops read for timeouts and `Date` headers (tests pass a
    ///     `ManualClock`).
    ///   - observer: told of every answer and refused connection (metrics), or nil.
    public init(
        configuration: HTTPConfiguration, accessLog: Logger? = nil, log: Logger = Logger(label: "tiler.http"),
        observer: (any HTTPObserver)? = nil, clock: any ServerClock = SystemClock.system,
        makeHandler: @escaping @Sendable () -> any HTTPHandler
    ) {
        self.configuration = configuration
        self.makeHandler = makeHandler
        self.accessLog = accessLog
        self.observer = observer
        self.log = log
        self.clock = clock
    }

    /// Sets `SO_SNDBUF` on every accepted socket (tests: tiny buffers force partial writes).
    func setSendBufferBytes(_ bytes: Int?) {
        state.withLock { $0.sendBufferBytes = bytes }
    }

    /// Replaces how loops are prepared (tests).
    func setPrepareLoop(_ prepare: @escaping PrepareLoop) {
        state.withLock { $0.prepareLoop = prepare }
    }

    /// Binds one listening socket per loop, then starts the loops on their own threads.
    /// If anything fails, everything acquired so far is released and the error thrown;
    /// `start()` may then be called again.
    public func start() throws(SocketError) {
        // `sendfile` has no MSG_NOSIGNAL: writing to a client that has closed raises
        // SIGPIPE, whose default action kills the process. A client that asks for a
        // large tile and goes away at once (a closed tab) would stop the server. The
        // write's EPIPE is all the loop needs; ignore the signal, as nginx does.
        signal(SIGPIPE, SIG_IGN)
        try state.withLock { s throws(SystemCallError) in
            precondition(s.mailboxes.isEmpty, "HTTPServer.start() called twice")
            let cap = configuration.connectionCap(fileLimit: HTTPConfiguration.raisedFileLimit())
            let threads = max(1, configuration.threads)
            var sockets: [Socket] = []
            var resources: [EventLoop.Resources] = []
            let port: Int
            do throws(SystemCallError) {
                // SO_REUSEPORT would let a second server share a port that is already in
                // use and silently split its traffic: claim the port exclusively first.
                if configuration.port != 0 {
                    try ListeningSocket.checkPortIsFree(host: configuration.host, port: configuration.port)
                }
                let first = try ListeningSocket.bind(
                    host: configuration.host, port: configuration.port,
                    backlog: configuration.backlog)
                port = first.port
                sockets.append(first.socket)
                for _ in 1..<threads {
                    sockets.append(
                        try ListeningSocket.bind(
                            host: configuration.host, port: port,
                            backlog: configuration.backlog
                        ).socket)
                }
                for socket in sockets { resources.append(try s.prepareLoop(socket)) }
            } catch {
                // Each prepared loop owns its listener; the rest are still ours to close.
                for r in resources { r.discard() }
                for socket in sockets[resources.count...] { socket.close() }
                throw error
            }
            let pool = BlockingPool(
                read: .init(threads: configuration.blockingThreads, queueLength: configuration.maximumQueuedReads),
                render: .init(threads: configuration.renderThreads, queueLength: configuration.maximumQueuedRenders),
                storage: .init(
                    threads: configuration.storageThreads,
                    queueLength: configuration.maximumQueuedStorageReads))
            let shared = EventLoop.Shared(
                configuration: configuration, accessLog: accessLog, log: log, maximumConnections: cap,
                pool: pool, clock: clock, sendBufferBytes: s.sendBufferBytes, observer: observer)
            s.mailboxes = resources.map(\.mailbox)
            s.shared = shared
            s.port = port
            for (i, r) in resources.enumerated() {
                finished.enter()
                let thread = Thread { [finished, makeHandler] in
                    nameThisThread("tiler-http-\(i)")
                    EventLoop(resources: r, shared: shared, handler: makeHandler()).run()
                    finished.leave()
                }
                thread.name = "tiler-http-\(i)"
                thread.stackSize = 1 << 20
                thread.start()
            }
        }
    }

    /// Stops accepting and lets every loop finish the requests in flight, then exit:
    /// within `shutdownGracePeriod`, what is not finished is answered 503.
    /// Safe to call from any thread, and more than once.
    public func stop() {
        let running = state.withLock { s -> [EventLoop.Mailbox] in
            if s.stopDeadline == nil && !s.mailboxes.isEmpty {
                let grace = HTTPConfiguration.milliseconds(configuration.shutdownGracePeriod)
                s.stopDeadline = .now() + .milliseconds(Int(grace))
            }
            return s.mailboxes
        }
        for mailbox in running { mailbox.stop() }
    }

    /// Blocks until every loop has exited (after `stop()`), then stops the pool: queued
    /// work is dropped, and running work is waited for until the grace period ends.
    public func wait() {
        finished.wait()
        let (pool, deadline) = state.withLock { ($0.shared?.pool, $0.stopDeadline ?? .now()) }
        pool?.shutdown(deadline: deadline)
    }

    /// What one lane of the blocking pool has done, for metrics.
    public struct LaneStatistics: Sendable, Hashable {
        /// Jobs waiting for a thread, and running, now.
        public var queued: Int
        public var running: Int
        /// Since the start: jobs that ran to the end, that were cancelled before they ran
        /// (their client left), and that were refused with a full queue (503).
        public var finished: Int
        public var dropped: Int
        public var refused: Int
    }

    /// Counts for one lane of the blocking pool right now (zeros before `start()`).
    public func laneStatistics(_ kind: BlockingKind) -> LaneStatistics {
        let s = blockingStatistics(kind)
        return LaneStatistics(queued: s.queued, running: s.running, finished: s.finished, dropped: s.dropped, refused: s.refused)
    }

    /// Counts for one lane of the blocking pool (zeros before `start()`).
    var blockingStatistics: (BlockingKind) -> BlockingPool.Statistics {
        let pool = state.withLock { $0.shared?.pool }
        return { kind in
            pool?.statistics(kind) ?? .init(queued: 0, running: 0, finished: 0, dropped: 0, refused: 0, threads: 0, held: 0)
        }
    }

    /// Open client connections right now.
    public var openConnections: Int {
        state.withLock { $0.shared }?.connectionCount.load(ordering: .relaxed) ?? 0
    }
}
