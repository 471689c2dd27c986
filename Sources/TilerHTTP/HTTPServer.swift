import CNetShims
import Foundation
import Glibc
import Logging

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
public final class HTTPServer: @unchecked Sendable {
    public let configuration: HTTPConfiguration
    private let makeHandler: @Sendable () -> any HTTPHandler
    private let accessLog: Logger?
    /// Guards `loops`, `pool`, `stopDeadline`, `port` and `maximumConnections`: `start()`,
    /// `stop()` and `wait()` may be called from different threads.
    private let lock = NSLock()
    private var loops: [EventLoop] = []
    private var pool: BlockingPool?
    /// When the grace period given by the first `stop()` ends.
    private var stopDeadline: DispatchTime?
    private let finished = DispatchGroup()
    /// Makes each loop; tests replace it to make one fail.
    var makeEventLoop: (Int32, EventLoop.Shared, any HTTPHandler) -> EventLoop? = {
        EventLoop(listener: $0, shared: $1, handler: $2)
    }
    private let connectionCount: UnsafeMutablePointer<Int>
    /// The port actually bound (differs from the configuration's when it asked for 0).
    public var port: Int { lock.withLock { boundPort } }
    private var boundPort = 0
    /// The effective connection cap.
    public var maximumConnections: Int { lock.withLock { connectionCap } }
    private var connectionCap = 0

    /// - Parameter accessLog: a logger that receives one `info` line per request, or nil
    ///   for none (the default; then logging costs one branch per request).
    public convenience init(configuration: HTTPConfiguration, handler: any HTTPHandler, accessLog: Logger? = nil) {
        self.init(configuration: configuration, accessLog: accessLog, makeHandler: { handler })
    }

    /// - Parameter makeHandler: called once per event loop at `start()`, so that each
    ///   loop can have state (caches) no other loop touches.
    public init(configuration: HTTPConfiguration, accessLog: Logger? = nil,
                makeHandler: @escaping @Sendable () -> any HTTPHandler) {
        self.configuration = configuration
        self.makeHandler = makeHandler
        self.accessLog = accessLog
        connectionCount = .allocate(capacity: 1)
        connectionCount.initialize(to: 0)
    }

    deinit { connectionCount.deallocate() }

    /// Binds one listening socket per loop, then starts the loops on their own threads.
    /// If anything fails, everything acquired so far is released and the error thrown;
    /// `start()` may then be called again.
    public func start() throws(SocketError) {
        lock.lock()
        defer { lock.unlock() }
        precondition(loops.isEmpty, "HTTPServer.start() called twice")
        let fileLimit = Int(cns_raise_file_limit())
        let cap = configuration.maximumConnections ?? max(16, min(8192, (fileLimit > 0 ? fileLimit : 1024) - 64))
        let threads = max(1, configuration.threads)
        var sockets: [ListeningSocket] = []
        do {
            // SO_REUSEPORT would let a second server share a port that is already in
            // use and silently split its traffic: claim the port exclusively first.
            if configuration.port != 0 {
                try ListeningSocket.checkPortIsFree(host: configuration.host, port: configuration.port)
            }
            let first = try ListeningSocket.bind(host: configuration.host, port: configuration.port, backlog: configuration.backlog)
            sockets.append(first)
            for _ in 1..<threads {
                sockets.append(try ListeningSocket.bind(host: configuration.host, port: first.port, backlog: configuration.backlog))
            }
        } catch {
            for s in sockets { close(s.fd) }
            throw error
        }
        let pool = BlockingPool(
            read: .init(threads: configuration.blockingThreads, queueLength: configuration.maximumQueuedReads),
            render: .init(threads: configuration.renderThreads, queueLength: configuration.maximumQueuedRenders),
            storage: .init(threads: configuration.storageThreads, queueLength: configuration.maximumQueuedStorageReads))
        let shared = EventLoop.Shared(configuration: configuration, accessLog: accessLog,
                                      maximumConnections: cap, connectionCount: connectionCount, pool: pool)
        var made: [EventLoop] = []
        for (i, s) in sockets.enumerated() {
            guard let loop = makeEventLoop(s.fd, shared, makeHandler()) else {
                let e = SocketError("epoll_create")
                // Each made loop owns its listener; the rest are still ours to close.
                for loop in made { loop.discard() }
                for s in sockets[i...] { close(s.fd) }
                throw e
            }
            made.append(loop)
        }
        loops = made
        self.pool = pool
        boundPort = sockets[0].port
        connectionCap = cap
        for (i, loop) in loops.enumerated() {
            finished.enter()
            let thread = Thread { [finished] in
                cns_name_thread("tiler-http-\(i)")
                loop.run()
                finished.leave()
            }
            thread.name = "tiler-http-\(i)"
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// Stops accepting and lets every loop finish the requests in flight, then exit:
    /// within `shutdownGracePeriod`, what is not finished is answered 503.
    /// Safe to call from any thread, and more than once.
    public func stop() {
        let running = lock.withLock { () -> [EventLoop] in
            if stopDeadline == nil && !loops.isEmpty {
                stopDeadline = .now() + .milliseconds(Int(HTTPConfiguration.milliseconds(configuration.shutdownGracePeriod)))
            }
            return loops
        }
        for loop in running { loop.stop() }
    }

    /// Blocks until every loop has exited (after `stop()`), then stops the pool: queued
    /// work is dropped, and running work is waited for until the grace period ends.
    public func wait() {
        finished.wait()
        let (pool, deadline) = lock.withLock { (self.pool, stopDeadline ?? .now()) }
        pool?.shutdown(deadline: deadline)
    }

    /// Counts for one lane of the blocking pool (zeros before `start()`).
    var blockingStatistics: (BlockingKind) -> BlockingPool.Statistics {
        let pool = lock.withLock { self.pool }
        return { kind in
            pool?.statistics(kind) ?? .init(queued: 0, running: 0, finished: 0, dropped: 0, refused: 0, threads: 0, held: 0)
        }
    }

    /// Open client connections right now.
    public var openConnections: Int {
        connectionCount.withMemoryRebound(to: CLong.self, capacity: 1) { Int(cns_atomic_load($0)) }
    }
}
