import Foundation
import CNetShims
import Glibc
import Logging

/// One client connection: a socket, its parser and its queued output. Owned by exactly
/// one event loop.
final class Connection {
    let fd: Int32
    var parser: HTTPRequestParser
    /// Responses not yet written, from `outputStart`.
    var output: [UInt8] = []
    var outputStart = 0
    /// Bytes read but not yet parsed because the output queue was full.
    var pendingInput: [UInt8] = []
    /// When the connection last made progress (ms, monotonic).
    var lastActivity: Int64
    /// When the current request's first byte arrived; nil between requests.
    var requestStarted: Int64?
    /// Whether any request has been answered (until then, silence is held to the
    /// request-head timeout rather than the longer idle timeout).
    var hasServedRequest = false
    /// Close once `output` is written.
    var closeAfterFlush = false
    /// A response is being made on the blocking pool: nothing more is read or parsed
    /// from this connection until it is sent (responses keep their order).
    var waiting = false
    /// Reading has stopped (closing or backpressure); only EPOLLOUT matters.
    var readingPaused = false
    var registeredForWrite = false
    /// After an error response: the write side is shut and input is read and dropped
    /// until the peer closes or `lingerDeadline` passes, so the client sees the response
    /// instead of a reset.
    var lingerDeadline: Int64?

    init(fd: Int32, limits: HTTPRequestParser.Limits, now: Int64) {
        self.fd = fd
        self.parser = HTTPRequestParser(limits: limits)
        self.lastActivity = now
        output.reserveCapacity(8192)
    }

    /// A cached body to send after `output` without copying it there first (the last
    /// response's). Any later bytes for `output` must first append it (`materialize`).
    var deferredBody: [UInt8]?

    var hasQueuedOutput: Bool { outputStart < output.count || deferredBody != nil }

    var queuedBytes: Int { output.count - outputStart + (deferredBody?.count ?? 0) }

    /// Moves the deferred body into `output`, so that more bytes can follow it.
    @inline(__always)
    func materialize() {
        if let body = deferredBody {
            output += body
            deferredBody = nil
        }
    }
}

/// An epoll loop on one thread with its own listening socket.
final class EventLoop: @unchecked Sendable {
    /// What all loops share.
    final class Shared: @unchecked Sendable {
        let configuration: HTTPConfiguration
        let accessLog: Logger?
        let maximumConnections: Int
        let connectionCount: UnsafeMutablePointer<CLong>
        let limits: HTTPRequestParser.Limits
        let pool: BlockingPool

        init(configuration: HTTPConfiguration, accessLog: Logger?,
             maximumConnections: Int, connectionCount: UnsafeMutablePointer<Int>, pool: BlockingPool) {
            self.configuration = configuration
            self.pool = pool
            self.accessLog = accessLog
            self.maximumConnections = maximumConnections
            self.connectionCount = UnsafeMutableRawPointer(connectionCount).assumingMemoryBound(to: CLong.self)
            limits = configuration.parserLimits
        }
    }

    private let shared: Shared
    /// This loop's own handler and serializer: nothing on the request path is shared with
    /// other loops, so no reference count or lock bounces between cores.
    private let handler: any HTTPHandler
    private let serializer: ResponseSerializer
    private let epfd: Int32
    private var listener: Int32
    private let wakeFD: Int32
    private var connections: [Connection?] = []
    private var openCount = 0
    private let readBuffer: UnsafeMutableRawBufferPointer
    private let events: UnsafeMutablePointer<cns_event>
    private let eventCapacity: Int32 = 512
    private var now: Int64
    private var dateSecond: Int64 = -1
    private var date: [UInt8] = []
    private var lastSweep: Int64
    private var draining = false
    private var drainDeadline: Int64 = .max
    private var acceptPausedUntil: Int64?
    private let stopFlag: UnsafeMutablePointer<CLong>

    /// A request whose response is being made on the blocking pool.
    private struct Pending: @unchecked Sendable {
        let connection: Connection
        let head: HTTPRequestHead
        let keepAlive: Bool
    }
    /// Responses finished on the pool, handed back under `completionLock`.
    private let completionLock = NSLock()
    private var completions: [(Pending, HTTPResponse)] = []
    /// Set (under the lock) when the loop has exited and its eventfd is closed.
    private var exited = false

