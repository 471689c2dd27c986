import Foundation
import Testing
import TilerTestSupport
@testable import TilerHTTP

/// A server's stop as each connection sees it, and the end of the grace period.
extension ConnectionStateMachineTests {
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
}
