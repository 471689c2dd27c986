import Foundation
import Logging
import Testing
import TilerTestSupport
@testable import TilerHTTP

/// Slow, silent and idle clients: the head, idle and write timeouts, on the server's clock.
extension HTTPServerTests {
    @Test func halfSentRequestsDoNotDelayOthers() throws {
        try withServer { port, _ throws in
            var slow: [RawHTTPClient] = []
            for i in 0..<60 {
                let c = try RawHTTPClient(port: port)
                try c.send("GET /slow/\(i) HTTP/1.1\r\nHost: x\r\nX-Partial: ")
                slow.append(c)
            }
            let c = try RawHTTPClient(port: port)
            for i in 0..<20 {
                try c.request("/fast/\(i)")
                #expect(try c.readResponse().text == "/fast/\(i)")
            }
            // The slow ones complete when they finish their heads.
            for (i, s) in slow.enumerated() where i % 10 == 0 {
                try s.send("y\r\n\r\n")
                #expect(try s.readResponse().text == "/slow/\(i)")
            }
        }
    }

    /// The timeouts below run on a `ManualClock`: the test moves the server's clock and
    /// then fetches from another connection. That fetch's answer comes from a loop
    /// iteration after the one that accepted it, which swept every connection with the
    /// moved clock; so by then the connection under test has been judged (one loop thread).
    /// The loop sweeps when its clock has moved 250 ms since the last sweep, hence steps of
    /// at least 250 ms.
    @Test func slowRequestHeadsGet408AndAreClosed() throws {
        let clock = ManualClock()
        try withServer(
            clock: clock,
            {
                $0.requestHeadTimeout = 10; $0.threads = 1
            }
        ) { port, _ throws in
            let c = try RawHTTPClient(port: port)
            try c.send("GET / HTTP/1.1\r\nHost: x\r\n")
            try expectStillServing(port)  // c's bytes are read by now
            clock.advance(milliseconds: 10_000)
            try expectStillServing(port)
            #expect(isOpenAndSilent(c), "408 before the head timeout")
            clock.advance(milliseconds: 251)
            try expectStillServing(port)
            let r = try c.readResponse()
            #expect(r.status == 408)
            #expect(c.waitForClose())
        }
    }

    /// Slowloris with empty lines: a client that sends only `\r\n`, over and over, is
    /// sending a request head and is held to the head timeout like any other.
    @Test func emptyLinesDoNotHoldAConnectionPastTheHeadTimeout() throws {
        let clock = ManualClock()
        try withServer(
            clock: clock,
            {
                $0.requestHeadTimeout = 3; $0.idleTimeout = 60; $0.threads = 1
            }
        ) { port, _ throws in
            for prelude in ["", "GET /first HTTP/1.1\r\nHost: x\r\n\r\n"] {
                let c = try RawHTTPClient(port: port)
                if !prelude.isEmpty {
                    try c.send(prelude)
                    #expect(try c.readResponse().text == "/first")
                }
                // An empty line every 0.5 s of the server's clock, for 3.5 s: a request
                // head that never ends.
                for _ in 0..<7 {
                    try c.send("\r\n")
                    try expectStillServing(port)
                    clock.advance(milliseconds: 500)
                }
                try expectStillServing(port)
                let r = try c.readResponse()
                #expect(r.status == 408, "a connection sending empty lines outlived the head timeout")
                #expect(c.waitForClose())
            }
            try expectStillServing(port)
        }
    }

    @Test func idleConnectionsAreClosed() throws {
        let clock = ManualClock()
        try withServer(
            clock: clock,
            {
                $0.idleTimeout = 60; $0.threads = 1
            }
        ) { port, _ throws in
            let c = try RawHTTPClient(port: port)
            try c.request("/one")
            _ = try c.readResponse()
            clock.advance(milliseconds: 60_000)
            try expectStillServing(port)
            #expect(isOpenAndSilent(c), "closed before the idle timeout")
            clock.advance(milliseconds: 251)
            try expectStillServing(port)
            #expect(c.waitForClose())
        }
    }

    @Test func silentNewConnectionsAreClosedAfterTheHeadTimeout() throws {
        let clock = ManualClock()
        try withServer(
            clock: clock,
            {
                $0.requestHeadTimeout = 10; $0.idleTimeout = 60; $0.threads = 1
            }
        ) { port, _ throws in
            let c = try RawHTTPClient(port: port)
            try expectStillServing(port)  // accepted before the fetch's connection
            clock.advance(milliseconds: 10_000)
            try expectStillServing(port)
            #expect(isOpenAndSilent(c), "closed before the head timeout")
            clock.advance(milliseconds: 251)
            try expectStillServing(port)
            #expect(c.waitForClose())
        }
    }