    private let idleTimeout: Int64
    private let headTimeout: Int64
    private let writeTimeout: Int64
    private static let lingerTime: Int64 = 2000
    private static let sweepInterval: Int64 = 250

    init?(listener: Int32, shared: Shared, handler: any HTTPHandler) {
        let ep = cns_epoll_create()
        guard ep >= 0 else { return nil }
        let wake = cns_eventfd()
        guard wake >= 0 else { close(ep); return nil }
        epfd = ep
        wakeFD = wake
        self.listener = listener
        self.shared = shared
        self.handler = handler
        serializer = ResponseSerializer(configuration: shared.configuration)
        readBuffer = .allocate(byteCount: 64 * 1024, alignment: 16)
        events = .allocate(capacity: Int(eventCapacity))
        stopFlag = .allocate(capacity: 1)
        stopFlag.initialize(to: 0)
        now = cns_monotonic_ms()
        lastSweep = now
        let c = shared.configuration
        idleTimeout = Int64(c.idleTimeout * 1000)
        headTimeout = Int64(c.requestHeadTimeout * 1000)
        writeTimeout = Int64(c.writeTimeout * 1000)
        _ = cns_epoll_add(ep, listener, CNS_EPOLLIN)
        _ = cns_epoll_add(ep, wake, CNS_EPOLLIN)
    }

    deinit {
        readBuffer.deallocate()
        events.deallocate()
        stopFlag.deallocate()
    }

    /// Asks the loop to drain and exit; any thread.
    func stop() {
        cns_atomic_store(stopFlag, 1)
        _ = cns_eventfd_signal(wakeFD)
    }

    func run() {
        refreshDate()
        while true {
            let timeout: Int32 = draining ? 50 : Int32(Self.sweepInterval)
            let n = cns_epoll_wait(epfd, events, eventCapacity, timeout)
            now = cns_monotonic_ms()
            if n < 0 && errno != EINTR { break }
            if n > 0 { refreshDate() }
            for i in 0..<Int(max(n, 0)) {
                let fd = events[i].fd
                let ev = events[i].events
                if fd == listener {
                    acceptConnections()
                } else if fd == wakeFD {
                    cns_eventfd_drain(wakeFD)
                    runCompletions()
                    if cns_atomic_load(stopFlag) != 0 { beginDraining() }
                } else if Int(fd) < connections.count, let c = connections[Int(fd)] {
                    handle(c, events: ev)
                }
            }
            if now - lastSweep >= Self.sweepInterval {
                lastSweep = now
                sweep()
            }
            if draining && (openCount == 0 || now >= drainDeadline) { break }
        }
        for case let c? in connections { closeConnection(c) }
        if listener >= 0 { close(listener) }
        completionLock.withLock { exited = true; completions.removeAll() }
        close(wakeFD)
        close(epfd)
    }

    // MARK: Accepting

    private func acceptConnections() {
        for _ in 0..<256 {
            let fd = cns_accept(listener)
            if fd < 0 {
                switch errno {
                case EINTR, ECONNABORTED: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors: stop polling the listener briefly instead of spinning.
                    _ = cns_epoll_remove(epfd, listener)
                    acceptPausedUntil = now + 100
                    return
                default: return
                }
            }
            if cns_atomic_add(shared.connectionCount, 1) > shared.maximumConnections {
                _ = cns_atomic_add(shared.connectionCount, -1)
                var refusal: [UInt8] = []
                serializer.writeProtocolError(HTTPError(503, "the server is at its connection limit; retry later"),
                                                     date: date, into: &refusal)
                refusal.withUnsafeBytes { _ = cns_send(fd, $0.baseAddress, $0.count) }
                close(fd)
                continue
            }
            _ = cns_set_no_delay(fd)
            let c = Connection(fd: fd, limits: shared.limits, now: now)
            if Int(fd) >= connections.count {
                connections.append(contentsOf: repeatElement(nil, count: Int(fd) + 1 - connections.count + 64))
            }
            connections[Int(fd)] = c
            openCount += 1
            _ = cns_epoll_add(epfd, fd, CNS_EPOLLIN | CNS_EPOLLRDHUP)
        }
    }

    // MARK: Reading and writing

