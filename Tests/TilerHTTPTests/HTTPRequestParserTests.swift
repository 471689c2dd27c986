import Testing
@testable import TilerHTTP

/// Feeds `text` in one call (or byte by byte) and returns the statuses produced.
private func parseAll(_ bytes: [UInt8], limits: HTTPRequestParser.Limits = .init(), byteByByte: Bool = false)
    -> (statuses: [HTTPRequestParser.Status], heads: [HTTPRequestHead])
{
    var parser = HTTPRequestParser(limits: limits)
    var statuses: [HTTPRequestParser.Status] = []
    var heads: [HTTPRequestHead] = []
    let chunks: [[UInt8]] = byteByByte ? bytes.map { [$0] } : [bytes]
    outer: for chunk in chunks {
        var offset = 0
        while offset < chunk.count {
            let r = chunk[offset...].withUnsafeBytes { parser.parse($0) }
            offset += r.consumed
            switch r.status {
            case .needMore: break
            case .complete:
                statuses.append(.complete)
                heads.append(parser.head)
            case .failed:
                statuses.append(r.status)
                break outer
            }
            if r.status == .needMore { break }
        }
    }
    return (statuses, heads)
}

private func status(of text: String, limits: HTTPRequestParser.Limits = .init()) -> Int? {
    let r = parseAll(Array(text.utf8), limits: limits)
    if case .failed(let e)? = r.statuses.last { return e.status }
    return r.statuses.last == .complete ? 200 : nil
}

@Suite struct HTTPRequestParserTests {
    let get =
        "GET /images/a/tiles/1/2/3.png?x=1 HTTP/1.1\r\nHost: h\r\nIf-None-Match: \"abc\"\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\nConnection: keep-alive\r\n\r\n"

    @Test func parsesARequestHead() {
        let r = parseAll(Array(get.utf8))
        #expect(r.statuses == [.complete])
        let h = r.heads[0]
        #expect(h.method == .get)
        #expect(h.version == .http11)
        #expect(String(decoding: h.target, as: UTF8.self) == "/images/a/tiles/1/2/3.png?x=1")
        #expect(h.pathLength == "/images/a/tiles/1/2/3.png".utf8.count)
        #expect(String(decoding: h.ifNoneMatch, as: UTF8.self) == "\"abc\"")
        #expect(String(decoding: h.ifModifiedSince, as: UTF8.self) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(h.keepAlive)
    }

