import Foundation
import Logging
import Testing
import TilerTestSupport
@testable import TilerHTTP
@testable import TilerSystem

/// Starting and stopping: requests in flight at a stop, failed starts, loops that end,
/// and descriptors that outlive their connections.
extension HTTPServerTests {
    @Test func stopFinishesInFlightResponsesAndStopsAccepting() throws {
        var config = HTTPConfiguration()
        config.port = 0
        config.threads = 2
        let server = HTTPServer(configuration: config, handler: TestHandler())
        try server.start()
        let port = server.port
        let idle = try RawHTTPClient(port: port)
        try idle.request("/first")
        _ = try idle.readResponse()
        let busy = try RawHTTPClient(port: port)
        try busy.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        // The response is being sent (its first bytes have arrived), the client not reading.
        #expect(eventually { bytesWaiting(busy) > 0 })
        server.stop()
        let r = try busy.readResponse()
        #expect(r.body.count == TestHandler.big.body.count)
        #expect(idle.waitForClose())
        server.wait()
        #expect(throws: (any Error).self) { _ = try fetch(port, "/after") }
    }

    /// Every request in flight at a stop is finished or answered 503 with
    /// `Connection: close` by the end of the grace period: one being made that outlives
    /// it, one that finishes within it, one queued behind it, a head still arriving, and a
    /// request the loop had not read yet. Idle connections are closed without a word.
    @Test func stopAnswersEveryRequestInFlightWithinTheGracePeriod() throws {
        var config = HTTPConfiguration()
        config.port = 0
        config.threads = 1
        config.renderThreads = 2
        config.shutdownGracePeriod = 1
        let clock = ManualClock()
        let server = HTTPServer(configuration: config, clock: clock, makeHandler: { TestHandler() })
        try server.start()
        let port = server.port
        let forever = Gates.unique(), soon = Gates.unique()
        let outlives = try RawHTTPClient(port: port)
        try outlives.request("/render/\(forever)")
        let finishes = try RawHTTPClient(port: port)
        try finishes.request("/render/\(soon)")
        #expect(Gates.shared[forever].waitForArrivals(1) && Gates.shared[soon].waitForArrivals(1))
        let queued = try RawHTTPClient(port: port)
        try queued.request("/render/\(Gates.unique("open-"))")
        #expect(eventually { server.blockingStatistics(.render).queued == 1 })
        let partial = try RawHTTPClient(port: port)
        try partial.send("GET /partial HTTP/1.1\r\nHost: x\r\n")
        let idle = try RawHTTPClient(port: port)
        try idle.request("/idle")
        #expect(try idle.readResponse().status == 200)
        #expect(eventually { server.openConnections == 5 })

        server.stop()
        Gates.shared[soon].open()
        let finished = try finishes.readResponse()
        #expect(finished.status == 200 && finished.header("Connection") == "close")
        let next = try queued.readResponse()  // ran on the thread `soon` freed
        #expect(next.status == 200 && next.header("Connection") == "close")
        #expect(idle.waitForClose())
        #expect(isOpenAndSilent(outlives) && isOpenAndSilent(partial), "answered before the grace period ended")
        clock.advance(milliseconds: 1_001)  // the grace period ends (on the server's clock)
        for (name, c) in [("a request whose work outlived the grace period", outlives), ("a half-sent head", partial)] {
            let r = try c.readResponse()
            #expect(r.status == 503, "\(name): \(r.status)")
            #expect(r.header("Connection") == "close", "\(name)")
            #expect(r.errorMessage?.contains("shutting down") == true, "\(name)")
            #expect(c.waitForClose(), "\(name)")
        }
        server.wait()
        Gates.shared[forever].open()
    }

