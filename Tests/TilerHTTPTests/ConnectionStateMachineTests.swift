import Foundation
import Glibc
import Testing
import TilerSystem
import TilerTestSupport
@testable import TilerHTTP

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
}