    /// `Authorization` is kept whole; of `Cookie`, only the `tiler_token` cookie's value
    /// (unquoted; the first when sent twice), however long the rest of the line; a token
    /// past `maximumTokenBytes` is 431. The same in one piece and byte by byte.
    @Test func keepsTheAuthorizationAndTheTokenCookie() {
        let token = "eyJhbGciOiJIUzI1NiJ9.eyJleHAiOjF9.c2ln"
        let others = (0..<40).map { "c\($0)=\(String(repeating: "v", count: 50))" }.joined(separator: "; ")
        let cases: [(headers: String, authorization: String, cookie: String)] = [
            ("Authorization: Bearer \(token)\r\n", "Bearer \(token)", ""),
            ("Cookie: a=1; tiler_token=\(token); b=2\r\n", "", token),
            ("Cookie: tiler_token=\"\(token)\"\r\n", "", token),
            ("Cookie: \(others)\r\nCookie: tiler_token=\(token)\r\n", "", token),
            ("Cookie: tiler_token=first; tiler_token=second\r\n", "", "first"),
            ("Cookie: xtiler_token=\(token); tiler_tokenx=1\r\n", "", ""),
            ("Cookie: \(others)\r\n", "", ""),
        ]
        for c in cases {
            for byteByByte in [false, true] {
                let r = parseAll(Array("GET / HTTP/1.1\r\nHost: h\r\n\(c.headers)\r\n".utf8), byteByByte: byteByByte)
                #expect(r.statuses == [.complete], "\(c.headers.prefix(60))")
                #expect(String(decoding: r.heads.first?.authorization ?? [], as: UTF8.self) == c.authorization)
                #expect(String(decoding: r.heads.first?.cookieToken ?? [], as: UTF8.self) == c.cookie, "\(c.headers.prefix(60))")
            }
        }
        let long = String(repeating: "t", count: HTTPRequestParser.maximumTokenBytes + 1)
        #expect(status(of: "GET / HTTP/1.1\r\nHost: h\r\nCookie: tiler_token=\(long)\r\n\r\n") == 431)
        #expect(status(of: "GET / HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer \(long)\r\n\r\n") == 431)
        let fits = String(repeating: "t", count: HTTPRequestParser.maximumTokenBytes)
        #expect(status(of: "GET / HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer \(fits)\r\n\r\n") == 200)
        // The next request on the connection starts with neither.
        let two = parseAll(
            Array(
                "GET / HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer x\r\nCookie: tiler_token=y\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"
                    .utf8))
        #expect(two.heads.count == 2 && two.heads[1].authorization.isEmpty && two.heads[1].cookieToken.isEmpty)
        // A connection's tokens in turn: the same length (copied in place), none, another
        // length, two headers in one request (the last Authorization, the first cookie).
        let sequence: [(headers: String, authorization: String, cookie: String)] = [
            ("Authorization: Bearer aaaa\r\nCookie: tiler_token=cccc\r\n", "Bearer aaaa", "cccc"),
            ("Authorization: Bearer bbbb\r\nCookie: tiler_token=dddd\r\n", "Bearer bbbb", "dddd"),
            ("", "", ""),
            ("Authorization: Bearer e\r\nCookie: tiler_token=ffffff\r\n", "Bearer e", "ffffff"),
            ("Authorization: Bearer g\r\nAuthorization: Bearer h\r\nCookie: tiler_token=ii; tiler_token=jj\r\n", "Bearer h", "ii"),
            ("Cookie: tiler_token=kk\r\n", "", "kk"),
            ("Authorization: Bearer ll\r\n", "Bearer ll", ""),
        ]
        for byteByByte in [false, true] {
            let heads = parseAll(
                Array(sequence.map { "GET / HTTP/1.1\r\nHost: h\r\n\($0.headers)\r\n" }.joined().utf8), byteByByte: byteByByte
            ).heads
            #expect(heads.count == sequence.count)
            for (head, c) in zip(heads, sequence) {
                #expect(String(decoding: head.authorization, as: UTF8.self) == c.authorization, "\(c.headers)")
                #expect(String(decoding: head.cookieToken, as: UTF8.self) == c.cookie, "\(c.headers)")
            }
        }
    }

    /// Each new credential value a connection sends gets a new number, and the same bytes
    /// again keep theirs (what `CredentialMemo` notes are about): sent again as they are
    /// (compared as one block), with other blanks around them, or after a request that
    /// changed only the other credential; a value that starts like the last one, a value
    /// after a request without one, and a second header in one request are new; 0 with
    /// none. The name in any case.
    @Test func numbersEachNewCredentialValue() {
        // (headers, authorization, its number's label, cookie, its number's label): equal
        // labels, equal numbers; "-" for 0.
        let sequence: [(String, String, String, String, String)] = [
            ("Authorization: Bearer aaaa\r\n", "Bearer aaaa", "A", "", "-"),
            ("Authorization: Bearer aaaa\r\n", "Bearer aaaa", "A", "", "-"),
            ("authorization:   Bearer aaaa  \r\n", "Bearer aaaa", "A", "", "-"),
            ("AUTHORIZATION:Bearer aaaa\r\nCookie: tiler_token=cc\r\n", "Bearer aaaa", "A", "cc", "C"),
            ("Authorization: Bearer aaaaX\r\nCookie: x=1; tiler_token=cc\r\n", "Bearer aaaaX", "B", "cc", "C"),
            ("Authorization: Bearer aaaa\r\nCookie: tiler_token=cd\r\n", "Bearer aaaa", "D", "cd", "E"),
            ("", "", "-", "", "-"),
            ("Authorization: Bearer aaaa\r\n", "Bearer aaaa", "F", "", "-"),
            ("Authorization: Bearer aaaa\r\nAuthorization: Bearer aaab\r\n", "Bearer aaab", "G", "", "-"),
            ("Authorization: Bearer aaab\r\n", "Bearer aaab", "G", "", "-"),
            ("Authorizatio: Bearer aaab\r\n", "", "-", "", "-"),
        ]
        for (byteByByte, memo) in [(false, true), (true, true), (false, false)] {
            let heads = parseAll(
                Array(sequence.map { "GET / HTTP/1.1\r\nHost: h\r\n\($0.0)\r\n" }.joined().utf8),
                limits: .init(credentialMemo: memo), byteByByte: byteByByte
            ).heads
            #expect(heads.count == sequence.count)
            var numbers: [String: UInt64] = [:]
            for (head, c) in zip(heads, sequence) {
                #expect(String(decoding: head.authorization, as: UTF8.self) == c.1, "\(c.0)")
                #expect(String(decoding: head.cookieToken, as: UTF8.self) == c.3, "\(c.0)")
                for (serial, label) in [(head.authorizationSerial, c.2), (head.cookieTokenSerial, c.4)] {
                    if label == "-" {
                        #expect(serial == 0, "\(c.0)")
                    } else if let known = numbers[label] {
                        #expect(serial == known, "\(c.0): \(label)")
                    } else {
                        #expect(serial != 0 && !numbers.values.contains(serial), "\(c.0): \(label) is new")
                        numbers[label] = serial
                    }
                }
                #expect((head.credentialMemo != nil) == memo, "only when asked for")
            }
            #expect(heads.dropFirst().allSatisfy { $0.credentialMemo === heads[0].credentialMemo }, "one memo per connection")
        }
    }

