import Glibc

/// The header fields the parser keeps (`Field`), and how each value lands in the request
/// head: bounded, repeated fields joined or refused, only the token cookie kept.
extension HTTPRequestParser {
    /// Headers whose values the parser keeps.
    enum Field: Sendable {
        case other, host, connection, contentLength, transferEncoding, ifNoneMatch, ifModifiedSince
        case forwarded, xForwardedProto, xForwardedHost, xForwardedPrefix, accept, xRequestID
        case authorization, cookie
    }

    /// The most bytes of one header value the parser keeps (for the fields it reads); a
    /// longer one is 431.
    static let maximumKeptValueBytes = 1024
    /// The longest access token taken (a JWT: `Authorization: Bearer`, the cookie
    /// `tiler_token`, the query's `token`): an RS256 token signed with a 4096-bit key and a
    /// few claims is about 1,100 bytes. Longer ones are refused (431, or 414 in the query)
    /// before anything decodes them.
    public static let maximumTokenBytes = 4096
    /// `Authorization: Bearer TOKEN` with the longest token taken (seven bytes of
    /// `Bearer `: a constant, where `"Bearer ".count` made a lazy global checked on every
    /// request that sends the header).
    static let maximumAuthorizationBytes = maximumTokenBytes + 7

    /// The most bytes of `field`'s value kept: `Cookie` is read for its `tiler_token` only,
    /// so the whole line is bounded by the head's limit alone.
    @inline(__always)
    static func maximumValueBytes(_ field: Field) -> Int {
        switch field {
        case .other, .cookie: Int.max
        case .authorization: maximumAuthorizationBytes
        default: maximumKeptValueBytes
        }
    }

