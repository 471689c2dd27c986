import TilerSystem
/// What every connection of a server shares: limits, timeouts and the serializer.
struct ConnectionSettings: Sendable {
    var parserLimits: HTTPRequestParser.Limits
    /// Milliseconds a keep-alive connection may sit without a request.
    var idleTimeout: Int64
    /// Milliseconds a request head may take to arrive once its first byte has.
    var requestHeadTimeout: Int64
    /// Milliseconds queued output may wait for the client to read it without progress.
    var writeTimeout: Int64
    /// Milliseconds an error answer is given to reach the client before the connection
    /// closes: the write side is shut and input read and dropped meanwhile.
    var lingerTime: Int64 = 2000
    /// Output queued on one connection past which it stops reading (backpressure).
    var maximumQueuedOutputBytes: Int
    var serializer: ResponseSerializer
    /// Whether answers are kept for the access log (`ConnectionStateMachine.takeAnswers`).
    var recordsAnswers: Bool
    /// Told of every answer and refused connection (metrics), or nil. Unretained: the
    /// event loop's `Shared` holds it for as long as any connection can run, and a
    /// retained reference would be a retain and a release on every answer.
    unowned(unsafe) var observer: (any HTTPObserver)?

    init(configuration c: HTTPConfiguration, recordsAnswers: Bool, observer: (any HTTPObserver)? = nil) {
        parserLimits = c.parserLimits
        idleTimeout = HTTPConfiguration.milliseconds(c.idleTimeout)
        requestHeadTimeout = HTTPConfiguration.milliseconds(c.requestHeadTimeout)
        writeTimeout = HTTPConfiguration.milliseconds(c.writeTimeout)
        maximumQueuedOutputBytes = c.maximumQueuedOutputBytes
        serializer = ResponseSerializer(configuration: c)
        self.recordsAnswers = recordsAnswers
        self.observer = observer
    }
}

/// What the event loop must do next for a connection, as the state machine decides.
/// Some actions ask for a report (the method named), which returns the next action; the
/// others end the exchange until the next event.
enum ConnectionAction {
    /// Nothing until the next event.
    case none
    /// Ask the handler for the response to the GET or HEAD in `requestHead`; report
    /// `respond(_:at:)`, or let the handler read the head in place with
    /// `respond(at:with:)`. (The head is not carried here: copying it would cost a
    /// retain and a release of each of its arrays.)
    case handle
    /// Run `make` in `kind`'s lane of the pool; report `submitted()`, or
    /// `queueFull(_:at:)` if the lane refused it. Its result comes with
    /// `workFinished(_:at:)`.
    case submit(BlockingKind, @Sendable () -> HTTPResponse)
    /// Write the front of `output` (one `sendmsg` of its leading bytes, or one `sendfile`
    /// of its leading file range); report `wrote(_:at:)`, `writeWouldBlock(at:)` or
    /// `writeFailed()`.
    case write
    /// Cancel the pool job making this connection's answer; report `workCancelled(_:)`.
    case cancelWork
    /// Shut the socket's write side: the last answer is out, input is now read and dropped
    /// until the peer closes or the linger time ends.
    case shutWrite
    /// Close the socket (cancelling any pool job first).
    case close
}

