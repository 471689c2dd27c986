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
    /// When the connection last made progress, reading or writing (ms, monotonic).
    var lastActivity: Int64
    /// Since when queued output has been waiting for the client to read it without any
    /// progress (ms, monotonic); nil when nothing waits. Reads do not reset it, so a client
    /// that keeps sending but never reads is still held to the write timeout.
    var writeStalledSince: Int64?
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
    /// The pool job making that response, to cancel if the connection closes first.
    var job: BlockingPool.Job?
    /// While waiting, whether a hang-up (the client closing its side) is watched for. It
    /// stops once the job has started: its answer is then delivered to a half-closed
    /// client, and a level-triggered EPOLLRDHUP must not wake the loop over and over.
    var watchingForHangUp = false
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
        idleTimeout = HTTPConfiguration.milliseconds(c.idleTimeout)
        headTimeout = HTTPConfiguration.milliseconds(c.requestHeadTimeout)
        writeTimeout = HTTPConfiguration.milliseconds(c.writeTimeout)
        _ = cns_epoll_add(ep, listener, CNS_EPOLLIN)
        _ = cns_epoll_add(ep, wake, CNS_EPOLLIN)
    }

    deinit {
        readBuffer.deallocate()
        events.deallocate()
        stopFlag.deallocate()
    }

    /// Asks the loop to drain and exit; any thread, any number of times. Once the loop
    /// has exited its eventfd is closed (its number may belong to another file by then),
    /// so it is only written while the loop runs.
    func stop() {
        cns_atomic_store(stopFlag, 1)
        completionLock.withLock {
            if !exited { _ = cns_eventfd_signal(wakeFD) }
        }
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
                    // A stop first: answers finished at the same time then say `close`.
                    if cns_atomic_load(stopFlag) != 0 { beginDraining() }
                    runCompletions()
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
        if draining { answerWhatIsLeft() }
        for case let c? in connections { closeConnection(c) }
        if listener >= 0 { close(listener) }
        completionLock.withLock { exited = true; completions.removeAll() }
        close(wakeFD)
        close(epfd)
    }

    /// Releases what `init` acquired, for a loop that will never `run()` (the server
    /// failed to start another one): its epoll and wake descriptors and its listener.
    func discard() {
        completionLock.withLock { exited = true }
        if listener >= 0 { close(listener) }
        listener = -1
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
            if ev & (CNS_EPOLLERR | CNS_EPOLLHUP) != 0 {
                closeConnection(c)
                return
            }
            if ev & CNS_EPOLLRDHUP != 0 && c.watchingForHangUp {
                // The client closed its side while its answer waits for the pool. If no
                // thread has taken the work, the client has left: drop it and close (as
                // nginx does for a client that aborts). If it is running, let it finish
                // and deliver the answer; a half-closed client may still read it.
                if c.job?.cancel() == true {
                    closeConnection(c)
                    return
                }
                c.watchingForHangUp = false
                setInterest(c, write: c.registeredForWrite)
            }
            if ev & CNS_EPOLLOUT != 0 { flush(c) }
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
                    setInterest(c, write: c.registeredForWrite)
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
            var response = handler.respond(to: head)
            if let work = response.blockingWork {
                if startBlocking(c, Pending(connection: c, head: head, keepAlive: keepAlive), work.kind, work.make) {
                    return
                }
                response = Self.queueFull(work.kind)
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

    /// Hands the response's work to the pool; false when `kind`'s queue is full.
    private func startBlocking(_ c: Connection, _ pending: Pending, _ kind: BlockingKind,
                               _ make: @escaping @Sendable () -> HTTPResponse) -> Bool {
        let job = shared.pool.submit(kind) { [self] in
            let response = make()
            let delivered = completionLock.withLock { () -> Bool in
                guard !exited else { return false }
                completions.append((pending, response))
                return true
            }
            if delivered { _ = cns_eventfd_signal(wakeFD) }
        }
        guard let job else { return false }
        c.waiting = true
        c.job = job
        c.watchingForHangUp = true
        return true
    }

    /// The answer when `kind`'s queue is full.
    private static func queueFull(_ kind: BlockingKind) -> HTTPResponse {
        let message = switch kind {
        case .read: "too many tile reads are waiting for the disk; retry later"
        case .render: "too many images are waiting to be drawn; retry later"
        case .storage: "too many reads are waiting for object storage; retry later"
        }
        return .withHeaders([("Retry-After", "1")], .error(HTTPError(503, message)))
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
            c.job = nil
            c.watchingForHangUp = false
            c.lastActivity = now
            c.materialize()
            // An answer finished after a stop began closes its connection.
            let keepAlive = pending.keepAlive && !draining
            if !keepAlive { c.closeAfterFlush = true }
            let result = write(response, for: pending.head, keepAlive: keepAlive, to: c)
            if let log = shared.accessLog { logAccess(log, pending.head, result) }
            if !c.pendingInput.isEmpty && !c.closeAfterFlush && !c.readingPaused {
                let held = c.pendingInput
                c.pendingInput = []
                held.withUnsafeBytes { process(c, $0) }
                guard connections[Int(c.fd)] === c else { continue }
            }
            if c.closeAfterFlush {
                pauseReading(c)
            } else if !c.waiting && !c.readingPaused {
                setInterest(c, write: c.registeredForWrite)
            }
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
            if sent > 0 {
                c.lastActivity = now
                c.writeStalledSince = nil
            }
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
                    if c.writeStalledSince == nil { c.writeStalledSince = now }
                    if !c.registeredForWrite { setInterest(c, write: true) }
                    return
                }
                closeConnection(c)
                return
            }
            c.outputStart += n
            c.lastActivity = now
            c.writeStalledSince = nil
        }
        // Everything written.
        c.writeStalledSince = nil
        if c.waiting {
            if c.registeredForWrite { setInterest(c, write: false) }
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
        if c.waiting {
            if c.watchingForHangUp { mask |= CNS_EPOLLRDHUP }
        } else if !c.readingPaused {
            mask |= CNS_EPOLLIN | CNS_EPOLLRDHUP
        }
        _ = cns_epoll_modify(epfd, c.fd, mask)
    }

    private func closeConnection(_ c: Connection) {
        guard Int(c.fd) < connections.count, connections[Int(c.fd)] === c else { return }
        // Work queued for this connection is dropped before it runs.
        c.job?.cancel()
        c.job = nil
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
            // Output the client does not read, however much else it sends.
            if let stalled = c.writeStalledSince, now - stalled > writeTimeout {
                closeConnection(c)
                continue
            }
            // Its response is being made, or the server stopped reading (backpressure): no
            // request head can be late.
            if c.waiting || c.readingPaused { continue }
            if let started = c.requestStarted {
                // A request head (empty lines before it included) must be complete within
                // the head timeout, whatever arrives meanwhile.
                if now - started > headTimeout {
                    refreshDate()
                    c.materialize()
                    serializer.writeProtocolError(HTTPError(408, "the request head took too long to arrive"),
                                                         date: date, into: &c.output)
                    // As after a protocol error: shut the write side and drop what else
                    // arrives until the linger ends, so the client reads the 408 instead
                    // of a reset.
                    c.closeAfterFlush = true
                    c.lingerDeadline = now + Self.lingerTime
                    pauseReading(c)
                    flush(c)
                }
            } else if c.hasQueuedOutput {
                if now - c.lastActivity > writeTimeout { closeConnection(c) }
            } else if now - c.lastActivity > (c.hasServedRequest ? idleTimeout : min(idleTimeout, headTimeout)) {
                closeConnection(c)
            }
        }
    }

    private func beginDraining() {
        guard !draining else { return }
        draining = true
        drainDeadline = now + HTTPConfiguration.milliseconds(shared.configuration.shutdownGracePeriod)
        if listener >= 0 {
            _ = cns_epoll_remove(epfd, listener)
            close(listener)
            listener = -1
        }
        // Idle connections close, unless a request has arrived that the loop has not read
        // yet: it is in flight too, and is read and answered (with `Connection: close`).
        for case let c? in connections where c.parser.isIdle && !c.hasQueuedOutput && c.pendingInput.isEmpty && !c.waiting
            && c.lingerDeadline == nil && cns_readable_bytes(c.fd) <= 0 {
            closeConnection(c)
        }
    }

    /// At the end of the grace period: every request still in flight (its answer waiting
    /// for the pool, queued or running, or its head still arriving) is answered 503 with
    /// `Connection: close`, and its queued work dropped.
    private func answerWhatIsLeft() {
        refreshDate()
        for case let c? in connections where c.lingerDeadline == nil && !c.closeAfterFlush
            && (c.waiting || !c.parser.isIdle || !c.pendingInput.isEmpty) {
            c.job?.cancel()
            c.job = nil
            c.waiting = false
            c.materialize()
            serializer.writeProtocolError(HTTPError(503, "the server is shutting down; retry the request"),
                                          date: date, into: &c.output)
            c.closeAfterFlush = true
            c.lingerDeadline = now  // flush shuts the write side instead of closing
            flush(c)
            guard connections[Int(c.fd)] === c else { continue }
            // Unread input (pipelined requests) would make close() send a reset, which can
            // destroy the answer before the client reads it: read it away first.
            var budget = 1 << 20
            while budget > 0 {
                let n = Glibc.read(c.fd, readBuffer.baseAddress, readBuffer.count)
                if n <= 0 { break }
                budget -= n
            }
        }
    }
}