    /// A request that reached the socket just before a stop, before the loop read it, is
    /// answered (with `Connection: close`), not dropped with its connection as if it were
    /// idle. The loop's thread is held inside a handler while the stop is signalled and
    /// then 50 keep-alive connections send a request each, so that the loop sees the stop
    /// before it reads any of them.
    @Test func aRequestNotYetReadWhenTheStopComesIsAnswered() throws {
        var config = HTTPConfiguration()
        config.port = 0
        config.threads = 1
        let server = HTTPServer(configuration: config, handler: TestHandler())
        try server.start()
        var clients: [RawHTTPClient] = []
        for i in 0..<50 {
            let c = try RawHTTPClient(port: server.port)
            try c.request("/warm/\(i)")
            #expect(try c.readResponse().status == 200)
            clients.append(c)
        }
        let gate = Gates.unique()
        let holder = try RawHTTPClient(port: server.port)
        try holder.request("/hold/\(gate)")
        #expect(Gates.shared[gate].waitForArrivals(1))
        server.stop()
        for (i, c) in clients.enumerated() { try c.request("/last/\(i)") }
        Gates.shared[gate].open()
        #expect(try holder.readResponse().status == 200)
        for (i, c) in clients.enumerated() {
            let r = try c.readResponse()
            #expect(r.text == "/last/\(i)")
            #expect(r.header("Connection") == "close")
        }
        server.wait()
    }

