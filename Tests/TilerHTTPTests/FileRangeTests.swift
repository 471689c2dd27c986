import Foundation
import Glibc
import Testing
import TilerSystem
import TilerTestSupport
@testable import TilerHTTP

/// Answers `/range` with bytes 1000..<(1000 + 1 MiB) of a file, sent with `sendfile`, and
/// echoes anything else.
struct FileRangeHandler: HTTPHandler {
    let response: PreparedResponse

    func respond(to head: HTTPRequestHead) -> HTTPResponse {
        if head.target == Array("/range".utf8) { return .prepared(response) }
        return .bytes(status: 200, contentType: "text/plain", body: head.target, cacheControl: nil)
    }
}

/// Responses whose body is a range of an open file, through a real server and socket.
@Suite struct FileRangeTests {
    static let contents = (0..<(1 << 20) + 2000).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 9) }
    static let range = 1000..<(1000 + (1 << 20))

    private func withFileServer(sendBuffer: Int?, _ body: (Int) throws -> Void) throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("file-range-\(UUID().uuidString)").path
        try Data(Self.contents).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        let file = OpenFile(taking: try FileDescriptor.open(path, O_RDONLY))
        let response = PreparedResponse(
            file: FileRange(file: file, offset: Self.range.lowerBound, count: Self.range.count),
            contentType: "application/octet-stream", etag: "\"r1\"", lastModified: nil,
            cacheControl: nil)
        var config = HTTPConfiguration()
        config.port = 0
        config.threads = 1
        let server = HTTPServer(configuration: config, makeHandler: { FileRangeHandler(response: response) })
        server.setSendBufferBytes(sendBuffer)
        try server.start()
        defer {
            server.stop()
            server.wait()
        }
        try body(server.port)
    }

    @Test func aFileRangeIsServedWhole() throws {
        try withFileServer(sendBuffer: nil) { port in
            let c = try RawHTTPClient(port: port)
            for _ in 0..<3 {
                try c.request("/range")
                let r = try c.readResponse()
                #expect(r.status == 200 && r.header("Content-Length") == "\(Self.range.count)")
                #expect(r.body == Array(Self.contents[Self.range]))
            }
            try c.request("/range", headers: ["If-None-Match: \"r1\""])
            #expect(try c.readResponse().status == 304)
        }
    }

    /// A 4 KiB send buffer against a 1 MiB range: over a hundred partial `sendfile`s, each
    /// resumed when the socket is writable again, and pipelined requests behind it.
    @Test func partialWritesUnderATinySendBufferDeliverEveryByte() throws {
        try withFileServer(sendBuffer: 4096) { port in
            let c = try RawHTTPClient(port: port)
            try c.send("GET /range HTTP/1.1\r\nHost: x\r\n\r\nGET /range HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n")
            for _ in 0..<2 {
                let r = try c.readResponse()
                #expect(r.body.count == Self.range.count)
                #expect(r.body == Array(Self.contents[Self.range]))
            }
            #expect(try c.readResponse().text == "/after")
        }
    }

    /// HEAD announces the range's length and sends nothing of it: the GET pipelined behind
    /// would misparse if it did.
    @Test func headOfAFileRangeSendsNoBody() throws {
        try withFileServer(sendBuffer: 4096) { port in
            let c = try RawHTTPClient(port: port)
            try c.send("HEAD /range HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try c.readResponse(bodyless: true)
            #expect(head.status == 200 && head.header("Content-Length") == "\(Self.range.count)")
            #expect(try c.readResponse().text == "/after")
        }
    }
}
