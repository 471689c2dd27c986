import Testing
@testable import TilerHTTP

@Suite struct ResponseSerializerTests {
    /// A prepared answer's head, for both statuses, versions and connection choices: a
    /// loop's date (which carries the common headers, made once a second) gives the bytes
    /// a bare date gives, and those are every header once, the `Connection` line where it
    /// is due and one empty line at the end.
    @Test func preparedAnswersAreWholeWhicheverDateTheyStartFrom() {
        let serializer = ResponseSerializer(corsAllowOrigin: "*")
        let prepared = PreparedResponse(
            body: Array("tile".utf8), contentType: "image/png", etag: "\"e\"", lastModified: 784_111_777,
            cacheControl: "public, max-age=60")
        for version in [HTTPVersion.http11, .http10] {
            for keepAlive in [true, false] {
                for conditional in [false, true] {
                    var head = HTTPRequestHead()
                    head.method = .get
                    head.version = version
                    if conditional { head.ifNoneMatch = Array("\"e\"".utf8) }
                    func answer(_ date: ResponseDate) -> String {
                        var out = OutputQueue()
                        _ = serializer.write(.prepared(prepared), for: head, keepAlive: keepAlive, date: date, into: &out)
                        let bytes = out.withLeadingBytes { vectors in
                            vectors.reduce(into: [UInt8]()) {
                                $0 += UnsafeRawBufferPointer(start: $1.iov_base, count: $1.iov_len)
                            }
                        }
                        return String(decoding: bytes, as: UTF8.self)
                    }
                    var expected = conditional ? "HTTP/1.1 304 Not Modified\r\n" : "HTTP/1.1 200 OK\r\n"
                    expected += "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nAccess-Control-Allow-Origin: *\r\n"
                    if !conditional { expected += "Content-Type: image/png\r\nContent-Length: 4\r\n" }
                    expected += "ETag: \"e\"\r\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                    expected += "Cache-Control: public, max-age=60\r\n"
                    if !keepAlive {
                        expected += "Connection: close\r\n"
                    } else if version == .http10 {
                        expected += "Connection: keep-alive\r\n"
                    }
                    expected += conditional ? "\r\n" : "\r\ntile"
                    let loop = answer(serializer.date(wallSeconds: 784_111_777))
                    #expect(loop == expected, "\(version) keepAlive \(keepAlive) conditional \(conditional)")
                    #expect(answer(ResponseDate(wallSeconds: 784_111_777)) == expected)
                }
            }
        }
    }
}
