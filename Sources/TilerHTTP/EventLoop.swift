import Dispatch
import Glibc
import Logging
import Synchronization
import TilerSystem

/// One client connection: its socket, its state machine and its pool job. Owned by
/// exactly one event loop.
final class Connection {
    let socket: Socket
    /// Tells this connection from a later one given the same descriptor number.
    let serial: UInt64
    /// The serial's low half, which epoll gives back with each event.
    var tag: UInt32 { Connection.tag(serial) }
    static func tag(_ serial: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: serial) }
    /// The state machine, in memory of its own. Reached through a pointer rather than a
    /// stored property: every access to a class's stored property is checked at run time
    /// for overlap (about 70 instructions each, a tenth of a cached tile's instructions in
    /// all). Nothing can overlap here: only this connection's loop touches it, one call
    /// at a time, and the handler it calls sees only the request head, never a connection.
    private let state: UnsafeMutablePointer<ConnectionStateMachine>
    var machine: ConnectionStateMachine {
        _read { yield state.pointee }
        _modify { yield &state.pointee }
    }
    /// What epoll watches for now.
    var registered: Interest
    /// The pool job making its answer, to cancel if the connection closes first.
    var job: BlockingPool.Job?
    /// The client's address (`1.2.3.4:5678`, `[::1]:5678`), read only for the access log.
    var peer = ""

    init(socket: Socket, serial: UInt64, machine: ConnectionStateMachine, registered: Interest) {
        self.socket = socket
        self.serial = serial
        state = .allocate(capacity: 1)
        state.initialize(to: machine)
        self.registered = registered
    }

    deinit {
        state.deinitialize(count: 1)
        state.deallocate()
    }
}

/// An epoll loop on one thread with its own listening socket. It performs what each
/// connection's `ConnectionStateMachine` asks (reads, writes, pool jobs, interest,
/// closing) and nothing else: every HTTP decision is the state machine's.
final class EventLoop {
    /// What all loops of a server share.
    final class Shared: Sendable {
        let settings: ConnectionSettings
        let accessLog: Logger?
        /// Faults no answer shows (see `HTTPServer.init`).
        let log: Logger
        let maximumConnections: Int
        let connectionCount: Atomic<Int>
        let pool: BlockingPool
        let clock: any ServerClock
        /// Milliseconds a stop gives the requests in flight.
        let gracePeriod: Int64
        /// `SO_SNDBUF` for accepted sockets, or nil for the kernel's.
        let sendBufferBytes: Int?
        /// `HTTPConfiguration.yieldsAfterEachBatch`.
        let yieldsAfterEachBatch: Bool
        /// The observer the connections' settings name without retaining it: held here.
        let observer: (any HTTPObserver)?

        init(
            configuration: HTTPConfiguration, accessLog: Logger?, log: Logger, maximumConnections: Int,
            pool: BlockingPool, clock: any ServerClock, sendBufferBytes: Int? = nil, observer: (any HTTPObserver)? = nil
        ) {
            settings = ConnectionSettings(configuration: configuration, recordsAnswers: accessLog != nil, observer: observer)
            self.accessLog = accessLog
            self.log = log
            self.maximumConnections = maximumConnections
            connectionCount = Atomic(0)
            self.pool = pool
            self.clock = clock
            gracePeriod = HTTPConfiguration.milliseconds(configuration.shutdownGracePeriod)
            self.sendBufferBytes = sendBufferBytes
            yieldsAfterEachBatch = configuration.yieldsAfterEachBatch
            self.observer = observer
        }
    }

    /// A pool job's answer, for the connection `descriptor` had when it was submitted.
    struct Completion: Sendable {
        let descriptor: Int32
        let serial: UInt64
        let response: HTTPResponse
    }

    /// What other threads hand a loop: pool answers and the request to stop, with the
    /// eventfd that wakes it.
    final class Mailbox: Sendable {
        private struct Contents {
            var completions: [Completion] = []
            var stopRequested = false
            /// The loop has exited and closed the eventfd (its number may belong to
            /// another file by now): nothing may write to it.
            var closed = false
        }

        private let wake: EventFD
        private let contents = Mutex(Contents())

