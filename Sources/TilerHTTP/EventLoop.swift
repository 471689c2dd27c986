import Dispatch
import Glibc
import Logging
import Synchronization
import TilerSystem

/// An epoll loop on one thread with its own listening socket. It performs what each
/// connection's `ConnectionStateMachine` asks (reads, writes, pool jobs, interest,
/// closing) and nothing else: every HTTP decision is the state machine's.
final class EventLoop {
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
