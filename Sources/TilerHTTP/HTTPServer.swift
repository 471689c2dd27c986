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
    private var loops: [EventLoop] = []
    private var pool: BlockingPool?
    private let finished = DispatchGroup()
    private let connectionCount: UnsafeMutablePointer<Int>
    /// The port actually bound (differs from the configuration's when it asked for 0).
    public private(set) var port: Int = 0
    /// The effective connection cap.
    public private(set) var maximumConnections: Int = 0

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
    public func start() throws(SocketError) {
        precondition(loops.isEmpty, "HTTPServer.start() called twice")
        let fileLimit = Int(cns_raise_file_limit())
        let cap = configuration.maximumConnections ?? max(16, min(8192, (fileLimit > 0 ? fileLimit : 1024) - 64))
        maximumConnections = cap
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
            port = first.port
            for _ in 1..<threads {
                sockets.append(try ListeningSocket.bind(host: configuration.host, port: port, backlog: configuration.backlog))
            }
        } catch {
            for s in sockets { close(s.fd) }
            throw error
        }
        let pool = BlockingPool(threads: configuration.blockingThreads)
        self.pool = pool
        let shared = EventLoop.Shared(configuration: configuration, accessLog: accessLog,
                                      maximumConnections: cap, connectionCount: connectionCount, pool: pool)
        for s in sockets {
            guard let loop = EventLoop(listener: s.fd, shared: shared, handler: makeHandler()) else {
                let e = SocketError("epoll_create")
                for l in loops { l.stop() }
                throw e
            }
            loops.append(loop)
        }
        for (i, loop) in loops.enumerated() {
            finished.enter()
            let thread = Thread { [finished] in
                loop.run()
                finished.leave()
            }
            thread.name = "tiler-http-\(i)"
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// Stops accepting and lets every loop finish the requests in flight, then exit.
    /// Safe to call from any thread, and more than once.
    public func stop() {
        for loop in loops { loop.stop() }
    }

    /// Blocks until every loop has exited (after `stop()`).
    public func wait() {
        finished.wait()
        pool?.shutdown()
    }

    /// Open client connections right now.
    public var openConnections: Int {
        connectionCount.withMemoryRebound(to: CLong.self, capacity: 1) { Int(cns_atomic_load($0)) }
    }
}