    @Test func byteByByteGivesTheSameHead() {
        let whole = parseAll(Array(get.utf8)).heads[0]
        let split = parseAll(Array(get.utf8), byteByByte: true)
        #expect(split.statuses == [.complete])
        #expect(split.heads[0].target == whole.target)
        #expect(split.heads[0].ifNoneMatch == whole.ifNoneMatch)
    }

    @Test func pipelinedRequestsComeOutInOrder() {
        let text = (1...5).map { "GET /\($0) HTTP/1.1\r\nHost: h\r\n\r\n" }.joined()
        for byteByByte in [false, true] {
            let r = parseAll(Array(text.utf8), byteByByte: byteByByte)
            #expect(r.statuses.count == 5)
            #expect(r.heads.map { String(decoding: $0.target, as: UTF8.self) } == ["/1", "/2", "/3", "/4", "/5"])
        }
    }

    /// Target and `Host` are replaced, not emptied, between requests: a request never
    /// keeps the one before's (an HTTP/1.0 request may have no `Host` at all).
    @Test func nothingOfTheRequestBeforeIsKept() {
        let text =
            "GET /a/long/target HTTP/1.1\r\nHost: example.org:8080\r\nAccept: application/json\r\n"
            + "accept: text/html;q=0.5\r\n\r\nGET /b HTTP/1.0\r\n\r\n"
            + "GET /c HTTP/1.1\r\nHost: h\r\nACCEPT:*/* \r\n\r\n"
        for byteByByte in [false, true] {
            let r = parseAll(Array(text.utf8), byteByByte: byteByByte)
            #expect(r.heads.map { String(decoding: $0.target, as: UTF8.self) } == ["/a/long/target", "/b", "/c"])
            #expect(r.heads.map { String(decoding: $0.host, as: UTF8.self) } == ["example.org:8080", "", "h"])
            #expect(
                r.heads.map { String(decoding: $0.accept, as: UTF8.self) } == ["application/json,text/html;q=0.5", "", "*/*"])
        }
    }

    @Test func methodsAndVersions() {
        #expect(parseAll(Array("HEAD / HTTP/1.1\r\nHost: h\r\n\r\n".utf8)).heads.first?.method == .head)
        #expect(parseAll(Array("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n".utf8)).heads.first?.method == .options)
        #expect(parseAll(Array("DELETE / HTTP/1.1\r\nHost: h\r\n\r\n".utf8)).heads.first?.method == .other)
        let ten = parseAll(Array("GET / HTTP/1.0\r\n\r\n".utf8)).heads[0]
        #expect(ten.version == .http10 && !ten.keepAlive)
        let tenKeep = parseAll(Array("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n".utf8)).heads[0]
        #expect(tenKeep.keepAlive)
        let close = parseAll(Array("GET / HTTP/1.1\r\nHost: h\r\nConnection: foo, close\r\n\r\n".utf8)).heads[0]
        #expect(!close.keepAlive)
        #expect(status(of: "GET / HTTP/2.0\r\nHost: h\r\n\r\n") == 505)
        #expect(status(of: "GET / HTTP/1.x\r\nHost: h\r\n\r\n") == 400)
        #expect(status(of: "GET /\r\n\r\n") == 400)  // HTTP/0.9
    }

    @Test func bareLineFeedsAndLeadingEmptyLinesAreAccepted() {
        #expect(status(of: "\r\n\r\nGET / HTTP/1.1\nHost: h\n\n") == 200)
    }

    /// Empty lines before a request line are part of its head: the parser is no longer
    /// idle once one arrives (so the head timeout runs), and they count toward the
    /// request-line limit together with the line that follows.
    @Test func leadingEmptyLinesCountTowardTheRequestHead() {
        var parser = HTTPRequestParser()
        #expect(parser.isIdle)
        let r = Array("\r\n".utf8).withUnsafeBytes { parser.parse($0) }
        #expect(r.status == .needMore && r.consumed == 2)
        #expect(!parser.isIdle)
        let small = HTTPRequestParser.Limits(maximumRequestLineBytes: 100)
        let line = "GET /\(String(repeating: "a", count: 30)) HTTP/1.1\r\nHost: h\r\n\r\n"
        #expect(status(of: String(repeating: "\r\n", count: 20) + line, limits: small) == 200)
        #expect(status(of: String(repeating: "\r\n", count: 40) + line, limits: small) == 414)
        #expect(status(of: String(repeating: "\n", count: 101), limits: small) == 414)
        // After a complete request the parser is idle again, until the next byte.
        var p = HTTPRequestParser()
        let done = Array(("\r\n" + line).utf8).withUnsafeBytes { p.parse($0) }
        #expect(done.status == .complete && p.isIdle)
    }

    @Test func absoluteFormIsReducedToThePath() {
        let h = parseAll(Array("GET http://example.com/healthz?a HTTP/1.1\r\nHost: h\r\n\r\n".utf8)).heads[0]
        #expect(String(decoding: h.target, as: UTF8.self) == "/healthz?a")
        #expect(status(of: "GET healthz HTTP/1.1\r\nHost: h\r\n\r\n") == 400)
    }

    @Test func malformedRequestsAre400() {
        for text in [
            "\u{01}\u{02}garbage\r\n\r\n",
            "GET  / HTTP/1.1\r\nHost: h\r\n\r\n",
            "GET /a b HTTP/1.1\r\nHost: h\r\n\r\n",
            "GET /\u{7F} HTTP/1.1\r\nHost: h\r\n\r\n",
            "GET / HTTP/1.1\r\nHost : h\r\n\r\n",  // space before colon
            "GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n",  // obs-fold
            "GET / HTTP/1.1\r\n: empty\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\rX\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\u{0}b\r\n\r\n",
            "GET / HTTP/1.1\r\n\r\n",  // no Host
            "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1x\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n",
        ] {
            #expect(status(of: text) == 400, "\(text.debugDescription)")
        }
    }

    @Test func limitsGiveTheirStatuses() {
        let small = HTTPRequestParser.Limits(maximumRequestLineBytes: 100, maximumHeaderBytes: 200, maximumHeaderCount: 5)
        #expect(status(of: "GET /\(String(repeating: "a", count: 100)) HTTP/1.1\r\nHost: h\r\n\r\n", limits: small) == 414)
        #expect(status(of: "GET /\(String(repeating: "a", count: 80)) HTTP/1.1\r\nHost: h\r\n\r\n", limits: small) == 200)
        // A version too long at the very byte that passes the line's limit is 414 (the
        // line is checked first); one byte earlier it is a malformed version.
        #expect(status(of: "GET /\(String(repeating: "a", count: 86)) HTTP/1.10\r\nHost: h\r\n\r\n", limits: small) == 414)
        #expect(status(of: "GET /\(String(repeating: "a", count: 85)) HTTP/1.10\r\nHost: h\r\n\r\n", limits: small) == 400)
        let many = (0..<6).map { "X-\($0): y\r\n" }.joined()
        #expect(status(of: "GET / HTTP/1.1\r\nHost: h\r\n\(many)\r\n", limits: small) == 431)
        #expect(status(of: "GET / HTTP/1.1\r\nHost: h\r\nX: \(String(repeating: "v", count: 300))\r\n\r\n", limits: small) == 431)
        #expect(status(of: "GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n") == 413)
        #expect(status(of: "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx") == 413)
        #expect(status(of: "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n") == 200)
        // A kept field's value (Host here) may hold 1,024 bytes, its blanks at the end
        // included; a value the parser does not keep only counts toward the section. The
        // same whole (one pass) and byte by byte.
        for byteByByte in [false, true] {
            func status(_ text: String) -> Int? {
                let r = parseAll(Array(text.utf8), byteByByte: byteByByte)
                if case .failed(let e)? = r.statuses.last { return e.status }
                return r.statuses.last == .complete ? 200 : nil
            }
            let h1024 = String(repeating: "h", count: 1024)
            #expect(status("GET / HTTP/1.1\r\nHost: \(h1024)\r\n\r\n") == 200)
            #expect(status("GET / HTTP/1.1\r\nHost: \(h1024) \r\n\r\n") == 431)
            #expect(status("GET / HTTP/1.1\r\nHost: h\r\nX-Other: \(h1024)\(h1024)\r\n\r\n") == 200)
        }
    }

    /// A refused head stops just after the byte that breaks the rule, counted by hand here
    /// (`runsTakenInOnePieceMatchBytesTakenOneByOne` compares the parser with itself).
    @Test func refusalsStopAfterTheByteThatBreaksTheRule() {
        let limits = HTTPRequestParser.Limits(maximumRequestLineBytes: 100, maximumHeaderBytes: 40, maximumHeaderCount: 5)
        func stop(_ text: String) -> [Int] {
            var parser = HTTPRequestParser(limits: limits)
            let r = Array(text.utf8).withUnsafeBytes { parser.parse($0) }
            guard case .failed(let e) = r.status else { return [] }
            return [e.status, r.consumed]
        }
        // A method's 33rd byte.
        #expect(stop(String(repeating: "M", count: 40) + " / HTTP/1.1\r\n") == [400, 33])
        // A version's 9th byte, after the 6 bytes of "GET / ".
        #expect(stop("GET / HTTP/1.10\r\n") == [400, 15])
        // The line's 101st byte, the version's 5th: "GET ", a 91-byte target and a space
        // come first.
        #expect(stop("GET /\(String(repeating: "a", count: 90)) HTTP/1.1\r\n") == [414, 101])
        // The header section's 41st byte: the request line is 16 bytes, "Host: h\r\n" 9,
        // and the long name's 32nd byte is the 41st.
        #expect(stop("GET / HTTP/1.1\r\nHost: h\r\n\(String(repeating: "n", count: 50)): v\r\n\r\n") == [431, 57])
        // The target's 101st line byte.
        #expect(stop("GET /\(String(repeating: "a", count: 100)) HTTP/1.1\r\n") == [414, 101])
    }

    @Test func smallBodiesWithinTheLimitAreSkipped() {
        let limits = HTTPRequestParser.Limits(maximumBodyBytes: 10)
        let text = "GET /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: h\r\n\r\n"
        for byteByByte in [false, true] {
            let r = parseAll(Array(text.utf8), limits: limits, byteByByte: byteByByte)
            #expect(r.heads.map { String(decoding: $0.target, as: UTF8.self) } == ["/a", "/b"])
        }
    }

    /// The parser takes a whole head in one pass, and a target's and a header value's bytes
    /// in one piece; fed one byte at a time it takes them state by state. All must give the
    /// same heads, and fail with the same status at the same byte, for heads near every
    /// limit, with bad bytes inside, and with everything the one pass leaves to the states
    /// (leading empty lines, bare line feeds, absolute-form, bodies, repeated fields).
    @Test func runsTakenInOnePieceMatchBytesTakenOneByOne() {
        var rng = SystemRandomNumberGenerator()
        let limits = HTTPRequestParser.Limits(
            maximumRequestLineBytes: 64, maximumHeaderBytes: 160, maximumHeaderCount: 6, maximumBodyBytes: 8)
        func text(_ count: Int, bad: Bool) -> String {
            let alphabet = Array("abcXYZ019-._~%/?#=&\\")
            var s = String((0..<count).map { _ in alphabet.randomElement(using: &rng)! })
            if bad && !s.isEmpty {
                let i = s.index(s.startIndex, offsetBy: Int.random(in: 0..<s.count, using: &rng))
                s.replaceSubrange(i...i, with: ["\u{7F}", "\u{01}", " ", "\t", "é"].randomElement(using: &rng)!)
            }
            return s
        }
        /// Heads as comparable text, the statuses, and the offset where parsing stopped.
        func run(_ bytes: [UInt8], chunk: Int) -> ([String], [HTTPRequestParser.Status], Int) {
            var parser = HTTPRequestParser(limits: limits)
            var heads: [String] = []
            var statuses: [HTTPRequestParser.Status] = []
            var offset = 0
            var end = 0
            feeding: while end < bytes.count {
                end = min(end + chunk, bytes.count)
                while offset < end {
                    let r = bytes[offset..<end].withUnsafeBytes { parser.parse($0) }
                    offset += r.consumed
                    statuses.append(r.status)
                    switch r.status {
                    case .needMore: continue feeding
                    case .failed: break feeding
                    case .complete:
                        let h = parser.head
                        heads.append(
                            "\(h.method) \(h.version) \(h.keepAlive) \(h.connectionClose) \(h.connectionKeepAlive) "
                                + "\(String(describing: h.contentLength)) \(h.hasTransferEncoding) \(h.hasHost) "
                                + [h.target, h.host, h.ifNoneMatch, h.ifModifiedSince, h.forwarded, h.xForwardedHost, h.accept]
                                .map { String(decoding: $0, as: UTF8.self) }.joined(separator: "|"))
                    }
                }
            }
            return (heads, statuses.filter { $0 != .needMore }, offset)
        }
        for _ in 0..<3000 {
            var target = "/" + text(Int.random(in: 0...70, using: &rng), bad: Int.random(in: 0..<8, using: &rng) == 0)
            if Int.random(in: 0..<10, using: &rng) == 0 {
                target = ["*", "http://h" + target, "HTTPS://h", "x"].randomElement(using: &rng)!
            }
            let method = [
                "GET", "HEAD", "OPTIONS", "POST", "GE T", "get", "GET\u{7F}", String(repeating: "M", count: 32),
                String(repeating: "M", count: 33), "VERYLONGMETHODNAMEWITHMORETHANTHIRTYTWOBYTES",
            ].randomElement(using: &rng)!
            let version = [
                "HTTP/1.1", "HTTP/1.0", "HTTP/1.10", "HTTP/2.0", "HTTP/1.1 x", "http/1.1", "HTTP/1.", "HTTP/1.1\u{01}",
            ].randomElement(using: &rng)!
            // Mostly CR LF; now and then a bare line feed.
            func end() -> String { Int.random(in: 0..<12, using: &rng) == 0 ? "\n" : "\r\n" }
            var head = ["", "", "", "", "\r\n", "\n"].randomElement(using: &rng)!
            head += "\(method) \(target) \(version)\(end())"
            if Int.random(in: 0..<10, using: &rng) > 0 { head += "Host: \(text(Int.random(in: 0...20, using: &rng), bad: false))\(end())" }
            for _ in 0..<Int.random(in: 0...3, using: &rng) {
                let name = [
                    "If-None-Match", "IF-MODIFIED-SINCE", "Forwarded", "X-Forwarded-Host", "X-Other", "Accept",
                    "X-A-Header-Name-Longer-Than-Thirty-Two-Bytes", "Bad Name", "Host", "Connection", "X-Bad\u{01}Name",
                    "Content-Length", "Transfer-Encoding", " Folded", "Name ",
                ].randomElement(using: &rng)!
                let value =
                    switch name {
                    case "Connection": [" close", "Keep-Alive ,\tx", "keep-alive", "", "\t"].randomElement(using: &rng)!
                    case "Content-Length": ["0", "3", "9", "x1", "00", ""].randomElement(using: &rng)!
                    default: text(Int.random(in: 0...150, using: &rng), bad: Int.random(in: 0..<8, using: &rng) == 0)
                    }
                let before = [" ", "  ", "", "\t"].randomElement(using: &rng)!
                let after = [" ", "", "\t"].randomElement(using: &rng)!
                head += "\(name):\(before)\(value)\(after)\(end())"
            }
            let bytes = Array((head + end() + "abcGET /next HTTP/1.1\r\nHost: h\r\n\r\n").utf8)
            let whole = run(bytes, chunk: bytes.count)
            let oneByOne = run(bytes, chunk: 1)
            let pieces = run(bytes, chunk: Int.random(in: 2...17, using: &rng))
            #expect(whole.0 == oneByOne.0 && whole.1 == oneByOne.1 && whole.2 == oneByOne.2, "\(head.debugDescription)")
            #expect(pieces.0 == oneByOne.0 && pieces.1 == oneByOne.1 && pieces.2 == oneByOne.2, "\(head.debugDescription)")
        }
    }

    /// The parser passes over a method, a header name, a target and a header value sixteen
    /// bytes at a time (the C scans of `CByteScan`): each run must end exactly where the
    /// byte test first refuses, from any start, at any length (whole chunks, the last
    /// overlapping chunk, runs shorter than a chunk).
    @Test func chunkScansAgreeWithByteTests() {
        var rng = SystemRandomNumberGenerator()
        let edges: [UInt8] = [
            0x00, 0x01, 0x08, 0x09, 0x0A, 0x0D, 0x1F, 0x20, 0x21, 0x22, 0x3A, 0x7D, 0x7E, 0x7F, 0x80, 0x81, 0xFE, 0xFF,
        ]
        func firstRefused(_ bytes: [UInt8], _ start: Int, _ test: (UInt8) -> Bool) -> Int {
            bytes[start...].firstIndex { !test($0) } ?? bytes.count
        }
        for _ in 0..<100_000 {
            let count = Int.random(in: 0...70, using: &rng)
            let rare = Int.random(in: 2...60, using: &rng)
            let bytes = (0..<count).map { _ in
                Int.random(in: 0..<rare, using: &rng) == 0
                    ? edges.randomElement(using: &rng)! : UInt8.random(in: 0x21...0x7E, using: &rng)
            }
            let start = Int.random(in: 0...count, using: &rng)
            bytes.withUnsafeBytes { raw in
                #expect(endOfTarget(raw, from: start) == firstRefused(bytes, start, isTargetByte), "\(bytes) from \(start)")
                #expect(endOfValue(raw, from: start) == firstRefused(bytes, start, isValueByte), "\(bytes) from \(start)")
                #expect(endOfToken(raw, from: start) == firstRefused(bytes, start, isToken), "\(bytes) from \(start)")
            }
        }
    }

    @Test func randomBytesNeverCrashAndAlwaysEnd() {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let count = Int.random(in: 0..<300, using: &rng)
            var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if Bool.random() { bytes = Array("GET / HTTP/1.1\r\n".utf8) + bytes }
            var parser = HTTPRequestParser(limits: .init(maximumRequestLineBytes: 64, maximumHeaderBytes: 128, maximumHeaderCount: 4))
            var offset = 0
            var steps = 0
            while offset < bytes.count {
                let r = bytes[offset...].withUnsafeBytes { parser.parse($0) }
                #expect(r.consumed >= 0 && r.consumed <= bytes.count - offset)
                offset += r.consumed
                steps += 1
                if case .failed = r.status { break }
                if r.status == .needMore { #expect(offset == bytes.count); break }
                #expect(steps < 1000)
            }
        }
    }
}