        init(wake: EventFD) {
            self.wake = wake
        }

        /// Asks the loop to drain and exit; any thread, any number of times.
        func stop() {
            contents.withLock { c in
                c.stopRequested = true
                if !c.closed { wakeLoop() }
            }
        }

        /// Hands a pool job's answer to the loop; false once the loop has exited.
        func deliver(_ completion: Completion) -> Bool {
            contents.withLock { c in
                guard !c.closed else { return false }
                c.completions.append(completion)
                // Under the lock: the loop closes the eventfd under it too.
                wakeLoop()
                return true
            }
        }

        /// What arrived since the last call.
        func take() -> (stopRequested: Bool, completions: [Completion]) {
            contents.withLock { c in
                defer { c.completions.removeAll(keepingCapacity: true) }
                return (c.stopRequested, c.completions)
            }
        }

        /// Closes the eventfd; later deliveries are refused.
        func close() {
            contents.withLock { c in
                guard !c.closed else { return }
                c.closed = true
                c.completions.removeAll()
                wake.close()
            }
        }

        private func wakeLoop() {
            do {
                try wake.signal()
            } catch {
                // Only EBADF or EINVAL could land here (a bug): the loop still wakes within
                // its sweep interval and reads the mailbox then.
            }
        }
    }

    /// What a loop is made of before it runs: made by `HTTPServer.start()` on its own
    /// thread, so that a failure is reported there, then handed to the loop's thread.
    struct Resources: Sendable {
        let epoll: Epoll
        let wake: EventFD
        let listener: Socket
        let mailbox: Mailbox

        /// An epoll instance watching `listener` and a new eventfd. On failure everything
        /// made is closed, and `listener` is left to the caller.
        static func make(listener: Socket) throws(SystemCallError) -> Resources {
            let epoll = try Epoll.make()
            do throws(SystemCallError) {
                let wake = try EventFD.make()
                do throws(SystemCallError) {
                    try epoll.add(listener.descriptor, .read)
                    try epoll.add(wake.descriptor, .read)
                } catch {
                    wake.close()
                    throw error
                }
                return Resources(epoll: epoll, wake: wake, listener: listener, mailbox: Mailbox(wake: wake))
            } catch {
                epoll.close()
                throw error
            }
        }

        /// Releases everything, for a loop that will never run.
        func discard() {
            mailbox.close()
            listener.close()
            epoll.close()
        }
    }

    private let shared: Shared
    /// This loop's own handler: nothing on the request path is shared with other loops,
    /// so no reference count or lock bounces between cores.
    private let handler: any HTTPHandler
    private let epoll: Epoll
    private let mailbox: Mailbox
    private let wake: EventFD
    private var listener: Socket?
    private var connections: [Connection?] = []
    private var openCount = 0
    private var nextSerial: UInt64 = 0
    /// Numbers this loop's connections for their ids (`RequestID`), from a random seed.
    private let connectionSeed = UInt64.random(in: .min ... .max)
    private var nextConnectionNumber: UInt64 = 0
    private let readBuffer: UnsafeMutableRawBufferPointer
    private let events: UnsafeMutableBufferPointer<EpollEvent>
    private var time: ServerTime
    private var dateSecond: Int64
    private var lastSweep: Int64
    private var draining = false
    private var drainDeadline: Int64 = .max
    private var acceptPausedUntil: Int64?

    private static let sweepInterval: Int64 = 250
    /// Whether there is an access log (checked per request without touching the logger).
    private let logsAnswers: Bool

    init(resources: Resources, shared: Shared, handler: any HTTPHandler) {
        self.shared = shared
        self.handler = handler
        logsAnswers = shared.accessLog != nil
        epoll = resources.epoll
        mailbox = resources.mailbox
        wake = resources.wake
        listener = resources.listener
        readBuffer = .allocate(byteCount: 64 * 1024, alignment: 16)
        events = .allocate(capacity: 512)
        dateSecond = shared.clock.wallSeconds()
        let now = shared.clock.monotonicMilliseconds()
        time = ServerTime(
            milliseconds: now,
            date: shared.settings.serializer.date(wallSeconds: dateSecond))
        lastSweep = now
    }

