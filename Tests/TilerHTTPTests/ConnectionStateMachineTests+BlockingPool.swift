import Foundation
import Testing
import TilerTestSupport
@testable import TilerHTTP

/// Answers made on the blocking pool: order, a full queue, clients that leave meanwhile.
extension ConnectionStateMachineTests {
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
}