    /// A loop held up between reading its clock for a batch and accepting a connection in
    /// that batch (a starved thread on a loaded machine) must not count the hold-up against
    /// the new connection: it gets the whole head timeout from its accept. (nginx, opening a
    /// connection per request, got a 502 when tiler closed one before its request came.)
    @Test func aConnectionAcceptedLateInABatchGetsTheWholeHeadTimeout() throws {
        let clock = ManualClock()
        try withServer(
            clock: clock,
            {
                $0.requestHeadTimeout = 10; $0.idleTimeout = 60; $0.threads = 1
            }
        ) { port, _ throws in
            let first = Gates.unique("first-")
            let second = Gates.unique("second-")
            let a = try RawHTTPClient(port: port)
            let c = try RawHTTPClient(port: port)
            try expectStillServing(port)  // a and c accepted
            try a.request("/hold/\(first)")
            #expect(Gates.shared[first].waitForArrivals(1))
            // While the loop is held: c's request, then b's connection. The loop's next batch
            // has both, in that order: it reads its clock, is held again in c's request, and
            // only then accepts b.
            try c.request("/hold/\(second)")
            let b = try RawHTTPClient(port: port)
            Gates.shared[first].open()
            #expect(Gates.shared[second].waitForArrivals(1))
            clock.advance(milliseconds: 10_251)
            Gates.shared[second].open()
            try expectStillServing(port)  // swept with the moved clock
            #expect(isOpenAndSilent(b), "a connection accepted after the hold-up was closed as silent")
            try b.request("/late")
            #expect(try b.readResponse().text == "/late")
            #expect(try a.readResponse().text == "/hold/\(first)")
            #expect(try c.readResponse().text == "/hold/\(second)")
        }
    }

    /// A request that arrives while the loop is held up after waiting for events (before it
    /// reads its clock and sweeps) is read and answered: the loop's lateness does not make
    /// the connection look silent, and it is not closed with the request unread (a reset).
    @Test func aRequestThatArrivedWhileTheLoopWasLateIsAnswered() throws {
        let clock = HeldClock()
        try withServer(
            clock: clock,
            {
                $0.requestHeadTimeout = 10; $0.idleTimeout = 60; $0.threads = 1
            }
        ) { port, _ throws in
            for prelude in ["", "/first"] {
                let b = try RawHTTPClient(port: port)
                if !prelude.isEmpty {
                    try b.request(prelude)
                    #expect(try b.readResponse().text == prelude)
                }
                try expectStillServing(port)  // b accepted (and answered)
                clock.holdNextReading()
                #expect(clock.waitUntilHeld(), "the loop did not read its clock")
                try b.request("/arrived")
                #expect(waitUntilSent(b), "the request did not reach the server")
                clock.advance(milliseconds: prelude.isEmpty ? 10_251 : 60_251)
                clock.release()
                #expect(try b.readResponse().text == "/arrived")
            }
        }
    }

    @Test func clientsThatStopReadingAreCutOffAfterTheWriteTimeout() throws {
        let clock = ManualClock()
        try withServer(
            clock: clock,
            {
                $0.writeTimeout = 30; $0.threads = 1
            }
        ) { port, server throws in
            let c = try RawHTTPClient(port: port, timeout: 5)
            try c.request("/huge")  // 64 MiB: far more than the socket buffers hold
            // Accepted and answering (bytes are waiting to be read), then cut off.
            #expect(eventually { bytesWaiting(c) > 0 })
            clock.advance(milliseconds: 30_000)
            try expectStillServing(port)
            #expect(eventually { server.openConnections == 1 }, "cut off before the write timeout")
            clock.advance(milliseconds: 251)
            try expectStillServing(port)
            #expect(eventually { server.openConnections == 0 })
            var received = 0
            var chunk = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                let n = chunk.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
                if n <= 0 { break }
                received += n
            }
            #expect(received < 64 << 20)
            try expectStillServing(port)
        }
    }

    /// An idle timeout far past any range (an unvalidated configuration) does not trap.
    @Test func absurdTimeoutsDoNotTrap() throws {
        try withServer({
            $0.idleTimeout = 1e16; $0.requestHeadTimeout = .infinity; $0.writeTimeout = .nan
        }) { port, _ throws in
            #expect(try fetch(port, "/alive").text == "/alive")
        }
    }
}