    deinit {
        readBuffer.deallocate()
        events.deallocate()
    }

    func run() {
        while true {
            let timeout: Int32 = draining ? 50 : Int32(Self.sweepInterval)
            let n: Int
            do {
                n = try epoll.wait(into: events, timeoutMilliseconds: timeout)
            } catch {
                // EBADF, EFAULT, EINVAL: the loop's own state is broken; end it (its
                // connections close below) rather than spin. The other loops go on
                // serving; this one's clients see their connections close.
                shared.log.critical("an event loop stopped", metadata: ["error": .string(error.description)])
                break
            }
            readClock()
            for i in 0..<n {
                let ready = Epoll.readiness(events, i)
                if ready.descriptor == listener?.descriptor.rawValue {
                    acceptConnections()
                } else if ready.descriptor == wake.descriptor.rawValue {
                    readMailbox()
                } else if Int(ready.descriptor) < connections.count, let c = connections[Int(ready.descriptor)],
                    c.tag == ready.tag
                {
                    handle(c, ready)
                }
            }
            // Take turns with the other threads on these cores (see
            // `HTTPConfiguration.yieldsAfterEachBatch`).
            if n > 0 && shared.yieldsAfterEachBatch { yieldTheCore() }
            if time.milliseconds - lastSweep >= Self.sweepInterval {
                lastSweep = time.milliseconds
                sweep()
            }
            if draining && (openCount == 0 || time.milliseconds >= drainDeadline) { break }
        }
        if draining { answerWhatIsLeft() }
        for case let c? in connections { closeConnection(c) }
        listener?.close()
        listener = nil
        mailbox.close()
        epoll.close()
    }

    private func readClock() {
        time.milliseconds = shared.clock.monotonicMilliseconds()
        let second = shared.clock.wallSeconds()
        if second != dateSecond {
            dateSecond = second
            time.date = shared.settings.serializer.date(wallSeconds: second)
        }
    }

    private func readMailbox() {
        do {
            try wake.drain()
        } catch {
            // Only a bug (EBADF) lands here; the mailbox is read all the same.
        }
        let (stopRequested, completions) = mailbox.take()
        // A stop first: answers finished at the same time then say `close`.
        if stopRequested { beginDraining() }
        for completion in completions {
            let fd = Int(completion.descriptor)
            guard fd < connections.count, let c = connections[fd], c.serial == completion.serial else { continue }
            c.job = nil
            perform(c, c.machine.workFinished(completion.response, at: time))
        }
    }

    // MARK: Accepting

    private func acceptConnections() {
        guard let listener else { return }
        // A new connection's silence is timed from its accept, so the clock is read again:
        // the loop may have been held up since it read it for this batch (other events, or
        // a thread starved on a loaded machine), and a stamp from before the hold-up would
        // count it against the client. Its first sweep could then close it as silent before
        // its request came: nginx, which opens a connection per request, answered 502.
        readClock()
        for _ in 0..<256 {
            let socket: Socket
            do {
                guard case .done(let accepted) = try listener.accept() else { return }
                socket = accepted
            } catch {
                switch error.errno {
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors: stop polling the listener briefly instead of spinning.
                    pauseAccepting()
                default:
                    // EPERM (a firewall), EPROTO: that connection is lost, the next may not be.
                    break
                }
                return
            }
            if shared.connectionCount.add(1, ordering: .relaxed).newValue > shared.maximumConnections {
                shared.connectionCount.subtract(1, ordering: .relaxed)
                refuse(socket)
                continue
            }
            nextConnectionNumber &+= 1
            let machine = ConnectionStateMachine(
                settings: shared.settings, at: time.milliseconds,
                connectionTag: RequestID.tag(of: RequestID.connection(seed: connectionSeed, number: nextConnectionNumber)))
            let interest = machine.interest
            nextSerial += 1
            do {
                try socket.setNoDelay()
                if let bytes = shared.sendBufferBytes { try socket.setSendBufferSize(bytes) }
                try epoll.add(socket.descriptor, interest, tag: Connection.tag(nextSerial))
            } catch {
                // A socket that cannot be set up or watched cannot be served (epoll_ctl's
                // ENOSPC is the per-user watch limit, fs.epoll.max_user_watches).
                shared.log.error("a connection could not be set up", metadata: ["error": "\(error)"])
                socket.close()
                shared.connectionCount.subtract(1, ordering: .relaxed)
                continue
            }
            let c = Connection(socket: socket, serial: nextSerial, machine: machine, registered: interest)
            let fd = Int(socket.descriptor.rawValue)
            if fd >= connections.count {
                connections.append(contentsOf: repeatElement(nil, count: fd + 1 - connections.count + 64))
            }
            if logsAnswers { c.peer = peerAddress(socket.descriptor.rawValue) }
            connections[fd] = c
            openCount += 1
        }
    }

