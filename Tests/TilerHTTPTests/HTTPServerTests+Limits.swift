import Foundation
import Logging
import Testing
import TilerSystem
import TilerTestSupport
@testable import TilerHTTP

/// Requests past the server's limits (request line, header count and size, bodies,
/// connections) and malformed ones: each gets its status and the server keeps serving.
extension HTTPServerTests {
    /// The whole 100 KB goes out (the server reads and drops the rest of the request
    /// after answering, rather than resetting the connection), then the 414 comes back.
    @Test func hugeRequestLineIs414AndCloses() throws {
        try withServer { port, _ throws in
            let c = try RawHTTPClient(port: port)
            try c.send("GET /\(String(repeating: "a", count: 100_000)) HTTP/1.1\r\nHost: x\r\n\r\n")
            let r = try c.readResponse()
            #expect(r.status == 414)
            #expect(r.header("Connection") == "close")
            #expect(c.waitForClose())
            try expectStillServing(port)
        }
    }

    @Test func twoThousandHeadersAre431() throws {
        try withServer { port, _ throws in
            let c = try RawHTTPClient(port: port)
            try? c.send("GET / HTTP/1.1\r\nHost: x\r\n" + (0..<2000).map { "X-H\($0): v\r\n" }.joined() + "\r\n")
            let r = try c.readResponse()
            #expect(r.status == 431)
            #expect(c.waitForClose())
            try expectStillServing(port)
        }
    }

    @Test func oversizedHeaderSectionIs431() throws {
        try withServer { port, _ throws in
            let c = try RawHTTPClient(port: port)
            try? c.send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "b", count: 20_000))\r\n\r\n")
            #expect(try c.readResponse().status == 431)
            try expectStillServing(port)
        }
    }

    @Test func garbageIs400AndClosed() throws {
        try withServer { port, _ throws in
            let c = try RawHTTPClient(port: port)
            try c.send([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03] + Array("\r\n\r\n".utf8))
            let r = try c.readResponse()
            #expect(r.status == 400)
            #expect(r.header("Connection") == "close")
            #expect(r.errorMessage != nil)
            #expect(c.waitForClose())
            try expectStillServing(port)
        }
    }

    @Test func contentLengthWithTransferEncodingIs400() throws {
        try withServer { port, _ throws in
            let c = try RawHTTPClient(port: port)
            try c.send("GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
            #expect(try c.readResponse().status == 400)
            #expect(c.waitForClose())
            try expectStillServing(port)
        }
    }

    @Test func requestBodiesAre413() throws {
        try withServer { port, _ throws in
            let c = try RawHTTPClient(port: port)
            try c.send("GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" + String(repeating: "z", count: 5000))
            #expect(try c.readResponse().status == 413)
            #expect(c.waitForClose())
            try expectStillServing(port)
        }
    }

    @Test func connectionsPastTheCapGet503() throws {
        try withServer({
            $0.maximumConnections = 4; $0.threads = 1
        }) { port, server throws in
            let held = try (0..<4).map { _ in try RawHTTPClient(port: port) }
            for (i, c) in held.enumerated() {
                try c.request("/h\(i)")
                _ = try c.readResponse()
            }
            let extra = try RawHTTPClient(port: port)
            let r = try extra.readResponse()
            #expect(r.status == 503)
            #expect(r.header("Date").flatMap { HTTPDate.parse(Array($0.utf8)) }.map { abs($0 - SystemClock.wallSeconds()) < 5 } == true)
            #expect(extra.waitForClose())
            #expect(server.openConnections == 4)
            // Capacity comes back when a connection closes.
            #expect(shutdown(held[0].fd, Int32(SHUT_RDWR)) == 0)  // one client leaves
            #expect(eventually { server.openConnections == 3 })
            let again = try RawHTTPClient(port: port)
            try again.request("/again")
            #expect(try again.readResponse().text == "/again")
            for (i, c) in held.dropFirst().enumerated() {  // the others were never disturbed
                try c.request("/still/\(i)")
                #expect(try c.readResponse().text == "/still/\(i)")
            }
        }
    }
}