    private func handle(_ c: Connection, events ev: UInt32) {
        if ev & (CNS_EPOLLERR | CNS_EPOLLHUP) != 0 && ev & CNS_EPOLLIN == 0 {
            closeConnection(c)
            return
        }
        if c.waiting {
            // Only earlier responses are written until the pending one is done.
            if ev & (CNS_EPOLLERR | CNS_EPOLLHUP) != 0 { closeConnection(c) } else if ev & CNS_EPOLLOUT != 0 { flush(c) }
            return
        }
        if ev & CNS_EPOLLOUT != 0 {
            flush(c)
            if connections[Int(c.fd)] !== c { return }
        }
        if ev & (CNS_EPOLLIN | CNS_EPOLLRDHUP | CNS_EPOLLHUP | CNS_EPOLLERR) != 0 && !c.readingPaused {
            readAvailable(c)
        } else if c.lingerDeadline != nil && ev & (CNS_EPOLLIN | CNS_EPOLLRDHUP | CNS_EPOLLHUP) != 0 {
            discardInput(c)
        }
    }

    private func readAvailable(_ c: Connection) {
        let n = Glibc.read(c.fd, readBuffer.baseAddress, readBuffer.count)
        if n == 0 {
            // The peer closed its side: answer what was asked, then close.
            if c.hasQueuedOutput { c.closeAfterFlush = true; pauseReading(c) } else { closeConnection(c) }
            return
        }
        if n < 0 {
            if errno == EAGAIN || errno == EINTR { return }
            closeConnection(c)
            return
        }
        c.lastActivity = now
        process(c, UnsafeRawBufferPointer(start: readBuffer.baseAddress, count: n))
        if connections[Int(c.fd)] === c { flush(c) }
    }