    /// Past the connection cap: one 503 and close.
    private func refuse(_ socket: Socket) {
        shared.settings.observer?.refusedConnection()
        let refusal = shared.settings.serializer.protocolError(
            HTTPError(503, "the server is at its connection limit; retry later"), date: time.date)
        do {
            _ = try refusal.withUnsafeBytes { bytes throws(SystemCallError) in try socket.send(bytes) }
        } catch {
            // The client is gone already; it is closed either way.
        }
        socket.close()
    }

    private func pauseAccepting() {
        guard let listener else { return }
        acceptPausedUntil = time.milliseconds + 100
        do {
            try epoll.remove(listener.descriptor)
        } catch {
            // Cannot happen for a watched descriptor; if it did, accept would fail again
            // at the next wake-up and pause again.
        }
    }

    private func resumeAccepting() {
        guard let paused = acceptPausedUntil, time.milliseconds >= paused, let listener else { return }
        do {
            try epoll.add(listener.descriptor, .read)
            acceptPausedUntil = nil
        } catch {
            acceptPausedUntil = time.milliseconds + 100  // try again at the next sweep
        }
    }

    // MARK: Events

    private func handle(_ c: Connection, _ ready: Readiness) {
        if (ready.failed || ready.hungUp) && !ready.isReadable {
            perform(c, c.machine.peerReset())
            return
        }
        if ready.isWritable {
            perform(c, .write)
            guard isOpen(c) else { return }
        }
        guard ready.isReadable || ready.peerClosedInput || ready.hungUp || ready.failed else { return }
        if c.machine.wantsInput {
            read(c)
        } else if ready.failed || ready.hungUp {
            perform(c, c.machine.peerReset())
        } else if ready.peerClosedInput {
            perform(c, c.machine.peerClosedInput())
        }
    }

    @inline(__always)
    private func read(_ c: Connection) {
        let result: IOResult<Int>
        do {
            result = try c.socket.receive(into: readBuffer)
        } catch {
            perform(c, c.machine.peerReset())
            return
        }
        switch result {
        case .wouldBlock:
            return
        case .done(0):
            perform(c, c.machine.receivedEndOfInput(at: time))
        case .done(let n):
            perform(c, c.machine.received(UnsafeRawBufferPointer(rebasing: readBuffer[..<n]), at: time))
        }
    }

    /// Carries out `action` and whatever the state machine asks next, until it asks for
    /// nothing; then brings epoll's interest in line with the machine's.
    private func perform(_ c: Connection, _ action: ConnectionAction) {
        var action = action
        while true {
            switch action {
            case .none:
                logAnswers(c)
                updateInterest(c)
                return
            case .handle:
                let handler = handler
                action = c.machine.respond(at: time) { handler.respond(to: $0) }
            case .submit(let kind, let make):
                action = submit(c, kind, make)
            case .write:
                logAnswers(c)  // before the answer goes out: a client that has it finds it logged
                action = write(c)
            case .cancelWork:
                action = c.machine.workCancelled(c.job?.cancel() ?? true)
            case .shutWrite:
                logAnswers(c)
                do {
                    try c.socket.shutdown(.write)
                } catch {
                    closeConnection(c)  // ENOTCONN: the peer is gone already
                    return
                }
                updateInterest(c)
                return
            case .close:
                logAnswers(c)
                closeConnection(c)
                return
            }
        }
    }

