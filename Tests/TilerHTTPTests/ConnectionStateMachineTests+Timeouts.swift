import Foundation
import Testing
import TilerTestSupport
@testable import TilerHTTP

/// The head, idle and write timeouts, each at its exact edge on the driver's clock.
extension ConnectionStateMachineTests {
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
}
