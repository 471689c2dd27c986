import Foundation
import Glibc
import Testing
import TilerSystem
import TilerTestSupport
@testable import TilerHTTP

/// Plays the event loop for one connection, against a simulated socket and a clock that
/// moves only when the test says: every timeout is tested at its exact edge, without
/// waiting for it.
struct ConnectionDriver {
    var machine: ConnectionStateMachine
    var time = ServerTime(milliseconds: 1_000_000, wallSeconds: 1_700_000_000)
    /// The handler: the response to each GET or HEAD.
    var handler: (HTTPRequestHead) -> HTTPResponse = { head in
        .bytes(status: 200, contentType: "text/plain", body: head.target, cacheControl: nil)
    }
    /// Targets the handler was asked for, in order.
    var handled: [String] = []
    /// Bytes the socket takes before it blocks; nil: as many as offered.
    var room: Int?
    /// What the client has received.
    var received: [UInt8] = []
    /// Work handed to the pool and not yet finished.
    var pool: [@Sendable () -> HTTPResponse] = []
    /// Whether the pool takes work (false: its queue is full).
    var poolTakesWork = true
    /// What `cancelWork` finds: true, the job was still queued and is dropped.
    var jobStillQueued = true
    var writeShut = false
    var closed = false
    /// The number of write system calls made.
    var writes = 0

    init(_ configure: (inout HTTPConfiguration) -> Void = { _ in }) {
        var configuration = HTTPConfiguration()
        configure(&configuration)
        let settings = ConnectionSettings(configuration: configuration, recordsAnswers: true)
        machine = ConnectionStateMachine(settings: settings, at: 1_000_000)
    }

    var now: Int64 { time.milliseconds }

    // MARK: Events

    mutating func send(_ text: String) { send(Array(text.utf8)) }

    mutating func send(_ bytes: [UInt8]) {
        let action = bytes.withUnsafeBytes { machine.received($0, at: time) }
        perform(action)
    }

    mutating func sendEndOfInput() { perform(machine.receivedEndOfInput(at: time)) }

    mutating func hangUp() { perform(machine.peerClosedInput()) }

    /// The clock moves on by `milliseconds`, and the loop's sweep looks at the connection;
    /// `unreadInput`: input has arrived on the socket that the loop has not read yet.
    mutating func advance(_ milliseconds: Int64, unreadInput: Bool = false) {
        time = ServerTime(milliseconds: now + milliseconds, date: time.date)
        perform(machine.tick(at: time, hasUnreadInput: { unreadInput }))
    }

    /// The client reads: the socket has room for `bytes` more, and epoll says writable.
    mutating func clientReads(_ bytes: Int? = nil) {
        room = bytes
        if machine.interest.contains(.write) { perform(.write) }
    }

    /// The pool runs the oldest piece of work and hands its answer back.
    mutating func finishWork() {
        let make = pool.removeFirst()
        perform(machine.workFinished(make(), at: time))
    }

    mutating func stop(unreadInput: Bool = false) {
        perform(machine.serverStopping(hasUnreadInput: { unreadInput }))
    }

    mutating func endGracePeriod() { perform(machine.gracePeriodEnded(at: time)) }

    // MARK: The loop's side

    mutating func perform(_ first: ConnectionAction) {
        var action = first
        while true {
            switch action {
            case .none:
                return
            case .handle:
                let head = machine.requestHead
                handled.append(String(decoding: head.target, as: UTF8.self))
                action = machine.respond(handler(head), at: time)
            case .submit(let kind, let make):
                if poolTakesWork {
                    pool.append(make)
                    action = machine.submitted()
                } else {
                    action = machine.queueFull(kind, at: time)
                }
            case .write:
                action = write()
            case .cancelWork:
                action = machine.workCancelled(jobStillQueued)
            case .shutWrite:
                writeShut = true
                return
            case .close:
                closed = true
                return
            }
        }
    }