    private func submit(_ c: Connection, _ kind: BlockingKind, _ make: @escaping @Sendable () -> HTTPResponse)
        -> ConnectionAction
    {
        let mailbox = mailbox
        let descriptor = c.socket.descriptor.rawValue
        let serial = c.serial
        let job = shared.pool.submit(kind) {
            // Dropped if the loop has exited meanwhile: nobody is left to answer.
            _ = mailbox.deliver(Completion(descriptor: descriptor, serial: serial, response: make()))
        }
        guard let job else { return c.machine.queueFull(kind, at: time) }
        c.job = job
        return c.machine.submitted()
    }

    /// One write of the front of the output: a gathering `sendmsg` of its leading bytes,
    /// or `sendfile` of its leading file range.
    @inline(__always)
    private func write(_ c: Connection) -> ConnectionAction {
        let socket = c.socket
        let outcome: WriteOutcome
        switch c.machine.output.nextWrite {
        case nil:
            return c.machine.wrote(0, at: time)
        case .bytes:
            let more = c.machine.output.fileFollowsLeadingBytes
            outcome = c.machine.output.withLeadingBytes { vectors in
                WriteOutcome { () throws(SystemCallError) in try socket.send(vectors, more: more) }
            }
        case let .file(file, offset, count):
            outcome = WriteOutcome { () throws(SystemCallError) in try socket.send(file: file, offset: offset, count: count) }
        }
        switch outcome {
        case .wrote(let n) where n > 0:
            return c.machine.wrote(n, at: time)
        case .wrote:
            // sendfile found the file shorter than its range: the promised length cannot
            // be sent.
            return c.machine.writeFailed()
        case .wouldBlock:
            return c.machine.writeWouldBlock(at: time)
        case .failed:
            return c.machine.writeFailed()  // EPIPE, ECONNRESET: the client is gone
        }
    }

    /// What one write did, without the error's text (the connection closes either way).
    private enum WriteOutcome {
        case wrote(Int)
        case wouldBlock
        case failed

        @inline(__always)
        init(_ call: () throws(SystemCallError) -> IOResult<Int>) {
            do {
                switch try call() {
                case .done(let n): self = .wrote(n)
                case .wouldBlock: self = .wouldBlock
                }
            } catch {
                self = .failed
            }
        }
    }

    /// Brings epoll's interest in `c` in line with its machine's. `c` must be open: every
    /// caller of `perform` passes an open connection, and `perform` returns as soon as it
    /// closes one. (Not checking saves reading the connection table, an access the
    /// run-time exclusivity check must watch, on every request.)
    @inline(__always)
    private func updateInterest(_ c: Connection) {
        assert(isOpen(c), "interest updated for a closed connection")
        let wanted = c.machine.interest
        guard wanted != c.registered else { return }
        do {
            try epoll.modify(c.socket.descriptor, wanted, tag: c.tag)
            c.registered = wanted
        } catch {
            // A connection whose events cannot be watched cannot be served.
            closeConnection(c)
        }
    }

    private func isOpen(_ c: Connection) -> Bool {
        let fd = Int(c.socket.descriptor.rawValue)
        return fd < connections.count && connections[fd] === c
    }

    private func closeConnection(_ c: Connection) {
        guard isOpen(c) else { return }
        // Work queued for this connection is dropped before it runs.
        c.job?.cancel()
        c.job = nil
        connections[Int(c.socket.descriptor.rawValue)] = nil
        openCount -= 1
        // Out of epoll first: closing does that only when no copy of the descriptor is left
        // (a child being started holds one until its exec), and the copy's events would
        // come under a number the next connection may take. (A removal that fails leaves
        // a registration whose events the tag check drops.)
        try? epoll.remove(c.socket.descriptor)
        c.socket.close()
        shared.connectionCount.subtract(1, ordering: .relaxed)
    }

    /// Logs the answers `c` has made since the last call, if there is an access log.
    @inline(__always)
    private func logAnswers(_ c: Connection) {
        if logsAnswers { writeAccessLog(c) }
    }