/// One HTTP/1.1 connection's life, as a value: events in, actions out, no I/O.
///
/// The event loop reads and writes the socket and reports what happened (`received`,
/// `wrote`, `tick` with the time, …); each report returns the next `ConnectionAction`,
/// and `interest` says what the socket must be watched for. Everything about HTTP on one
/// connection lives here: parsing (pipelining included), keep-alive and `Connection:
/// close`, HTTP/1.0, answering OPTIONS and other methods, the output queue and its
/// backpressure, waiting for the blocking pool with the requests behind held back, the
/// idle, request-head, write and linger timeouts, and stopping.
///
/// ```
///                 ┌───────── answer written (keep-alive) ──────────┐
///                 ▼                                                 │
///   ──▶ readingHead ── head ──▶ (handler) ── blocking ──▶ waitingOnPool
///          │    ▲                     │                      │
///          │    └─ output drained ── writing ◀── output over the limit
///          │                                                 │
///          ├── Connection: close / EOF / stop ──▶ draining ──▶ closed
///          └── bad request / head timeout ──▶ draining ──▶ lingering ──▶ closed
/// ```
struct ConnectionStateMachine {
    /// A request whose answer is being made on the pool.
    struct PendingAnswer {
        /// Its head, for HEAD, the validators of a 304, and the access log.
        var head: HTTPRequestHead
        /// Whether the request allowed keep-alive (re-checked against a stop when the
        /// answer comes).
        var keepAlive: Bool
        /// Whether a hang-up (the client closing its side) is watched for. It stops once
        /// the work has started: its answer is then delivered to a half-closed client, and
        /// a level-triggered hang-up must not wake the loop over and over.
        var watchingForHangUp: Bool
    }

    enum State {
        /// Reading a request head. `since` is when its first byte (an empty line counts)
        /// arrived; nil between requests. Earlier answers may still be being written.
        case readingHead(since: Int64?)
        /// An answer is being made on the pool (`pending` says for what). Nothing more is
        /// read: input that came behind the request is held, so answers keep their order.
        case waitingOnPool
        /// Output reached `maximumQueuedOutputBytes`: nothing is read or parsed until the
        /// client has read it (held input waits). `headSince` as in `readingHead`.
        case writing(headSince: Int64?)
        /// The last answer is queued (`Connection: close`, the client closed its side, a
        /// stop, an error): write it, then close, or after an error shut the write side
        /// and linger until `lingerUntil`.
        case draining(lingerUntil: Int64?)
        /// The write side is shut after an error answer; input is read and dropped until
        /// the client closes or `until`, so the client reads the answer instead of a reset.
        case lingering(until: Int64)
        case closed
    }

    /// An answer made, for the access log.
    struct Answer {
        /// The request, or nil for one that never parsed (`error` says why).
        var head: HTTPRequestHead?
        /// The id the answer to a request that never parsed carried.
        var unreadRequestID = ""
        /// The id its answer carried (`X-Request-Id`), made when it is logged.
        var requestID: String { head?.requestID ?? unreadRequestID }
        var error: String?
        var status: Int
        var bytes: Int
        /// Milliseconds from the request's first byte until its answer was queued (time on
        /// the blocking pool included), to the event loop's clock.
        var milliseconds: Int64
    }

    let settings: ConnectionSettings
    /// (Every payload is a number: setting the state, twice a request, releases nothing.)
    private(set) var state: State = .readingHead(since: nil)
    /// The request whose answer the pool is making, while `waitingOnPool`.
    private var pending: PendingAnswer?
    private(set) var parser: HTTPRequestParser
    /// What is still to be sent.
    private(set) var output = OutputQueue()
    /// Input read but not parsed yet, from `heldStart`: requests pipelined behind one
    /// being answered, or held back while output is over its limit.
    private var held: [UInt8] = []
    private var heldStart = 0
    /// When the connection last made progress, reading or writing.
    private(set) var lastActivity: Int64
    /// Since when queued output has been waiting for the client without any progress; nil
    /// when nothing waits. Reads do not reset it: a client that keeps sending but never
    /// reads is still held to the write timeout.
    private(set) var writeStalledSince: Int64?
    /// Request heads parsed so far. Until the first, silence is held to the request-head
    /// timeout rather than the longer idle timeout.
    private(set) var requestsParsed = 0
    /// The server is stopping: answers say `Connection: close`.
    private(set) var stopping = false
    private var answers: [Answer] = []
    /// When the request being parsed or answered began (its first byte), for the log.
    private var requestStarted: Int64 = 0

    /// The connection's id as `RequestID.tag` writes it, for the ids of its requests
    /// (`X-Request-Id`); empty for none (tests).
    let connectionTag: [UInt8]

    init(settings: ConnectionSettings, at now: Int64, connectionTag: [UInt8] = []) {
        self.settings = settings
        self.connectionTag = connectionTag
        parser = HTTPRequestParser(limits: settings.parserLimits)
        if !connectionTag.isEmpty { parser.setConnectionTag(connectionTag) }
        lastActivity = now
    }

