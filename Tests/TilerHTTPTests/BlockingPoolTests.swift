import Foundation
import Testing
import TilerTestSupport
@testable import TilerHTTP

/// The blocking pool through a real server: reads and renders in separate lanes, queue
/// limits, and work dropped for clients that left. Work waits at gates the test opens
/// (see `Gates`), so nothing depends on timing.
@Suite struct BlockingPoolTests {
    /// Both render threads busy and more renders queued: a read still goes straight
    /// through its own lane, while every render is still held.
    @Test func tileReadsDoNotWaitBehindRenders() throws {
        try withServer({
            $0.renderThreads = 2; $0.blockingThreads = 2
        }) { port, server throws in
            let gate = Gates.unique()
            var renders: [RawHTTPClient] = []
            for _ in 0..<6 {
                let c = try RawHTTPClient(port: port)
                try c.request("/render/\(gate)")
                renders.append(c)
            }
            #expect(Gates.shared[gate].waitForArrivals(2))
            #expect(eventually { server.blockingStatistics(.render).queued == 4 })
            let read = try RawHTTPClient(port: port)
            try read.request("/read/\(Gates.unique("open-"))")
            #expect(try read.readResponse().status == 200)
            #expect(Gates.shared[gate].passed == 0)
            #expect(server.blockingStatistics(.render).threads == 2)
            Gates.shared[gate].open()
            for c in renders { #expect(try c.readResponse().status == 200) }
        }
    }

    /// Past the queue limit a request is answered 503 with Retry-After at once, on a
    /// connection that stays usable; what was queued is still served.
    @Test func aFullQueueIs503WithRetryAfter() throws {
        try withServer({
            $0.renderThreads = 1; $0.maximumQueuedRenders = 2
        }) { port, server throws in
            let gate = Gates.unique()
            var accepted: [RawHTTPClient] = []
            for _ in 0..<3 {
                let c = try RawHTTPClient(port: port)
                try c.request("/render/\(gate)")
                accepted.append(c)
            }
            #expect(Gates.shared[gate].waitForArrivals(1))
            #expect(
                eventually { server.blockingStatistics(.render).queued == 2 },
                "\(server.blockingStatistics(.render)) open \(server.openConnections)")
            let refused = try RawHTTPClient(port: port)
            try refused.request("/render/\(gate)")
            let r = try refused.readResponse()
            #expect(r.status == 503)
            #expect(r.header("Retry-After") == "1")
            #expect(r.errorMessage?.contains("retry later") == true)
            try refused.request("/after")
            #expect(try refused.readResponse().text == "/after")
            // Reads have their own queue: not refused.
            try refused.request("/read/\(Gates.unique("open-"))")
            #expect(try refused.readResponse().status == 200)
            #expect(server.blockingStatistics(.render).refused == 1)
            Gates.shared[gate].open()
            for c in accepted { #expect(try c.readResponse().status == 200) }
        }
    }

    /// 40 clients ask for a drawing and leave while it waits in the queue: none of the 40
    /// is drawn. The server notices each hang-up, drops its work and closes.
    @Test func queuedWorkForAClosedConnectionIsDropped() throws {
        try withServer({
            $0.renderThreads = 1; $0.threads = 2; $0.maximumQueuedRenders = 64
        }) { port, server throws in
            let busy = Gates.unique()
            let holder = try RawHTTPClient(port: port)
            try holder.request("/render/\(busy)")
            #expect(Gates.shared[busy].waitForArrivals(1))
            let abandoned = Gates.unique("open-")
            for _ in 0..<40 {
                let c = try RawHTTPClient(port: port)
                try c.request("/render/\(abandoned)")
                // Closing `c` here (end of scope) is the client leaving.
            }
            // (Counting open connections would not do: some of the 40 may still wait to
            // be accepted.)
            #expect(
                eventually { server.blockingStatistics(.render).dropped == 40 },
                "the server did not notice the clients leave: \(server.blockingStatistics(.render))")
            #expect(eventually { server.openConnections == 1 })
            Gates.shared[busy].open()
            #expect(try holder.readResponse().status == 200)
            // A last render, queued after the 40: once it is answered, the lane is past them.
            try holder.request("/render/\(Gates.unique("open-"))")
            #expect(try holder.readResponse().status == 200)
            #expect(Gates.shared[abandoned].arrived == 0, "work for clients that left was run")
            #expect(server.blockingStatistics(.render).dropped == 40, "\(server.blockingStatistics(.render))")
        }
    }

    /// A client that closes its sending side while its answer is being made (not queued)
    /// still gets the answer: the work is not wasted and a half-closed client may read.
    @Test func aHalfClosedClientStillGetsAnAnswerAlreadyBeingMade() throws {
        try withServer({ $0.renderThreads = 1 }) { port, _ throws in
            let gate = Gates.unique()
            let c = try RawHTTPClient(port: port)
            try c.request("/render/\(gate)")
            #expect(Gates.shared[gate].waitForArrivals(1))
            #expect(shutdown(c.fd, Int32(SHUT_WR)) == 0)
            Gates.shared[gate].open()
            let r = try c.readResponse()
            #expect(r.status == 200 && r.text == "/render/\(gate)")
            #expect(c.waitForClose())
        }
    }

    /// The pool alone: per-lane thread caps, FIFO order, cancellation before running.
    @Test func lanesCapTheirThreadsAndDropCancelledJobs() {
        let pool = BlockingPool(read: .init(threads: 3, queueLength: 100), render: .init(threads: 1, queueLength: 100))
        let gate = Gate(open: false)
        let ran = Gates.unique("open-")
        var jobs: [BlockingPool.Job] = []
        for _ in 0..<5 { jobs.append(pool.submit(.render) { gate.pass() }!) }
        #expect(gate.waitForArrivals(1))
        #expect(pool.statistics(.render) == .init(queued: 4, running: 1, finished: 0, dropped: 0, refused: 0, threads: 1, held: 4))
        #expect(!jobs[0].cancel(), "a running job cannot be dropped")
        #expect(jobs[2].cancel() && jobs[3].cancel())
        #expect(!jobs[2].cancel(), "a job is dropped once")
        let reads = (0..<3).map { _ in pool.submit(.read) { Gates.shared[ran].pass() } }
        #expect(reads.allSatisfy { $0 != nil })
        gate.open()
        #expect(eventually { pool.statistics(.render).finished == 3 && Gates.shared[ran].passed == 3 })
        #expect(gate.passed == 3)
        #expect(pool.statistics(.render).dropped == 2)
        pool.shutdown(deadline: .now() + 5)
    }

    /// Clients that come and go while every thread is busy: 100,000 jobs submitted and
    /// cancelled leave nothing queued, and the next job still runs.
    @Test func cancelledJobsDoNotPileUp() {
        let pool = BlockingPool(read: .init(threads: 1, queueLength: 10), render: .init(threads: 1, queueLength: 10))
        let busy = Gate(open: false)
        _ = pool.submit(.render) { busy.pass() }
        #expect(busy.waitForArrivals(1))
        for _ in 0..<100_000 {
            let job = pool.submit(.render) {}
            #expect(job?.cancel() == true)
        }
        let after = pool.statistics(.render)
        #expect(after.queued == 0 && after.dropped == 100_000)
        #expect(after.held <= 2 * 64 + 1, "\(after.held) cancelled jobs are still held")
        let last = Gate(open: true)
        _ = pool.submit(.render) { last.pass() }
        busy.open()
        #expect(last.waitForArrivals(1))
        pool.shutdown(deadline: .now() + 5)
    }
}