    private func writeAccessLog(_ c: Connection) {
        guard let log = shared.accessLog else { return }
        for answer in c.machine.takeAnswers() {
            guard let head = answer.head else {
                log.info(
                    "request",
                    metadata: [
                        "client": .string(c.peer), "status": .stringConvertible(answer.status),
                        "error": .string(answer.error ?? ""), "request_id": .string(answer.requestID),
                        "duration_ms": .stringConvertible(answer.milliseconds),
                    ])
                continue
            }
            let method: String =
                switch head.method {
                case .get: "GET"
                case .head: "HEAD"
                case .options: "OPTIONS"
                case .other: "OTHER"
                }
            log.info(
                "request",
                metadata: [
                    "client": .string(c.peer),
                    "method": .string(method),
                    "path": .string(LoggedPath.text(of: head.target)),
                    "status": .stringConvertible(answer.status),
                    "bytes": .stringConvertible(answer.bytes),
                    "version": .string(head.version == .http10 ? "1.0" : "1.1"),
                    "duration_ms": .stringConvertible(answer.milliseconds),
                    "request_id": .string(answer.requestID),
                ])
        }
    }

    // MARK: Timers and shutdown

    /// Gives every connection the time (timeouts), and resumes accepting after a pause.
    private func sweep() {
        resumeAccepting()
        for i in connections.indices {
            guard let c = connections[i] else { continue }
            perform(
                c,
                c.machine.tick(
                    at: time,
                    hasUnreadInput: {
                        // Asked only of a connection past a silence deadline. The clock was
                        // read after epoll_wait: input that came in between is not silence.
                        do {
                            return try c.socket.readableBytes() > 0
                        } catch {
                            return false  // cannot happen on a connected socket: judged as before
                        }
                    }))
        }
    }

    private func beginDraining() {
        guard !draining else { return }
        draining = true
        drainDeadline = time.milliseconds + shared.gracePeriod
        if let listener {
            try? epoll.remove(listener.descriptor)  // a child being started may hold a copy
            listener.close()
        }
        listener = nil
        for i in connections.indices {
            guard let c = connections[i] else { continue }
            perform(
                c,
                c.machine.serverStopping(hasUnreadInput: {
                    do {
                        return try c.socket.readableBytes() > 0
                    } catch {
                        return true  // unknown: keep it, a request may be there
                    }
                }))
        }
    }

    /// At the end of the grace period: every request still in flight is answered 503 with
    /// `Connection: close` (what one write can send), and its queued work dropped.
    private func answerWhatIsLeft() {
        for i in connections.indices {
            guard let c = connections[i] else { continue }
            perform(c, c.machine.gracePeriodEnded(at: time))
            guard isOpen(c), c.machine.isLingering else { continue }
            // Unread input (pipelined requests) would make close() send a reset, which can
            // destroy the answer before the client reads it: read it away first.
            var budget = 1 << 20
            while budget > 0 {
                do {
                    guard case .done(let n) = try c.socket.receive(into: readBuffer), n > 0 else { break }
                    budget -= n
                } catch {
                    break  // reset: nothing left to protect
                }
            }
        }
    }
}

/// The peer's address of a connected socket, `1.2.3.4:5678` or `[::1]:5678`; empty if unknown.
private func peerAddress(_ fd: Int32) -> String {
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    let ok = withUnsafeMutablePointer(to: &storage) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) == 0 }
    }
    guard ok else { return "" }
    var host = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    switch Int32(storage.ss_family) {
    case AF_INET:
        return withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                var address = sin.pointee.sin_addr
                guard inet_ntop(AF_INET, &address, &host, socklen_t(host.count)) != nil else { return "" }
                return "\(nulTerminated(host)):\(UInt16(bigEndian: sin.pointee.sin_port))"
            }
        }
    case AF_INET6:
        return withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                var address = sin6.pointee.sin6_addr
                guard inet_ntop(AF_INET6, &address, &host, socklen_t(host.count)) != nil else { return "" }
                return "[\(nulTerminated(host))]:\(UInt16(bigEndian: sin6.pointee.sin6_port))"
            }
        }
    default:
        return ""
    }
}

/// The text of a NUL-terminated C string held in an array (what `inet_ntop` writes).
private func nulTerminated(_ characters: [CChar]) -> String {
    String(decoding: characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