    /// If one loop cannot be made, everything acquired is released (no listening socket
    /// keeps the port, no descriptor leaks) and the same server can start again.
    @Test func aFailedStartReleasesEverythingAndCanBeRetried() throws {
        let port = try freePort()
        var config = HTTPConfiguration()
        config.port = port
        config.threads = 3
        func failingSecondLoop(_ server: HTTPServer) {
            let made = Counter()
            server.setPrepareLoop { listener throws(SystemCallError) in
                if made.increment() == 2 { throw SystemCallError("epoll_create1", errno: EMFILE) }
                return try EventLoop.Resources.make(listener: listener)
            }
        }
        let openBefore = openDescriptors()
        for _ in 0..<100 {
            let server = HTTPServer(configuration: config, handler: TestHandler())
            failingSecondLoop(server)
            #expect(throws: SocketError.self) { try server.start() }
        }
        // Other tests open and close descriptors meanwhile (their servers, their open
        // tiles), so the count is read again until theirs are gone; a leak would be 5 per
        // start, 500 that never go.
        #expect(
            eventually(within: 30) { openDescriptors() - openBefore < 100 },
            "\(openDescriptors() - openBefore) descriptors leaked by 100 failed starts")
        let server = HTTPServer(configuration: config, handler: TestHandler())
        failingSecondLoop(server)
        #expect(throws: SocketError.self) { try server.start() }
        server.setPrepareLoop { listener throws(SystemCallError) in try EventLoop.Resources.make(listener: listener) }
        try server.start()  // the port is free again and the server is not half-started
        defer {
            server.stop()
            server.wait()
        }
        #expect(server.port == port)
        #expect(try fetch(port, "/again").text == "/again")
    }

    /// A loop whose epoll instance fails ends, and says so in the server's log (its clients
    /// only see their connections close); the other loops go on serving.
    @Test func aLoopThatStopsSaysSoInTheLog() throws {
        let recorded = RecordedLog()
        var config = HTTPConfiguration()
        config.port = 0
        config.threads = 2
        let server = HTTPServer(
            configuration: config, handler: TestHandler(),
            log: Logger(label: "test") { _ in RecordingHandler(log: recorded) })
        let made = Counter()
        server.setPrepareLoop { listener throws(SystemCallError) in
            let loop = try EventLoop.Resources.make(listener: listener)
            guard made.increment() == 2 else { return loop }
            // The second loop's "epoll instance" is an eventfd: epoll_wait fails (EINVAL).
            loop.epoll.close()
            let notEpoll = try EventFD.make()
            return EventLoop.Resources(
                epoll: Epoll(descriptor: notEpoll.descriptor), wake: loop.wake, listener: loop.listener,
                mailbox: loop.mailbox)
        }
        try server.start()
        defer {
            server.stop()
            server.wait()
        }
        #expect(eventually { recorded.all.contains { $0.message == "an event loop stopped" } })
        #expect(recorded.all.first?.metadata["error"]?.description.contains("epoll_wait") == true, "\(recorded.all)")
        // A connection the stopped loop's listener took before it closed is reset: ask again.
        #expect(eventually { (try? fetch(server.port, "/alive"))?.text == "/alive" })
    }

    /// `stop()` from another thread while `start()` runs, over and over: no crash, no hang.
    /// A process that starts a program holds a copy of every descriptor until the program
    /// is executed (the test process itself starts tools all the time). A connection the
    /// server closed meanwhile lived on in the copy, and so did its epoll registration:
    /// its events (the client's end of stream, level-triggered) kept coming under its old
    /// number. The next connection accepted under that number took them for its own, and
    /// one whose answer was queued was closed unanswered ("connection closed before a
    /// response head" in CI). Each connection's events are now its own.
    @Test(.timeLimit(.minutes(10))) func aClosedConnectionsCopyDoesNotCloseTheNextWithItsNumber() throws {
        try withServer({
            $0.threads = 1
            $0.renderThreads = 1
        }) { port, _ in
            // The only render thread is held, so that the next render waits in the queue
            // (a queued answer is dropped when its client leaves).
            let hold = Gates.unique()
            let holder = try RawHTTPClient(port: port)
            try holder.request("/render/\(hold)")
            #expect(Gates.shared[hold].waitForArrivals(1))
            defer {
                Gates.shared[hold].open()
                #expect((try? holder.readResponse().text) == "/render/\(hold)")
            }
            var tried = 0
            var reused = 0
            // One reuse is enough (before the fix, every one failed); other tests running
            // in this process may take the number first, so a few tries.
            while tried < 12 && reused < 1 {
                tried += 1
                let a = try RawHTTPClient(port: port)
                try a.request("/a")
                #expect(try a.readResponse().text == "/a")
                let number = try #require(acceptedSocket(port: port, client: a.fd))
                let copy = dup(number)  // what a child being started holds
                defer { close(copy) }
                // The next client's socket is made now, so that it does not take the number.
                let next = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                defer { close(next) }
                var tv = timeval(tv_sec: 20, tv_usec: 0)
                setsockopt(next, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                #expect(shutdown(a.fd, Int32(SHUT_RDWR)) == 0)  // `a` leaves
                // The server closes its end (alive in the copy).
                let deadline = Date().addingTimeInterval(20)
                while sameSocket(number, copy) && Date() < deadline { usleep(1000) }
                #expect(!sameSocket(number, copy))
                // The server's next accept takes the lowest free number: fill those below.
                var fillers: [Int32] = []
                defer { for f in fillers { close(f) } }
                while true {
                    let f = open("/dev/null", O_RDONLY | O_CLOEXEC)
                    guard f >= 0, f < number else {
                        if f >= 0 { close(f) }
                        break
                    }
                    fillers.append(f)
                }
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_port = in_port_t(UInt16(port).bigEndian)
                address.sin_addr.s_addr = inet_addr("127.0.0.1")
                let connected = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(next, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                try #require(connected == 0)
                let request = Array("GET /render/open-\(Gates.unique()) HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
                #expect(request.withUnsafeBytes { send(next, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == request.count)
                // Whether the server accepted it under the old number (others may take it).
                var accepted: Int32?
                while accepted == nil && Date() < deadline {
                    accepted = acceptedSocket(port: port, client: next)
                    if accepted == nil { usleep(1000) }
                }
                guard accepted == number else { continue }
                reused += 1
                // Time for the old connection's events to arrive; the answer waits in the
                // queue meanwhile: the connection must still be open.
                usleep(200_000)
                var byte: UInt8 = 0
                let peeked = recv(next, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
                #expect(
                    peeked < 0 && (errno == EAGAIN || errno == EWOULDBLOCK),
                    "the next connection under number \(number) was closed unanswered")
            }
            #expect(reused > 0, "no connection was accepted under a closed one's number in \(tried) tries")
        }
    }

    @Test func stopRacingStartIsSafe() throws {
        var config = HTTPConfiguration()
        config.port = 0
        config.threads = 2
        for _ in 0..<50 {
            let server = HTTPServer(configuration: config, handler: TestHandler())
            let stopper = Thread { server.stop() }
            stopper.start()
            try server.start()
            server.stop()
            server.wait()
        }
    }
}
