import Foundation
import Testing
import TilerSystem
import TilerTestSupport
@testable import TilerHTTP

/// What goes out: backpressure, partial writes, file ranges, the access log, and random
/// splits of everything.
extension ConnectionStateMachineTests {
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