    // MARK: What the loop asks

    /// What the socket must be watched for now.
    var interest: Interest {
        switch state {
        case .readingHead: output.isEmpty ? [.read, .hangUp] : [.read, .hangUp, .write]
        case .waitingOnPool:
            Interest(pending?.watchingForHangUp == true ? [.hangUp] : []).union(output.isEmpty ? [] : [.write])
        case .writing, .draining: output.isEmpty ? [] : [.write]
        case .lingering: [.read, .hangUp]
        case .closed: []
        }
    }

    /// Whether readable input should be read (and passed to `received`), rather than
    /// left in the socket.
    var wantsInput: Bool {
        switch state {
        case .readingHead, .lingering: true
        case .waitingOnPool, .writing, .draining, .closed: false
        }
    }

    var isLingering: Bool {
        if case .lingering = state { return true }
        return false
    }

    /// Bytes read and held back, not yet parsed.
    var heldBytes: Int { held.count - heldStart }

    /// The request `.handle` asks about (valid until the next report).
    var requestHead: HTTPRequestHead { parser.head }

    /// The answers made since the last call (only when `settings.recordsAnswers`).
    mutating func takeAnswers() -> [Answer] {
        defer { answers.removeAll(keepingCapacity: true) }
        return answers
    }

    // MARK: Input