    /// One write: what the socket has room for, of the leading bytes or file range.
    private mutating func write() -> ConnectionAction {
        writes += 1
        let limit = room ?? Int.max
        guard limit > 0 else { return machine.writeWouldBlock(at: time) }
        var chunk: [UInt8] = []
        switch machine.output.nextWrite {
        case nil:
            return machine.wrote(0, at: time)
        case .bytes:
            machine.output.withLeadingBytes { vectors in
                for v in vectors {
                    let n = min(v.iov_len, limit - chunk.count)
                    chunk += UnsafeRawBufferPointer(start: v.iov_base, count: n)
                    if chunk.count == limit { break }
                }
            }
        case let .file(file, offset, count):
            chunk = [UInt8](repeating: 0, count: min(count, limit))
            let n = chunk.withUnsafeMutableBytes { pread(file.rawValue, $0.baseAddress, $0.count, off_t(offset)) }
            guard n > 0 else { return machine.writeFailed() }
            chunk.removeLast(chunk.count - n)
        }
        if room != nil { room! -= chunk.count }
        received += chunk
        return machine.wrote(chunk.count, at: time)
    }

    // MARK: Reading what the client received

    /// Takes the next response off what the client received (nil if none is complete).
    /// `bodyless`: the answer to HEAD, whose Content-Length announces a body not sent.
    mutating func nextResponse(bodyless: Bool = false) -> RawResponse? {
        guard let end = received.firstRange(of: Array("\r\n\r\n".utf8)) else { return nil }
        let lines = String(decoding: received[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let status = Int(lines[0].split(separator: " ")[1]) ?? 0
        let headers = lines.dropFirst().map { line -> (name: String, value: String) in
            let parts = line.split(separator: ":", maxSplits: 1)
            return (String(parts[0]), parts[1].trimmingCharacters(in: .whitespaces))
        }
        var response = RawResponse(status: status, headers: headers, body: [])
        let length = bodyless || status == 304 || status == 204 ? 0 : Int(response.header("Content-Length") ?? "0") ?? 0
        guard received.count >= end.upperBound + length else { return nil }
        response.body = Array(received[end.upperBound..<(end.upperBound + length)])
        received.removeFirst(end.upperBound + length)
        return response
    }

    var state: ConnectionStateMachine.State { machine.state }
}

extension ConnectionDriver: CustomTestStringConvertible {
    var testDescription: String {
        "connection \(state.name), \(received.count) bytes received, handled \(handled)"
    }
}

extension ConnectionStateMachine.State {
    var name: String {
        switch self {
        case .readingHead: "readingHead"
        case .waitingOnPool: "waitingOnPool"
        case .writing: "writing"
        case .draining: "draining"
        case .lingering: "lingering"
        case .closed: "closed"
        }
    }
}

private func get(_ target: String, _ headers: String = "") -> String {
    "GET \(target) HTTP/1.1\r\nHost: x\r\n\(headers)\r\n"
}

@Suite struct ConnectionStateMachineTests {
    // MARK: Keep-alive, pipelining, methods

    @Test func keepAliveAnswersOneRequestAfterAnother() {
        var d = ConnectionDriver()
        for i in 0..<3 {
            d.send(get("/k/\(i)"))
            let r = d.nextResponse()
            #expect(r?.status == 200 && r?.text == "/k/\(i)")
            #expect(r?.header("Connection") == nil)
            #expect(r?.header("Date") == "Tue, 14 Nov 2023 22:13:20 GMT")
        }
        #expect(d.state.name == "readingHead" && d.machine.interest == [.read, .hangUp])
        #expect(!d.closed)
        // Head and body left in one write each time.
        #expect(d.writes == 3)
    }

    @Test func pipelinedRequestsAreAnsweredInOrderInOneWrite() {
        var d = ConnectionDriver()
        d.send((0..<5).map { get("/p/\($0)") }.joined())
        #expect(d.handled == (0..<5).map { "/p/\($0)" })
        for i in 0..<5 { #expect(d.nextResponse()?.text == "/p/\(i)") }
        #expect(d.writes == 1)
    }

    /// A request split anywhere is the same request.
    @Test func aRequestArrivingByteByByteIsAnsweredOnce() {
        var d = ConnectionDriver()
        for byte in Array(get("/slowly").utf8) {
            #expect(d.handled.isEmpty)
            d.send([byte])
        }
        #expect(d.handled == ["/slowly"])
        #expect(d.nextResponse()?.text == "/slowly")
    }

    @Test func headAnnouncesTheBodyWithoutSendingIt() {
        var d = ConnectionDriver()
        let file = PreparedResponse(
            body: Array("file body".utf8), contentType: "text/plain", etag: "\"v1\"",
            lastModified: nil, cacheControl: nil)
        d.handler = { _ in .prepared(file) }
        d.send("HEAD /f HTTP/1.1\r\nHost: x\r\n\r\n" + get("/f"))
        let head = d.nextResponse(bodyless: true)
        #expect(head?.status == 200 && head?.header("Content-Length") == "9" && head?.body.isEmpty == true)
        #expect(d.nextResponse()?.text == "file body")
        #expect(d.received.isEmpty)
    }

    @Test func matchingValidatorsGet304WithoutABody() {
        var d = ConnectionDriver()
        let file = PreparedResponse(
            body: Array("file body".utf8), contentType: "text/plain", etag: "\"v1\"",
            lastModified: 1_000_000_000, cacheControl: "max-age=60")
        d.handler = { _ in .prepared(file) }
        d.send(get("/f", "If-None-Match: \"v1\"\r\n") + get("/f", "If-None-Match: \"v2\"\r\n"))
        let notModified = d.nextResponse()
        #expect(notModified?.status == 304 && notModified?.header("ETag") == "\"v1\"")
        #expect(notModified?.header("Content-Length") == nil && notModified?.header("Cache-Control") == "max-age=60")
        #expect(d.nextResponse()?.status == 200)
        #expect(d.received.isEmpty)
    }

    @Test func optionsAndOtherMethodsAreAnsweredWithoutTheHandler() {
        var d = ConnectionDriver()
        d.send("OPTIONS /x HTTP/1.1\r\nHost: x\r\n\r\nDELETE /x HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(d.handled.isEmpty)
        let options = d.nextResponse()
        #expect(options?.status == 204 && options?.header("Allow") == "GET, HEAD, OPTIONS")
        let other = d.nextResponse()
        #expect(other?.status == 405 && other?.header("Allow") == "GET, HEAD, OPTIONS")
        #expect(!d.closed)
    }

    @Test func connectionCloseEndsTheConnectionOnceTheAnswerIsOut() {
        var d = ConnectionDriver()
        d.room = 10
        d.send(get("/last", "Connection: close\r\n") + get("/never"))
        #expect(d.handled == ["/last"], "requests after Connection: close are not answered")
        #expect(d.state.name == "draining" && d.machine.interest == [.write] && !d.closed)
        d.clientReads()
        #expect(d.nextResponse()?.header("Connection") == "close")
        #expect(d.closed)
    }

    @Test func http10ClosesUnlessKeepAliveIsAsked() {
        var d = ConnectionDriver()
        d.send("GET /old HTTP/1.0\r\n\r\n")
        #expect(d.nextResponse()?.header("Connection") == "close")
        #expect(d.closed)

        var k = ConnectionDriver()
        for i in 0..<2 {
            k.send("GET /k\(i) HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            #expect(k.nextResponse()?.header("Connection") == "keep-alive")
        }
        #expect(!k.closed)
    }

    @Test func theClientClosingItsSideEndsTheConnectionAfterTheAnswers() {
        var d = ConnectionDriver()
        d.room = 0
        d.send(get("/a"))
        d.sendEndOfInput()
        #expect(d.state.name == "draining" && !d.closed)
        d.clientReads()
        #expect(d.nextResponse()?.text == "/a")
        #expect(d.closed)

        var idle = ConnectionDriver()
        idle.sendEndOfInput()
        #expect(idle.closed)
    }

    // MARK: Protocol errors and the linger

    @Test func aBadRequestIsAnsweredThenTheWriteSideShutAndInputDropped() {
        var d = ConnectionDriver()
        d.send("BREW / HTCPCP/1.0\r\n\r\n" + get("/after"))
        #expect(d.handled.isEmpty)
        let r = d.nextResponse()
        #expect(r?.status == 505 || r?.status == 400)
        #expect(r?.header("Connection") == "close")
        #expect(d.writeShut && d.state.name == "lingering" && d.machine.interest == [.read, .hangUp])
        d.send(String(repeating: "junk", count: 1000))
        #expect(d.received.isEmpty && !d.closed)
        d.sendEndOfInput()
        #expect(d.closed)
    }

    /// After an error answer the connection lingers 2 s (from the answer), then closes
    /// whatever the client does.
    @Test func theLingerEndsAtItsDeadline() {
        var d = ConnectionDriver()
        d.send("\u{1}\r\n\r\n")
        #expect(d.nextResponse()?.status == 400)
        #expect(d.writeShut)
        d.advance(1_999)
        #expect(!d.closed)
        d.send("more")
        d.advance(1)
        #expect(d.closed)
    }

    // MARK: Timeouts

    @Test func aRequestHeadMustArriveWithinTheHeadTimeout() {
        var d = ConnectionDriver {
            $0.requestHeadTimeout = 10; $0.idleTimeout = 60
        }
        d.advance(5_000)
        d.send("GET / HTTP/1.1\r\nHost: x\r\n")
        d.advance(9_000)
        d.send("X-Still: coming\r\n")  // progress does not extend the head's deadline
        d.advance(1_000)
        #expect(d.received.isEmpty && !d.closed, "408 at exactly the timeout")
        d.advance(1)
        let r = d.nextResponse()
        #expect(r?.status == 408 && r?.header("Connection") == "close")
        #expect(r?.errorMessage?.contains("took too long") == true)
        #expect(d.writeShut && d.state.name == "lingering")
    }

    /// Slowloris with empty lines: a client that sends only `\r\n` is sending a request
    /// head, and is held to the head timeout, before its first request and after one.
    @Test(arguments: [false, true])
    func emptyLinesAreARequestHeadArrivingSlowly(afterARequest: Bool) {
        var d = ConnectionDriver {
            $0.requestHeadTimeout = 3; $0.idleTimeout = 60
        }
        if afterARequest {
            d.send(get("/first"))
            #expect(d.nextResponse()?.text == "/first")
        }
        for _ in 0..<30 {
            d.send("\r\n")
            d.advance(100)
        }
        d.advance(1)
        #expect(d.nextResponse()?.status == 408)
        #expect(d.writeShut)
    }

    @Test func anIdleKeepAliveConnectionClosesAfterTheIdleTimeout() {
        var d = ConnectionDriver {
            $0.idleTimeout = 60; $0.requestHeadTimeout = 10
        }
        d.send(get("/one"))
        _ = d.nextResponse()
        d.advance(60_000)
        #expect(!d.closed)
        d.advance(1)
        #expect(d.closed)
        #expect(d.received.isEmpty, "an idle close says nothing")
    }

    /// Before its first request, silence is held to the shorter head timeout.
    @Test func aSilentNewConnectionClosesAfterTheHeadTimeout() {
        var d = ConnectionDriver {
            $0.idleTimeout = 60; $0.requestHeadTimeout = 10
        }
        d.advance(10_000)
        #expect(!d.closed)
        d.advance(1)
        #expect(d.closed && d.received.isEmpty)
    }

    /// The loop reads its clock after waiting for events, so input that arrived in between
    /// waits unread when it sweeps. A connection past its silence deadline with input
    /// waiting is not judged then (closing would drop a request that came in time); the
    /// loop reads it, and the next tick judges what has arrived.
    @Test(arguments: ["new connection", "keep-alive", "head arriving"])
    func inputWaitingUnreadIsNotSilence(_ situation: String) {
        var d = ConnectionDriver {
            $0.requestHeadTimeout = 10; $0.idleTimeout = 60
        }
        switch situation {
        case "keep-alive":
            d.send(get("/first"))
            #expect(d.nextResponse()?.text == "/first")
            d.advance(60_001, unreadInput: true)
        case "head arriving":
            d.send("GET /late HTTP/1.1\r\n")
            d.advance(10_001, unreadInput: true)
        default:
            d.advance(10_001, unreadInput: true)
        }
        #expect(!d.closed && d.received.isEmpty, "judged before the waiting input was read")
        if situation == "head arriving" {
            // What arrived did not end the head: it is late all the same.
            d.send("X-More: 1\r\n")
            d.advance(250)
            #expect(d.nextResponse()?.status == 408)
            return
        }
        d.send(get("/late"))
        #expect(d.nextResponse()?.text == "/late")
        #expect(!d.closed)
    }

    /// Output the client does not read is held to the write timeout from the moment it
    /// stalls, however much the client keeps sending.
    @Test func aClientThatStopsReadingIsCutOffAfterTheWriteTimeout() {
        // (A head timeout longer than the write timeout: the bytes it sends start a
        // request head, which is otherwise held to the head timeout.)
        var d = ConnectionDriver {
            $0.writeTimeout = 30; $0.requestHeadTimeout = 60
        }
        let big = PreparedResponse(
            body: [UInt8](repeating: 7, count: 100_000), contentType: "application/octet-stream",
            etag: nil, lastModified: nil, cacheControl: nil)
        d.handler = { _ in .prepared(big) }
        d.room = 50_000
        d.send(get("/big"))
        #expect(d.machine.interest.contains(.write) && d.machine.writeStalledSince == d.now)
        for _ in 0..<29 {
            d.advance(1_000)
            d.send("X")  // keeps sending, never reads
        }
        d.advance(1_000)
        #expect(!d.closed)
        d.advance(1)
        #expect(d.closed)
    }

    @Test func progressResetsTheWriteTimeout() {
        var d = ConnectionDriver { $0.writeTimeout = 30 }
        let big = PreparedResponse(
            body: [UInt8](repeating: 7, count: 100_000), contentType: "application/octet-stream",
            etag: nil, lastModified: nil, cacheControl: nil)
        d.handler = { _ in .prepared(big) }
        d.room = 0
        d.send(get("/big"))
        for _ in 0..<10 {
            d.advance(29_000)
            d.clientReads(1000)  // a trickle, but progress
        }
        #expect(!d.closed)
        d.clientReads()
        #expect(d.nextResponse()?.body.count == 100_000)
    }

    // MARK: Backpressure

    /// Past `maximumQueuedOutputBytes` nothing more is read or parsed; once the client
    /// catches up, the held requests are answered.
    @Test func queuedOutputPastTheLimitStopsReadingUntilTheClientCatchesUp() {
        var d = ConnectionDriver { $0.maximumQueuedOutputBytes = 4096 }
        let big = PreparedResponse(
            body: [UInt8](repeating: 1, count: 3000), contentType: "application/octet-stream",
            etag: nil, lastModified: nil, cacheControl: nil)
        d.handler = { head in
            head.target == Array("/big".utf8)
                ? .prepared(big)
                : .bytes(status: 200, contentType: "text/plain", body: head.target, cacheControl: nil)
        }
        d.room = 0
        d.send((0..<5).map { _ in get("/big") }.joined() + get("/after"))
        #expect(d.handled.count == 2, "answering stopped at the limit")
        #expect(d.state.name == "writing" && d.machine.interest == [.write])
        #expect(d.machine.heldBytes > 0)
        d.advance(20_000)  // no head timeout (10 s) while the server holds the input back
        #expect(!d.closed)
        d.clientReads()
        #expect(d.handled.count == 6)
        for _ in 0..<5 { #expect(d.nextResponse()?.body.count == 3000) }
        #expect(d.nextResponse()?.text == "/after")
        #expect(d.state.name == "readingHead")
    }

    // MARK: The blocking pool

    /// A request answered on the pool holds back those behind it (answers keep their
    /// order), and reading stops: only a hang-up is watched for.
    @Test func requestsBehindAPoolAnswerWaitForIt() {
        var d = ConnectionDriver()
        d.handler = { head in
            let target = head.target
            if target == Array("/slow".utf8) {
                return .withHeaders(
                    [("X-Made", "on the pool")],
                    .blocking(.render) {
                        .bytes(status: 200, contentType: "text/plain", body: target, cacheControl: nil)
                    })
            }
            return .bytes(status: 200, contentType: "text/plain", body: target, cacheControl: nil)
        }
        d.send(get("/a") + get("/slow") + get("/b"))
        #expect(d.handled == ["/a", "/slow"])
        #expect(d.nextResponse()?.text == "/a", "answers before the pool's go out meanwhile")
        #expect(d.state.name == "waitingOnPool" && d.machine.interest == [.hangUp])
        d.advance(120_000)  // no timeout while the answer is being made
        #expect(!d.closed && d.pool.count == 1)
        d.finishWork()
        let slow = d.nextResponse()
        #expect(slow?.text == "/slow" && slow?.header("X-Made") == "on the pool")
        #expect(d.nextResponse()?.text == "/b")
        #expect(d.handled == ["/a", "/slow", "/b"])
    }

    @Test func aFullPoolQueueIs503WithRetryAfterOnAConnectionThatStaysUsable() {
        var d = ConnectionDriver()
        d.handler = { _ in .blocking(.render) { .bytes(status: 200, contentType: "text/plain", body: [], cacheControl: nil) } }
        d.poolTakesWork = false
        d.send(get("/draw"))
        let r = d.nextResponse()
        #expect(r?.status == 503 && r?.header("Retry-After") == "1")
        #expect(r?.errorMessage?.contains("drawn") == true)
        #expect(d.state.name == "readingHead" && !d.closed)
    }

    @Test func aClientLeavingWhileItsWorkIsQueuedDropsTheWork() {
        var d = ConnectionDriver()
        d.handler = { _ in .blocking(.read) { .bytes(status: 200, contentType: "text/plain", body: [], cacheControl: nil) } }
        d.send(get("/read"))
        d.jobStillQueued = true
        d.hangUp()
        #expect(d.closed)
    }

    /// Work already running is delivered to a half-closed client, and the hang-up is no
    /// longer watched (a level-triggered report would wake the loop over and over).
    @Test func aClientLeavingWhileItsWorkRunsStillGetsTheAnswer() {
        var d = ConnectionDriver()
        d.handler = { _ in .blocking(.read) { .bytes(status: 200, contentType: "text/plain", body: Array("made".utf8), cacheControl: nil) }
        }
        d.send(get("/read"))
        d.jobStillQueued = false
        d.hangUp()
        #expect(!d.closed && d.machine.interest == [])
        d.finishWork()
        #expect(d.nextResponse()?.text == "made")
        d.sendEndOfInput()
        #expect(d.closed)
    }

    // MARK: Stopping

    @Test func aStopClosesAnIdleConnectionAtOnce() {
        var d = ConnectionDriver()
        d.send(get("/one"))
        _ = d.nextResponse()
        d.stop()
        #expect(d.closed && d.received.isEmpty)
    }

    /// A request that reached the socket before the stop, not yet read, is answered with
    /// `Connection: close`.
    @Test func aStopAnswersARequestNotYetRead() {
        var d = ConnectionDriver()
        d.stop(unreadInput: true)
        #expect(!d.closed)
        d.send(get("/last"))
        #expect(d.nextResponse()?.header("Connection") == "close")
        #expect(d.closed)
    }

    @Test func anAnswerFinishedAfterAStopSaysClose() {
        var d = ConnectionDriver()
        d.handler = { _ in .blocking(.render) { .bytes(status: 200, contentType: "text/plain", body: [], cacheControl: nil) } }
        d.send(get("/draw"))
        d.stop()
        #expect(!d.closed)
        d.finishWork()
        #expect(d.nextResponse()?.header("Connection") == "close")
        #expect(d.closed)
    }

    /// At the end of the grace period a request still in flight is answered 503 with
    /// `Connection: close`; an idle connection gets nothing.
    @Test(arguments: ["waiting on the pool", "head arriving", "idle"])
    func theEndOfTheGracePeriodAnswersWhatIsInFlight(_ situation: String) {
        var d = ConnectionDriver()
        d.handler = { _ in .blocking(.render) { .bytes(status: 200, contentType: "text/plain", body: [], cacheControl: nil) } }
        switch situation {
        case "waiting on the pool": d.send(get("/draw"))
        case "head arriving": d.send("GET /partial HTTP/1.1\r\n")
        default: break
        }
        d.stop(unreadInput: situation != "idle")
        d.endGracePeriod()
        if situation == "idle" {
            #expect(d.received.isEmpty)
            return
        }
        let r = d.nextResponse()
        #expect(r?.status == 503 && r?.header("Connection") == "close")
        #expect(r?.errorMessage?.contains("shutting down") == true)
        #expect(d.writeShut)
    }

    // MARK: Output

    /// Partial writes of any size deliver the same bytes.
    @Test(arguments: [1, 7, 100, 4096])
    func partialWritesDeliverEveryByte(_ step: Int) {
        var d = ConnectionDriver()
        let body = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let big = PreparedResponse(
            body: body, contentType: "application/octet-stream", etag: nil, lastModified: nil,
            cacheControl: nil)
        d.handler = { head in
            head.target == Array("/big".utf8)
                ? .prepared(big)
                : .bytes(status: 200, contentType: "text/plain", body: head.target, cacheControl: nil)
        }
        d.room = 0
        d.send(get("/big") + get("/small"))
        var rounds = 0
        while d.machine.interest.contains(.write) && rounds < 100_000 {
            d.clientReads(step)
            rounds += 1
        }
        #expect(d.nextResponse()?.body == body)
        #expect(d.nextResponse()?.text == "/small")
    }

    /// A file range goes out after its head; HEAD sends the head alone.
    @Test func fileRangeBodiesAreSentFromTheFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("range-\(UUID().uuidString)").path
        let contents = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        try Data(contents).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        let file = OpenFile(taking: try FileDescriptor.open(path, O_RDONLY))
        let response = PreparedResponse(
            file: FileRange(file: file, offset: 1000, count: 5000),
            contentType: "application/octet-stream", etag: "\"f\"", lastModified: nil,
            cacheControl: nil)
        var d = ConnectionDriver()
        d.handler = { _ in .prepared(response) }
        d.room = 333
        d.send(get("/range") + "HEAD /range HTTP/1.1\r\nHost: x\r\n\r\n" + get("/range", "If-None-Match: \"f\"\r\n"))
        while d.machine.interest.contains(.write) { d.clientReads(333) }
        let r = d.nextResponse()
        #expect(r?.header("Content-Length") == "5000")
        #expect(r?.body == Array(contents[1000..<6000]))
        let head = d.nextResponse(bodyless: true)
        #expect(head?.status == 200 && head?.header("Content-Length") == "5000")
        #expect(d.nextResponse()?.status == 304)
        #expect(d.received.isEmpty)
    }

    /// A file that became shorter than its range cannot deliver the promised length: the
    /// connection closes rather than send a short body.
    @Test func aFileShorterThanItsRangeClosesTheConnection() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("short-\(UUID().uuidString)").path
        try Data(repeating: 1, count: 100).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        let file = OpenFile(taking: try FileDescriptor.open(path, O_RDONLY))
        let response = PreparedResponse(
            file: FileRange(file: file, count: 5000), contentType: "application/octet-stream",
            etag: nil, lastModified: nil, cacheControl: nil)
        var d = ConnectionDriver()
        d.handler = { _ in .prepared(response) }
        d.send(get("/short"))
        #expect(d.closed)
    }

    @Test func theAccessLogGetsOneAnswerPerRequest() {
        var d = ConnectionDriver()
        d.send(get("/a") + "HEAD /b HTTP/1.1\r\nHost: x\r\n\r\n" + "\u{1}\r\n\r\n")
        let answers = d.machine.takeAnswers()
        #expect(answers.map(\.status) == [200, 200, 400])
        #expect(answers.map { $0.head.map { String(decoding: $0.target, as: UTF8.self) } } == ["/a", "/b", nil])
        #expect(d.machine.takeAnswers().isEmpty)
    }

    /// Each answer's duration runs from the request's first byte to its answer being
    /// queued: a head that trickles in, and the time its answer spends on the pool, count.
    @Test func theAccessLogTimesEachRequestFromItsFirstByte() {
        var d = ConnectionDriver()
        d.handler = { head in
            guard String(decoding: head.target, as: UTF8.self) == "/pool" else {
                return .bytes(status: 200, contentType: "text/plain", body: [], cacheControl: nil)
            }
            return .blocking(.read) { .bytes(status: 200, contentType: "text/plain", body: [], cacheControl: nil) }
        }
        d.send("GET /pool HTTP/1.1\r\n")
        d.advance(30)
        d.send("Host: x\r\n\r\n")
        d.advance(200)
        d.finishWork()
        d.advance(5)
        d.send(get("/at-once"))
        d.advance(7)
        d.send("GET /bad HTTP/1.1\r\n")
        d.advance(11)
        d.send("\u{1}\r\n\r\n")
        let answers = d.machine.takeAnswers()
        #expect(answers.map(\.status) == [200, 200, 400])
        #expect(answers.map(\.milliseconds) == [230, 0, 11])
    }

    /// 300 generated conversations: requests (GET, HEAD, OPTIONS, some answered on the
    /// pool, some with large bodies) split at random points, a socket whose room varies
    /// from write to write, the pool finishing at random moments. Every request is
    /// answered once, in order, whole.
    @Test func randomSplitsRoomsAndPoolTimingsNeverLoseOrReorderAnAnswer() {
        var rng = SplitMix(seed: 0x7157)
        let big = PreparedResponse(
            body: (0..<5000).map { UInt8(truncatingIfNeeded: $0) }, contentType: "application/octet-stream",
            etag: nil, lastModified: nil, cacheControl: nil)
        for round in 0..<300 {
            var d = ConnectionDriver { $0.maximumQueuedOutputBytes = 4096 + Int(rng.next() % 20_000) }
            d.handler = { head in
                let target = String(decoding: head.target, as: UTF8.self)
                let answer: HTTPResponse =
                    target.hasPrefix("/big")
                    ? .prepared(big)
                    : .bytes(status: 200, contentType: "text/plain", body: head.target, cacheControl: nil)
                return target.contains("pool") ? .blocking(.read) { answer } : answer
            }
            var expected: [(method: String, target: String)] = []
            var stream: [UInt8] = []
            for i in 0..<(1 + Int(rng.next() % 12)) {
                let method = ["GET", "GET", "GET", "HEAD", "OPTIONS"][Int(rng.next() % 5)]
                let target = ["/t", "/big", "/pool", "/big-pool"][Int(rng.next() % 4)] + "/\(round)/\(i)"
                expected.append((method, target))
                stream += Array("\(method) \(target) HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
            }
            d.room = 0
            var sent = 0
            var steps = 0
            while (sent < stream.count || !d.pool.isEmpty || d.machine.interest.contains(.write)) && steps < 100_000 {
                steps += 1
                switch rng.next() % 3 {
                case 0 where sent < stream.count && d.machine.wantsInput:
                    let n = min(stream.count - sent, 1 + Int(rng.next() % 200))
                    d.send(Array(stream[sent..<(sent + n)]))
                    sent += n
                case 1 where !d.pool.isEmpty:
                    d.finishWork()
                default:
                    d.clientReads(Int(rng.next() % 3000))
                }
                #expect(!d.closed, "round \(round): closed")
                if d.closed { break }
            }
            d.clientReads()
            for (method, target) in expected {
                let r = d.nextResponse(bodyless: method == "HEAD")
                switch method {
                case "OPTIONS": #expect(r?.status == 204, "round \(round): \(method) \(target)")
                case "HEAD":
                    #expect(r?.status == 200 && r?.body.isEmpty == true, "round \(round): \(method) \(target)")
                default:
                    let body = target.hasPrefix("/big") ? big.body : Array(target.utf8)
                    #expect(r?.status == 200 && r?.body == body, "round \(round): \(method) \(target)")
                }
            }
            #expect(d.received.isEmpty, "round \(round): bytes after the last answer")
        }
    }
}