    /// The field a header name names, from its bytes in any case (as sent, or lowercased
    /// by the state machine; a name past 32 bytes, of which it keeps 32, names none). The
    /// kept names are lowercase letters and hyphens, and a token byte ORed with 0x20 is one
    /// of those only if it is that byte in either case (0x0D, the other byte that becomes a
    /// hyphen, is no token).
    static func field(named name: UnsafeRawBufferPointer) -> Field {
        /// Whether `name` (as long as `word`, 4 to 24 bytes, which the switch below sees
        /// to) is `word`: in words that overlap (at 0, 8 past 16 bytes, and the last
        /// eight), or two half words, not a byte at a time.
        @inline(__always) func `is`(_ word: StaticString) -> Bool {
            let n = name.count
            let w = UnsafeRawPointer(word.utf8Start)
            @inline(__always) func same(at offset: Int) -> Bool {
                name.loadUnaligned(fromByteOffset: offset, as: UInt64.self) | 0x2020_2020_2020_2020
                    == w.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            }
            if n >= 8 { return same(at: 0) && (n <= 16 || same(at: 8)) && same(at: n - 8) }
            return name.loadUnaligned(as: UInt32.self) | 0x2020_2020 == w.loadUnaligned(as: UInt32.self)
                && name.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self) | 0x2020_2020
                    == w.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)
        }
        return switch name.count {
        case 4 where `is`("host"): .host
        case 10 where `is`("connection"): .connection
        case 14 where `is`("content-length"): .contentLength
        case 17 where `is`("transfer-encoding"): .transferEncoding
        case 17 where `is`("if-modified-since"): .ifModifiedSince
        case 9 where `is`("forwarded"): .forwarded
        case 17 where `is`("x-forwarded-proto"): .xForwardedProto
        case 16 where `is`("x-forwarded-host"): .xForwardedHost
        case 18 where `is`("x-forwarded-prefix"): .xForwardedPrefix
        case 6 where `is`("accept"): .accept
        case 12 where `is`("x-request-id"): .xRequestID
        case 13 where `is`("authorization"): .authorization
        case 13 where `is`("if-none-match"): .ifNoneMatch
        case 6 where `is`("cookie"): .cookie
        default: .other
        }
    }

    /// Records a kept field's value (trailing blanks removed) in `head`.
    static func apply(_ field: Field, _ value: UnsafeRawBufferPointer, to head: inout HTTPRequestHead)
        -> HTTPParseError?
    {
        switch field {
        case .other: break
        case .host:
            if head.hasHost { return .bad("more than one Host header") }
            head.hasHost = true
            head.host.replaceSubrange(0..<head.host.count, with: value)
        case .connection:
            // A comma-separated list of tokens, case-insensitive.
            var start = 0
            for end in 0...value.count where end == value.count || value[end] == UInt8(ascii: ",") {
                let token = trimmed(UnsafeRawBufferPointer(rebasing: value[start..<end]), leading: true)
                if equalsLowercased(token, "close") { head.connectionClose = true }
                if equalsLowercased(token, "keep-alive") { head.connectionKeepAlive = true }
                start = end + 1
            }
        case .contentLength:
            guard !value.isEmpty, value.count <= 18, value.allSatisfy(isDigit) else {
                return .bad("malformed Content-Length")
            }
            let length = value.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            if let previous = head.contentLength, previous != length { return .bad("conflicting Content-Length headers") }
            head.contentLength = length
        case .transferEncoding:
            head.hasTransferEncoding = true
        case .ifNoneMatch:
            if !head.ifNoneMatch.isEmpty { head.ifNoneMatch.append(UInt8(ascii: ",")) }
            head.ifNoneMatch.append(contentsOf: value)
        case .ifModifiedSince:
            head.ifModifiedSince.removeAll(keepingCapacity: true)
            head.ifModifiedSince.append(contentsOf: value)
        case .forwarded: appendListValue(value, to: &head.forwarded)
        case .xForwardedProto: appendListValue(value, to: &head.xForwardedProto)
        case .xForwardedHost: appendListValue(value, to: &head.xForwardedHost)
        case .xForwardedPrefix: appendListValue(value, to: &head.xForwardedPrefix)
        case .accept: appendListValue(value, to: &head.accept)
        case .xRequestID:
            // Kept only if it can be sent back and logged as it is; else the server makes one.
            if RequestID.isSane(value) {
                head.sentRequestID.replaceSubrange(0..<head.sentRequestID.count, with: value)
            } else if !head.sentRequestID.isEmpty {
                head.sentRequestID.removeAll(keepingCapacity: true)
            }
        case .authorization:
            head.hasAuthorization = true
            if !assign(value, to: &head.authorization) { head.authorizationSerial = head.nextCredentialSerial() }
        case .cookie:
            guard !head.hasCookieToken, let token = cookie(named: "tiler_token", in: value) else { break }
            if token.count > maximumTokenBytes { return .headersTooLarge }
            head.hasCookieToken = true
            if !assign(token, to: &head.cookieToken) { head.cookieTokenSerial = head.nextCredentialSerial() }
        }
        return nil
    }

    /// The value of the cookie `name` in a `Cookie` line (`a=1; tiler_token=…`), without
    /// quotes, or nil.
    static func cookie(named name: StaticString, in line: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        var start = 0
        for end in 0...line.count where end == line.count || line[end] == UInt8(ascii: ";") {
            let pair = trimmed(UnsafeRawBufferPointer(rebasing: line[start..<end]), leading: true)
            start = end + 1
            guard let eq = pair.firstIndex(of: UInt8(ascii: "=")), eq == name.utf8CodeUnitCount,
                (0..<eq).allSatisfy({ pair[$0] == name.utf8Start[$0] })
            else { continue }
            var value = UnsafeRawBufferPointer(rebasing: pair[(eq + 1)...])
            if value.count >= 2, value.first == UInt8(ascii: "\""), value.last == UInt8(ascii: "\"") {
                value = UnsafeRawBufferPointer(rebasing: value[1..<(value.count - 1)])
            }
            return value
        }
        return nil
    }

    /// Whether `Authorization:` (the name in any case) starts at `p`: its first eight and
    /// last eight letters ORed with 0x20 (a byte becomes a small letter so only if it is
    /// that letter in either case), then the colon.
    @inline(__always)
    static func isAuthorizationName(_ bytes: UnsafeRawBufferPointer, at p: Int) -> Bool {
        bytes.count - p >= 14 && bytes[p + 13] == ASCII.colon
            && bytes.loadUnaligned(fromByteOffset: p, as: UInt64.self) | 0x2020_2020_2020_2020
                == UInt64(littleEndian: 0x7A69_726F_6874_7561)  // "authoriz"
            && bytes.loadUnaligned(fromByteOffset: p + 5, as: UInt64.self) | 0x2020_2020_2020_2020
                == UInt64(littleEndian: 0x6E6F_6974_617A_6972)  // "rization"
    }

    /// Where the value at `start` ends when it is `previous` exactly, then CR LF, or nil: a
    /// token a connection sends with each request, compared as one block rather than
    /// scanned and copied. `previous` is a kept value, so the bytes are value bytes with
    /// no blank at the end: the scan and `trimmed` would find the same value.
    @inline(__always)
    static func end(ofRepeated previous: [UInt8], in bytes: UnsafeRawBufferPointer, at start: Int) -> Int? {
        let count = previous.count
        guard count > 0, bytes.count - start >= count + 2 else { return nil }
        let end = start + count
        guard bytes[end] == ASCII.cr, bytes[end + 1] == ASCII.lf,
            previous.withUnsafeBytes({ memcmp($0.baseAddress!, bytes.baseAddress! + start, count) == 0 })
        else { return nil }
        return end
    }

    /// Makes `bytes` hold `value`, a token of a few hundred bytes, and says whether it held
    /// it already (as a connection's token is each time): then nothing is copied.
    static func assign(_ value: UnsafeRawBufferPointer, to bytes: inout [UInt8]) -> Bool {
        if bytes.count == value.count {
            return bytes.withUnsafeMutableBytes {
                if value.isEmpty || memcmp($0.baseAddress!, value.baseAddress!, value.count) == 0 { return true }
                $0.copyMemory(from: value)
                return false
            }
        }
        bytes.replaceSubrange(0..<bytes.count, with: value)
        return false
    }

    /// Appends a field's value to a list header's value (`a, b` for repeated fields).
    static func appendListValue(_ value: UnsafeRawBufferPointer, to list: inout [UInt8]) {
        if !list.isEmpty { list.append(UInt8(ascii: ",")) }
        list.append(contentsOf: value)
    }
}