    /// Bytes arrived.
    mutating func received(_ bytes: UnsafeRawBufferPointer, at time: ServerTime) -> ConnectionAction {
        switch state {
        case .readingHead:
            lastActivity = time.milliseconds
            if heldBytes > 0 {
                held.append(contentsOf: bytes)
                return continueParsing(at: time)
            }
            let (consumed, action) = parse(bytes, at: time)
            if consumed < bytes.count && keepsInput {
                held.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[consumed...]))
            }
            return action ?? afterInput()
        case .waitingOnPool, .writing:
            // Not asked for (not watched); kept in order all the same.
            held.append(contentsOf: bytes)
            return .none
        case .draining, .lingering, .closed:
            return .none  // dropped
        }
    }

    /// The client closed its side (a read found the end of the stream).
    mutating func receivedEndOfInput(at time: ServerTime) -> ConnectionAction {
        switch state {
        case .readingHead:
            // Answer what was asked, then close.
            if output.isEmpty { return close() }
            state = .draining(lingerUntil: nil)
            dropHeldInput()
            return .write
        case .lingering:
            return close()
        case .waitingOnPool, .writing, .draining, .closed:
            return .none
        }
    }

    /// The client closed its side while its answer waits for the pool (a hang-up seen
    /// without reading).
    mutating func peerClosedInput() -> ConnectionAction {
        guard case .waitingOnPool = state, pending?.watchingForHangUp == true else { return .none }
        return .cancelWork
    }

    /// Whether `cancelWork` dropped the job before a thread took it. If it did, the client
    /// has left: close (as nginx does for a client that aborts). If not, the work is
    /// running: let it finish and deliver the answer, which a half-closed client may read.
    mutating func workCancelled(_ dropped: Bool) -> ConnectionAction {
        guard case .waitingOnPool = state else { return .none }
        if dropped { return close() }
        pending?.watchingForHangUp = false
        return .none
    }

    /// The socket failed (reset, or an error pending on it).
    mutating func peerReset() -> ConnectionAction { close() }

    // MARK: Answers

    /// Answers the request `.handle` asked about with `handler`'s response, as
    /// `respond(_:at:)` does. The handler reads the head where it is: a copy would retain
    /// and release each of its arrays.
    mutating func respond(at time: ServerTime, with handler: (HTTPRequestHead) -> HTTPResponse) -> ConnectionAction {
        respond(handler(parser.head), at: time)
    }

    /// The handler's response to the head `.handle` gave.
    mutating func respond(_ response: HTTPResponse, at time: ServerTime) -> ConnectionAction {
        if let work = response.blockingWork { return .submit(work.kind, work.make) }
        let keepAlive = parser.head.keepAlive && !stopping
        let written = settings.serializer.write(
            response, for: parser.head, keepAlive: keepAlive, date: time.date,
            into: &output)
        record(parser.head, written, at: time)
        if !keepAlive { return closeAfterAnswer() }
        return continueParsing(at: time)
    }

    /// The pool took the work `.submit` asked for.
    mutating func submitted() -> ConnectionAction {
        let head = parser.head
        pending = PendingAnswer(head: head, keepAlive: head.keepAlive, watchingForHangUp: true)
        state = .waitingOnPool
        return output.isEmpty ? .none : .write  // earlier answers still go out meanwhile
    }

    /// The pool's lane refused the work: its queue is full.
    mutating func queueFull(_ kind: BlockingKind, at time: ServerTime) -> ConnectionAction {
        let message =
            switch kind {
            case .read: "too many tile reads are waiting for the disk; retry later"
            case .render: "too many images are waiting to be drawn; retry later"
            case .storage: "too many reads are waiting for object storage; retry later"
            }
        return respond(.withHeaders([("Retry-After", "1")], .error(HTTPError(503, message))), at: time)
    }

    /// The pool finished the answer. Then the requests held behind it are answered.
    mutating func workFinished(_ response: HTTPResponse, at time: ServerTime) -> ConnectionAction {
        guard case .waitingOnPool = state, let pending else { return .none }
        self.pending = nil
        state = .readingHead(since: nil)
        lastActivity = time.milliseconds
        // An answer finished after a stop began closes its connection.
        let keepAlive = pending.keepAlive && !stopping
        let written = settings.serializer.write(
            response, for: pending.head, keepAlive: keepAlive, date: time.date,
            into: &output)
        record(pending.head, written, at: time)
        if !keepAlive { return closeAfterAnswer() }
        return continueParsing(at: time)
    }

    // MARK: Output

    /// `n` bytes (> 0) from the front of `output` were written.
    mutating func wrote(_ n: Int, at time: ServerTime) -> ConnectionAction {
        output.consume(n)
        if n > 0 {
            lastActivity = time.milliseconds
            writeStalledSince = nil
        }
        return output.isEmpty ? outputDrained(at: time) : .write
    }

    /// The socket's buffer is full: wait until it is writable.
    mutating func writeWouldBlock(at time: ServerTime) -> ConnectionAction {
        if writeStalledSince == nil { writeStalledSince = time.milliseconds }
        return .none
    }

    /// A write failed (the peer reset), or a file range ended before its length.
    mutating func writeFailed() -> ConnectionAction { close() }

    private mutating func outputDrained(at time: ServerTime) -> ConnectionAction {
        writeStalledSince = nil
        switch state {
        case .readingHead:
            if stopping && parser.isIdle { return close() }
            return .none
        case .waitingOnPool, .lingering, .closed:
            return .none
        case .writing(let since):
            // Backpressure relieved: answer what was held back and read again.
            state = .readingHead(since: since)
            return continueParsing(at: time)
        case .draining(let lingerUntil):
            guard let lingerUntil else { return close() }
            state = .lingering(until: lingerUntil)
            return .shutWrite
        }
    }

    // MARK: Time and stopping

    /// The loop's periodic look at the time: closes connections past their idle,
    /// request-head, write or linger deadlines (a late request head is answered 408).
    ///
    /// `hasUnreadInput` says whether the socket holds input the loop has not read yet; it is
    /// asked only of a connection past its idle or request-head deadline. If it does, the
    /// connection is not judged now: the loop reads its clock after waiting for events, so
    /// input can arrive in between (a starved loop can be held up there for seconds), and
    /// closing then would drop a request that came in time (with a reset, as it is unread).
    /// The loop reads it next, and the next tick judges what has arrived: a head still
    /// incomplete then is answered 408 (its deadline counts from its first byte).
    mutating func tick(at time: ServerTime, hasUnreadInput: () -> Bool = { false }) -> ConnectionAction {
        let now = time.milliseconds
        switch state {
        case .closed:
            return .none
        case .lingering(let until):
            if now >= until || now - lastActivity > settings.lingerTime { return close() }
            return .none
        case .draining(let lingerUntil?):
            if now >= lingerUntil { return close() }
            return .none
        case .readingHead, .waitingOnPool, .writing, .draining(nil):
            break
        }
        // Output the client does not read, however much else it sends.
        if let stalled = writeStalledSince, now - stalled > settings.writeTimeout { return close() }
        switch state {
        case .readingHead(let since?):
            // A request head (empty lines before it included) must be complete within
            // the head timeout, whatever arrives meanwhile.
            if now - since > settings.requestHeadTimeout && !hasUnreadInput() {
                return protocolError(HTTPError(408, "the request head took too long to arrive"), at: time)
            }
        case .readingHead(nil):
            if !output.isEmpty {
                if now - lastActivity > settings.writeTimeout { return close() }
            } else {
                let limit =
                    requestsParsed > 0
                    ? settings.idleTimeout : min(settings.idleTimeout, settings.requestHeadTimeout)
                if now - lastActivity > limit && !hasUnreadInput() { return close() }
            }
        case .waitingOnPool, .writing, .draining, .lingering, .closed:
            // Its answer is being made, or the server stopped reading (backpressure): no
            // request head can be late.
            break
        }
        return .none
    }

    /// The server is stopping. An idle connection closes, unless a request has arrived
    /// that the loop has not read yet (`hasUnreadInput`): it is in flight too, and is read
    /// and answered with `Connection: close`, like every answer from now on.
    mutating func serverStopping(hasUnreadInput: () -> Bool) -> ConnectionAction {
        stopping = true
        if case .readingHead = state, parser.isIdle, output.isEmpty, heldBytes == 0, !hasUnreadInput() {
            return close()
        }
        return .none
    }

    /// The stop's grace period is over. A request still in flight (its answer waiting for
    /// the pool, its head still arriving, or held back) is answered 503 with `Connection:
    /// close`; the loop writes what it can, shuts the write side and closes.
    mutating func gracePeriodEnded(at time: ServerTime) -> ConnectionAction {
        switch state {
        case .waitingOnPool:
            break
        case .readingHead, .writing:
            guard !parser.isIdle || heldBytes > 0 else { return .none }
        case .draining, .lingering, .closed:
            return .none
        }
        return protocolError(
            HTTPError(503, "the server is shutting down; retry the request"), at: time,
            lingerUntil: time.milliseconds)
    }

    // MARK: Parsing

    /// Whether bytes left over after a parse are kept (to be parsed later), rather than
    /// dropped because the connection is ending.
    private var keepsInput: Bool {
        switch state {
        case .readingHead, .waitingOnPool, .writing: true
        case .draining, .lingering, .closed: false
        }
    }

    /// Parses held input until it runs out or something must wait.
    private mutating func continueParsing(at time: ServerTime) -> ConnectionAction {
        while heldBytes > 0 {
            // Consumed in place: each held byte is copied once, when it is held.
            let bytes = held
            let start = heldStart
            let (consumed, action) = bytes.withUnsafeBytes { parse(UnsafeRawBufferPointer(rebasing: $0[start...]), at: time) }
            if keepsInput {
                heldStart += consumed
            } else {
                heldStart = held.count
            }
            if heldStart == held.count {
                held.removeAll(keepingCapacity: true)
                heldStart = 0
            }
            if let action { return action }
        }
        return afterInput()
    }

    /// What to do once all input is parsed.
    private mutating func afterInput() -> ConnectionAction {
        if !output.isEmpty { return .write }
        if stopping, case .readingHead = state, parser.isIdle { return close() }
        return .none
    }

    /// Parses requests from `bytes` and answers those the server answers itself, until
    /// one needs the handler, the output is full, or the connection ends. Returns the
    /// bytes consumed and the action that stopped it (nil: all consumed, more needed).
    private mutating func parse(_ bytes: UnsafeRawBufferPointer, at time: ServerTime) -> (Int, ConnectionAction?) {
        var offset = 0
        while offset < bytes.count {
            guard case .readingHead(let since) = state else { return (offset, ConnectionAction.none) }
            if output.count >= settings.maximumQueuedOutputBytes {
                state = .writing(headSince: since)
                return (offset, .write)
            }
            if parser.isIdle { requestStarted = time.milliseconds }
            state = .readingHead(since: parser.isIdle ? time.milliseconds : since)
            let result = parser.parse(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
            offset += result.consumed
            switch result.status {
            case .needMore:
                continue
            case .complete:
                state = .readingHead(since: nil)
                requestsParsed += 1
                parser.setRequestNumber(requestsParsed)
                switch parser.head.method {
                case .get, .head:
                    return (offset, .handle)
                case .options:
                    let keepAlive = parser.head.keepAlive && !stopping
                    settings.serializer.writeOptions(
                        for: parser.head, keepAlive: keepAlive, date: time.date,
                        into: &output)
                    record(parser.head, .init(status: 204, bytes: 0), at: time)
                    if !keepAlive { return (offset, closeAfterAnswer()) }
                case .other:
                    let keepAlive = parser.head.keepAlive && !stopping
                    let written = settings.serializer.write(
                        .error(HTTPError(405, "only GET, HEAD and OPTIONS are allowed")), for: parser.head,
                        keepAlive: keepAlive, date: time.date, into: &output)
                    record(parser.head, written, at: time)
                    if !keepAlive { return (offset, closeAfterAnswer()) }
                }
            case .failed(let error):
                return (offset, protocolError(HTTPError(error.status, error.reason), at: time))
            }
        }
        return (offset, nil)
    }

    // MARK: Endings

    /// The answer just queued is the last: write it, then close.
    private mutating func closeAfterAnswer() -> ConnectionAction {
        state = .draining(lingerUntil: nil)
        dropHeldInput()
        return .write
    }

    /// Answers a request that cannot be served (malformed, too large, too slow) and ends
    /// the connection: the answer, then the write side shut and input dropped until the
    /// linger ends, so the client reads the answer instead of a reset.
    private mutating func protocolError(_ error: HTTPError, at time: ServerTime, lingerUntil: Int64? = nil)
        -> ConnectionAction
    {
        // The request cut off on the pool, or the one that could not be read: the next
        // number on the connection.
        let number = pending?.head.requestNumber ?? requestsParsed + 1
        settings.serializer.writeProtocolError(
            error, date: time.date, connectionTag: connectionTag, requestNumber: number, into: &output)
        let milliseconds = max(0, time.milliseconds - requestStarted)
        settings.observer?.answeredUnreadRequest(status: error.status, bytes: error.jsonBody.count, milliseconds: milliseconds)
        if settings.recordsAnswers {
            answers.append(
                Answer(
                    head: nil, unreadRequestID: RequestID.text(tag: connectionTag, number: number), error: error.message,
                    status: error.status, bytes: error.jsonBody.count, milliseconds: milliseconds))
        }
        state = .draining(lingerUntil: lingerUntil ?? time.milliseconds + settings.lingerTime)
        pending = nil  // a request the pool was answering (the stop's 503 answers it)
        dropHeldInput()
        return .write
    }

    private mutating func close() -> ConnectionAction {
        state = .closed
        pending = nil
        dropHeldInput()
        output.reset()
        return .close
    }

    private mutating func dropHeldInput() {
        held.removeAll()
        heldStart = 0
    }

    /// Tells the observer of an answer, and keeps it for the access log.
    @inline(__always)
    private mutating func record(_ head: HTTPRequestHead, _ written: ResponseSerializer.Written, at time: ServerTime) {
        if let observer = settings.observer {
            observer.answered(
                head, status: written.status, bytes: written.bytes, milliseconds: max(0, time.milliseconds - requestStarted))
        }
        guard settings.recordsAnswers else { return }
        answers.append(
            Answer(
                head: head, error: nil, status: written.status, bytes: written.bytes,
                milliseconds: max(0, time.milliseconds - requestStarted)))
    }
}
