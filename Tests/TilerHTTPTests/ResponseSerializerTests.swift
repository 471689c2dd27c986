import Testing
@testable import TilerHTTP

@Suite struct ResponseSerializerTests {
    /// The usual answer's first lines and its `X-Request-Id` line, written with one append
    /// (and two digits at a time): the same bytes as written piece by piece, for numbers of
    /// every length and for leads too long for the one-append path; `appendDecimal`, which
    /// writes its digits the same way, for both signs.
    @Test func aLineWithANumberIsItsPiecesInOrder() {
        let prefix = Array("X-Request-Id: 5c1e0a9b3f2d7e41-".utf8)
        var numbers = [0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 4711, 65_535, 123_456_789, Int.max]
        numbers += (1...18).map { n in (0..<n).reduce(1) { a, _ in a * 10 } }
        numbers += (1...18).map { n in (0..<n).reduce(1) { a, _ in a * 10 } - 1 }
        for leadLength in [0, 1, 120, 459, 460, 600] {
            let lead = (0..<leadLength).map { UInt8(ascii: "a") + UInt8($0 % 26) }
            for number in numbers {
                var bytes = Array("kept".utf8)
                bytes.append(lead, thenLine: prefix, decimal: number)
                #expect(bytes == Array("kept".utf8) + lead + prefix + Array("\(number)\r\n".utf8), "\(leadLength) \(number)")
                var line: [UInt8] = []
                line.appendLine(prefix: prefix, decimal: number)
                #expect(line == prefix + Array("\(number)\r\n".utf8))
                for signed in [number, -number, Int.min] {
                    var text: [UInt8] = []
                    text.appendDecimal(signed)
                    #expect(text == Array("\(signed)".utf8))
                }
            }
        }
    }

    /// A prepared answer's head, for both statuses, versions and connection choices, GET
    /// and HEAD, a body copied after its head and one sent from where it is stored: a
    /// loop's date (which carries the common headers, made once a second) gives the bytes
    /// a bare date gives, and those are every header once, the `Connection` line where it
    /// is due, one empty line at the end and the body (for GET and 200). Sent in any
    /// number of pieces, what is left is the rest of those bytes.
    @Test func preparedAnswersAreWholeWhicheverDateTheyStartFrom() {
        let serializer = ResponseSerializer(corsAllowOrigin: "*")
        let large = (0..<2000).map { UInt8(ascii: "a") + UInt8($0 % 26) }
        for body in [Array("tile".utf8), large] {
            let prepared = PreparedResponse(
                body: body, contentType: "image/png", etag: "\"e\"", lastModified: 784_111_777,
                cacheControl: "public, max-age=60")
            #expect(prepared.body == body && prepared.contentLength == body.count)
            for version in [HTTPVersion.http11, .http10] {
                for keepAlive in [true, false] {
                    for conditional in [false, true] {
                        for method in [HTTPMethod.get, .head] {
                            var head = HTTPRequestHead()
                            head.method = method
                            head.version = version
                            if conditional { head.ifNoneMatch = Array("\"e\"".utf8) }
                            func queue(_ date: ResponseDate) -> OutputQueue {
                                var out = OutputQueue()
                                _ = serializer.write(
                                    .prepared(prepared), for: head, keepAlive: keepAlive, date: date, into: &out)
                                return out
                            }
                            var expected = conditional ? "HTTP/1.1 304 Not Modified\r\n" : "HTTP/1.1 200 OK\r\n"
                            expected += "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nX-Content-Type-Options: nosniff\r\n"
                            expected += "Access-Control-Allow-Origin: *\r\n"
                            if !conditional { expected += "Content-Type: image/png\r\nContent-Length: \(body.count)\r\n" }
                            expected += "ETag: \"e\"\r\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                            expected += "Cache-Control: public, max-age=60\r\n"
                            if !keepAlive {
                                expected += "Connection: close\r\n"
                            } else if version == .http10 {
                                expected += "Connection: keep-alive\r\n"
                            }
                            expected += "\r\n"
                            if !conditional && method == .get { expected += String(decoding: body, as: UTF8.self) }
                            let what = "\(body.count) bytes \(version) \(method) keepAlive \(keepAlive) conditional \(conditional)"
                            #expect(Self.leadingText(queue(serializer.date(wallSeconds: 784_111_777))) == expected, "\(what)")
                            #expect(Self.leadingText(queue(ResponseDate(wallSeconds: 784_111_777))) == expected, "\(what)")
                            // Sent in pieces of 1, 37 and 500 bytes: what is left is the rest.
                            for piece in [1, 37, 500] {
                                var out = queue(serializer.date(wallSeconds: 784_111_777))
                                var sent = 0
                                while !out.isEmpty {
                                    let n = min(piece, out.count)
                                    out.consume(n)
                                    sent += n
                                    if sent % 3 == 0 || out.isEmpty {
                                        #expect(Self.leadingText(out) == String(expected.utf8.dropFirst(sent))!, "\(what)")
                                    }
                                }
                                #expect(sent == expected.utf8.count, "\(what)")
                            }
                        }
                    }
                }
            }
        }
    }

    /// The bytes `out` would send next, as text.
    static func leadingText(_ out: OutputQueue) -> String {
        let bytes = out.withLeadingBytes { vectors in
            vectors.reduce(into: [UInt8]()) { $0 += UnsafeRawBufferPointer(start: $1.iov_base, count: $1.iov_len) }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