    /// Parses and answers every complete request in `bytes` (pipelining), stopping when
    /// the output queue is full (the rest waits in `pendingInput`).
    private func process(_ c: Connection, _ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {
            if c.queuedBytes >= shared.configuration.maximumQueuedOutputBytes {
                c.pendingInput.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset...]))
                pauseReading(c)
                return
            }
            if c.parser.isIdle { c.requestStarted = now }
            let r = c.parser.parse(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
            offset += r.consumed
            switch r.status {
            case .needMore:
                return
            case .complete:
                c.requestStarted = nil
                c.hasServedRequest = true
                respond(c)
                if c.waiting {
                    // Hold what was pipelined behind it, and stop reading until it is sent.
                    if offset < bytes.count {
                        c.pendingInput.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset...]))
                    }
                    _ = cns_epoll_modify(epfd, c.fd, c.registeredForWrite ? CNS_EPOLLOUT : 0)
                    return
                }
                if c.closeAfterFlush { pauseReading(c); return }
            case .failed(let e):
                c.requestStarted = nil
                c.materialize()
                serializer.writeProtocolError(HTTPError(e.status, e.reason), date: date, into: &c.output)
                logProtocolError(e)
                c.closeAfterFlush = true
                c.lingerDeadline = now + Self.lingerTime
                pauseReading(c)
                return
            }
        }
    }

    private func respond(_ c: Connection) {
        c.materialize()
        let head = c.parser.head
        let keepAlive = head.keepAlive && !draining
        if !keepAlive { c.closeAfterFlush = true }
        let result: (status: Int, bytes: Int)
        switch head.method {
        case .get, .head:
            let response = handler.respond(to: head)
            if let make = response.blockingWork {
                startBlocking(c, Pending(connection: c, head: head, keepAlive: keepAlive), make)
                return
            }
            result = write(response, for: head, keepAlive: keepAlive, to: c)
        case .options:
            serializer.writeOptions(for: head, keepAlive: keepAlive, date: date, into: &c.output)
            result = (204, 0)
        case .other:
            result = serializer.write(.error(HTTPError(405, "only GET, HEAD and OPTIONS are allowed")), for: head,
                                             keepAlive: keepAlive, date: date, into: &c.output)
        }
        if let log = shared.accessLog { logAccess(log, head, result) }
    }

    /// Queues a response on the connection: headers into `output`, a cached or built
    /// body as its `deferredBody` (sent without a copy).
    private func write(_ response: HTTPResponse, for head: HTTPRequestHead, keepAlive: Bool,
                       to c: Connection) -> (status: Int, bytes: Int) {
        withUnsafeMutablePointer(to: &c.deferredBody) { deferred in
            serializer.write(response, for: head, keepAlive: keepAlive, date: date, into: &c.output, deferredBody: deferred)
        }
    }

    // MARK: Blocking work

    private func startBlocking(_ c: Connection, _ pending: Pending, _ make: @escaping @Sendable () -> HTTPResponse) {
        c.waiting = true
        shared.pool.submit { [self] in
            let response = make()
            let delivered = completionLock.withLock { () -> Bool in
                guard !exited else { return false }
                completions.append((pending, response))
                return true
            }
            if delivered { _ = cns_eventfd_signal(wakeFD) }
        }
    }

    /// Sends the responses the pool has finished, then carries on with what each
    /// connection pipelined behind them.
    private func runCompletions() {
        let done = completionLock.withLock { () -> [(Pending, HTTPResponse)] in
            let done = completions
            completions.removeAll(keepingCapacity: true)
            return done
        }
        for (pending, response) in done {
            let c = pending.connection
            guard Int(c.fd) < connections.count, connections[Int(c.fd)] === c, c.waiting else { continue }
            c.waiting = false
            c.lastActivity = now
            c.materialize()
            let result = write(response, for: pending.head, keepAlive: pending.keepAlive, to: c)
            if let log = shared.accessLog { logAccess(log, pending.head, result) }
            if !c.pendingInput.isEmpty && !c.closeAfterFlush && !c.readingPaused {
                let held = c.pendingInput
                c.pendingInput = []
                held.withUnsafeBytes { process(c, $0) }
                guard connections[Int(c.fd)] === c else { continue }
            }
            if !c.waiting && !c.readingPaused && !c.closeAfterFlush { setInterest(c, write: c.registeredForWrite) }
            flush(c)
        }
    }

    private func logAccess(_ log: Logger, _ head: HTTPRequestHead, _ result: (status: Int, bytes: Int)) {
        let method: String = switch head.method {
        case .get: "GET"
        case .head: "HEAD"
        case .options: "OPTIONS"
        case .other: "OTHER"
        }
        log.info("request", metadata: [
            "method": .string(method),
            "target": .string(String(decoding: head.target.prefix(512), as: UTF8.self)),
            "status": .stringConvertible(result.status),
            "bytes": .stringConvertible(result.bytes),
            "version": .string(head.version == .http10 ? "1.0" : "1.1"),
        ])
    }

    private func logProtocolError(_ e: HTTPParseError) {
        shared.accessLog?.info("request", metadata: ["status": .stringConvertible(e.status), "error": .string(e.reason)])
    }

    private func flush(_ c: Connection) {
        if let body = c.deferredBody {
            // Headers and the cached body in one sendmsg, without copying the body.
            let headLength = c.output.count - c.outputStart
            let n = c.output.withUnsafeBytes { head in
                body.withUnsafeBytes { b in
                    cns_send2(c.fd, head.baseAddress.map { $0 + c.outputStart }, headLength, b.baseAddress, b.count)
                }
            }
            if n < 0 && errno != EAGAIN && errno != EINTR {
                closeConnection(c)
                return
            }
            let sent = max(n, 0)
            if sent > 0 { c.lastActivity = now }
            if sent == headLength + body.count {
                c.deferredBody = nil
                c.outputStart = c.output.count
            } else if sent < headLength {
                c.outputStart += sent
                c.materialize()
            } else {
                c.output.removeAll(keepingCapacity: true)
                c.outputStart = 0
                c.output += body[(sent - headLength)...]
                c.deferredBody = nil
            }
        }
        while c.outputStart < c.output.count {
            let n = c.output.withUnsafeBytes { buffer in
                cns_send(c.fd, buffer.baseAddress! + c.outputStart, buffer.count - c.outputStart)
            }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN {
                    if !c.registeredForWrite { setInterest(c, write: true) }
                    return
                }
                closeConnection(c)
                return
            }
            c.outputStart += n
            c.lastActivity = now
        }
        // Everything written.
        if c.waiting {
            if c.registeredForWrite {
                c.registeredForWrite = false
                _ = cns_epoll_modify(epfd, c.fd, 0)
            }
            return
        }
        if c.output.capacity > 256 * 1024 {
            c.output = []
            c.output.reserveCapacity(8192)
        } else {
            c.output.removeAll(keepingCapacity: true)
        }
        c.outputStart = 0
        if c.closeAfterFlush {
            if c.lingerDeadline != nil {
                _ = shutdown(c.fd, Int32(SHUT_WR))
                if c.registeredForWrite || c.readingPaused {
                    c.readingPaused = true
                    c.registeredForWrite = false
                    _ = cns_epoll_modify(epfd, c.fd, CNS_EPOLLIN | CNS_EPOLLRDHUP)
                }
            } else {
                closeConnection(c)
            }
        } else if c.readingPaused {
            // Backpressure relieved: answer what was held back and read again.
            resumeReading(c)
        } else {
            if c.registeredForWrite { setInterest(c, write: false) }
            if draining && c.parser.isIdle { closeConnection(c) }
        }
    }

    /// Reads and drops input on a lingering connection; closes on EOF.
    private func discardInput(_ c: Connection) {
        while true {
            let n = Glibc.read(c.fd, readBuffer.baseAddress, readBuffer.count)
            if n > 0 { continue }
            if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
            closeConnection(c)
            return
        }
    }

    private func pauseReading(_ c: Connection) {
        guard !c.readingPaused else { return }
        c.readingPaused = true
        c.registeredForWrite = true
        _ = cns_epoll_modify(epfd, c.fd, CNS_EPOLLOUT)
    }

    /// Answers requests held back by backpressure, then listens for input again.
    private func resumeReading(_ c: Connection) {
        c.readingPaused = false
        c.registeredForWrite = false
        _ = cns_epoll_modify(epfd, c.fd, CNS_EPOLLIN | CNS_EPOLLRDHUP)
        guard !c.pendingInput.isEmpty else { return }
        let held = c.pendingInput
        c.pendingInput = []
        held.withUnsafeBytes { process(c, $0) }
        if connections[Int(c.fd)] === c { flush(c) }
    }

    private func setInterest(_ c: Connection, write: Bool) {
        c.registeredForWrite = write
        var mask: UInt32 = write ? CNS_EPOLLOUT : 0
        if !c.readingPaused && !c.waiting { mask |= CNS_EPOLLIN | CNS_EPOLLRDHUP }
        _ = cns_epoll_modify(epfd, c.fd, mask)
    }

    private func closeConnection(_ c: Connection) {
        guard Int(c.fd) < connections.count, connections[Int(c.fd)] === c else { return }
        connections[Int(c.fd)] = nil
        openCount -= 1
        _ = cns_epoll_remove(epfd, c.fd)
        close(c.fd)
        _ = cns_atomic_add(shared.connectionCount, -1)
    }

    // MARK: Timers and shutdown

    private func refreshDate() {
        let second = cns_wall_seconds()
        if second != dateSecond {
            dateSecond = second
            date = HTTPDate.format(second)
        }
    }

    /// Closes connections past their idle, request-head, write or linger deadlines.
    private func sweep() {
        if let paused = acceptPausedUntil, now >= paused, listener >= 0 {
            acceptPausedUntil = nil
            _ = cns_epoll_add(epfd, listener, CNS_EPOLLIN)
        }
        for case let c? in connections {
            if let linger = c.lingerDeadline {
                if now >= linger || (!c.hasQueuedOutput && now - c.lastActivity > Self.lingerTime) { closeConnection(c) }
                continue
            }
            if c.waiting {
                // Its response is being made; only a stalled write of earlier ones counts.
                if c.hasQueuedOutput && now - c.lastActivity > writeTimeout { closeConnection(c) }
                continue
            }
            if c.hasQueuedOutput {
                if now - c.lastActivity > writeTimeout { closeConnection(c) }
            } else if let started = c.requestStarted {
                if now - started > headTimeout {
                    refreshDate()
                    c.materialize()
                    serializer.writeProtocolError(HTTPError(408, "the request head took too long to arrive"),
                                                         date: date, into: &c.output)
                    c.closeAfterFlush = true
                    pauseReading(c)
                    flush(c)
                    if connections[Int(c.fd)] === c { closeConnection(c) }
                }
            } else if now - c.lastActivity > (c.hasServedRequest ? idleTimeout : min(idleTimeout, headTimeout)) {
                closeConnection(c)
            }
        }
    }

    private func beginDraining() {
        guard !draining else { return }
        draining = true
        drainDeadline = now + Int64(shared.configuration.shutdownGracePeriod * 1000)
        if listener >= 0 {
            _ = cns_epoll_remove(epfd, listener)
            close(listener)
            listener = -1
        }
        for case let c? in connections where c.parser.isIdle && !c.hasQueuedOutput && c.pendingInput.isEmpty && !c.waiting {
            closeConnection(c)
        }
    }
}
