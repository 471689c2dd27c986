import Glibc

/// An incremental HTTP/1.1 request parser: a state machine over bytes with no I/O.
///
/// Feed it whatever arrived with `parse(_:)`; it consumes bytes until a request is
/// complete (`.complete`: read `head`, then keep feeding the unconsumed bytes — that is
/// pipelining), needs more (`.needMore`: everything was consumed), or fails
/// (`.failed`: answer with the error's status and close the connection). Bodies, which
/// this server never uses, are counted off and discarded when within
/// `Limits.maximumBodyBytes`.
public struct HTTPRequestParser: Sendable {
    /// Size limits enforced while parsing.
    public struct Limits: Sendable, Hashable {
        /// Longest request line (method, target, version), in bytes: 414 past it.
        public var maximumRequestLineBytes: Int
        /// Largest header section (all header lines), in bytes: 431 past it.
        public var maximumHeaderBytes: Int
        /// Most header fields: 431 past it.
        public var maximumHeaderCount: Int
        /// Largest request body accepted (and discarded): 413 past it.
        public var maximumBodyBytes: Int
        /// Whether the connection's heads carry a `CredentialMemo` (not a limit: what the
        /// handler asked for, `HTTPConfiguration.credentialMemos`).
        public var credentialMemo: Bool

        public init(
            maximumRequestLineBytes: Int = 8192, maximumHeaderBytes: Int = 16384,
            maximumHeaderCount: Int = 100, maximumBodyBytes: Int = 0, credentialMemo: Bool = false
        ) {
            self.maximumRequestLineBytes = maximumRequestLineBytes
            self.maximumHeaderBytes = maximumHeaderBytes
            self.maximumHeaderCount = maximumHeaderCount
            self.maximumBodyBytes = maximumBodyBytes
            self.credentialMemo = credentialMemo
        }
    }

    /// What a call to `parse(_:)` found.
    public enum Status: Sendable, Hashable {
        case needMore
        case complete
        case failed(HTTPParseError)
    }

    /// The outcome of `parse(_:)`: how many bytes were used and what they made.
    public struct ParseResult: Sendable, Hashable {
        public var consumed: Int
        public var status: Status
    }

    private enum State: Sendable, Hashable {
        case start, method, target, version, requestLineEnd
        case lineStart, name, valueSpace, value, valueEnd, headersEnd
        case body(Int)
        case complete, failed
    }

    public let limits: Limits

    /// The head of the request most recently completed (valid until the next `parse`).
    /// Read it only after `.complete`: while a head is being parsed, and after a failure,
    /// it may still hold the previous request's target and `Host` (see `clear()`).
    public private(set) var head = HTTPRequestHead()

    /// Names the connection in the heads it reads (`RequestID`), once.
    mutating func setConnectionTag(_ tag: [UInt8]) { head.connectionTag = tag }

    /// Numbers the head just completed: its number on the connection, from 1.
    mutating func setRequestNumber(_ number: Int) { head.requestNumber = number }

    private var state: State = .start
    // Short fields held in place: appending and emptying them touch no heap.
    private var method = ShortBytes()
    private var version = ShortBytes()
    private var name = ShortBytes()
    private var value: [UInt8] = []
    private var field: Field = .other
    private var requestLineBytes = 0
    private var headerBytes = 0
    private var headerCount = 0

    public init(limits: Limits = Limits()) {
        self.limits = limits
        value.reserveCapacity(64)
        head.target.reserveCapacity(128)
        if limits.credentialMemo { head.credentialMemo = CredentialMemo() }
    }

    /// Whether no byte of a next request has arrived yet (between requests). An empty
    /// line before a request line is a byte of it: a client that sends only empty lines
    /// is sending a request head, slowly, and is held to the request-head timeout.
    public var isIdle: Bool { state == .complete || (state == .start && requestLineBytes == 0) }

    /// Whether the last request ended the parser's use (a failure).
    public var hasFailed: Bool { state == .failed }

    /// Forgets any partial request and starts afresh.
    public mutating func reset() {
        state = .start
        method.removeAll()
        version.removeAll()
        name.removeAll()
        // `value` is emptied at each header's colon, before it is used.
        field = .other
        requestLineBytes = 0
        headerBytes = 0
        headerCount = 0
        head.clear()
    }

    /// Parses as much of `bytes` as makes up the current request.
    public mutating func parse(_ bytes: UnsafeRawBufferPointer) -> ParseResult {
        if state == .complete { reset() }
        if state == .failed { return ParseResult(consumed: 0, status: .failed(.bad("the connection has already failed"))) }
        var i = 0
        if state == .start && requestLineBytes == 0 {
            if let end = parseWholeHead(bytes) {
                if state == .complete { return ParseResult(consumed: end, status: .complete) }
                i = end  // a body follows
            } else {
                reset()
            }
        }
        let n = bytes.count
        while i < n {
            let b = bytes[i]
            switch state {
            case .start:
                // RFC 9112 §2.2: ignore empty lines before a request line. They still
                // count: toward the request-line limit (with the line that follows) and,
                // because the parser is no longer idle, toward the request-head timeout.
                if b == ASCII.cr || b == ASCII.lf {
                    requestLineBytes += 1
                    if requestLineBytes > limits.maximumRequestLineBytes { return fail(.uriTooLong, i) }
                    i += 1
                    continue
                }
                state = .method
                continue
            case .method:
                if isToken(b) {
                    // The method's bytes in one piece; past 32 it fails at the same byte as
                    // counting one by one.
                    let j = endOfToken(bytes, from: i + 1)
                    let room = ShortBytes.capacity - method.count
                    if j - i > room { return fail(.bad("method too long"), i + room) }
                    requestLineBytes += j - i
                    method.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<j]))
                    i = j
                    continue
                }
                requestLineBytes += 1
                if b == ASCII.sp {
                    guard !method.isEmpty else { return fail(.bad("missing method"), i) }
                    state = .target
                    // The target is emptied where a new one starts (`clear()` leaves it).
                    if !head.target.isEmpty { head.target.removeAll(keepingCapacity: true) }
                } else {
                    return fail(.bad("malformed request line"), i)
                }
            case .target:
                if isTargetByte(b) {
                    // The target's bytes up to what ends it, in one piece (one append, not
                    // one per byte); the limit fails at the same byte as counting one by one.
                    let j = endOfTarget(bytes, from: i + 1)
                    let room = limits.maximumRequestLineBytes - requestLineBytes
                    if j - i > room { return fail(.uriTooLong, i + max(room, 0)) }
                    requestLineBytes += j - i
                    head.target.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<j]))
                    i = j
                    continue
                }
                requestLineBytes += 1
                if requestLineBytes > limits.maximumRequestLineBytes { return fail(.uriTooLong, i) }
                // Not a target byte: a space ends the target, anything else is refused.
                guard b == ASCII.sp else { return fail(.bad("malformed request target"), i) }
                guard !head.target.isEmpty else { return fail(.bad("missing request target"), i) }
                state = .version
            case .version:
                if b != ASCII.cr && b != ASCII.lf {
                    // The version's bytes up to the end of the line in one piece. One by one,
                    // byte k fails at the line's limit first, then past 8 bytes of version.
                    var j = i + 1
                    while j < n, bytes[j] != ASCII.cr, bytes[j] != ASCII.lf { j += 1 }
                    let lineRoom = max(limits.maximumRequestLineBytes - requestLineBytes, 0)
                    let versionRoom = 8 - min(version.count, 8)
                    if j - i > min(lineRoom, versionRoom) {
                        return lineRoom <= versionRoom
                            ? fail(.uriTooLong, i + lineRoom) : fail(.bad("malformed HTTP version"), i + versionRoom)
                    }
                    requestLineBytes += j - i
                    version.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<j]))
                    i = j
                    continue
                }
                requestLineBytes += 1
                if requestLineBytes > limits.maximumRequestLineBytes { return fail(.uriTooLong, i) }
                if b == ASCII.cr {
                    state = .requestLineEnd
                } else {
                    if let e = finishRequestLine() { return fail(e, i) }
                }
            case .requestLineEnd:
                guard b == ASCII.lf else { return fail(.bad("malformed request line"), i) }
                if let e = finishRequestLine() { return fail(e, i) }
            case .lineStart:
                headerBytes += 1
                if headerBytes > limits.maximumHeaderBytes { return fail(.headersTooLarge, i) }
                if b == ASCII.cr {
                    state = .headersEnd
                } else if b == ASCII.lf {
                    if let e = finishHead() { return fail(e, i) }
                    if state == .complete { return ParseResult(consumed: i + 1, status: .complete) }
                } else if b == ASCII.sp || b == ASCII.ht {
                    return fail(.bad("obsolete header line folding is not accepted"), i)
                } else {
                    headerCount += 1
                    if headerCount > limits.maximumHeaderCount { return fail(.tooManyHeaders, i) }
                    name.removeAll()
                    state = .name
                    headerBytes -= 1
                    continue
                }
            case .name:
                if isToken(b) {
                    // The name's bytes in one piece, lowercased (past 32 bytes only counted);
                    // the limit fails at the same byte as counting one by one.
                    let j = endOfToken(bytes, from: i + 1)
                    let room = max(limits.maximumHeaderBytes - headerBytes, 0)
                    if j - i > room { return fail(.headersTooLarge, i + room) }
                    headerBytes += j - i
                    name.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<j]), lowercasing: true)
                    i = j
                    continue
                }
                headerBytes += 1
                if headerBytes > limits.maximumHeaderBytes { return fail(.headersTooLarge, i) }
                if b == ASCII.colon {
                    guard !name.isEmpty else { return fail(.bad("empty header name"), i) }
                    field = name.withUnsafeBytes { Self.field(named: $0) }
                    if !value.isEmpty { value.removeAll(keepingCapacity: true) }
                    state = .valueSpace
                } else {
                    return fail(.bad("malformed header name"), i)
                }
            case .valueSpace:
                if b == ASCII.sp || b == ASCII.ht {
                    headerBytes += 1
                    if headerBytes > limits.maximumHeaderBytes { return fail(.headersTooLarge, i) }
                    i += 1
                    continue
                }
                state = .value
                continue
            case .value:
                if isValueByte(b) {
                    // The value's bytes up to the end of the line, in one piece: skipped for
                    // fields the parser does not keep. Either limit fails at the same byte as
                    // counting one by one, with the same error.
                    let j = endOfValue(bytes, from: i + 1)
                    let room = min(
                        limits.maximumHeaderBytes - headerBytes,
                        Self.maximumValueBytes(field) == Int.max ? Int.max : Self.maximumValueBytes(field) - value.count)
                    if j - i > room { return fail(.headersTooLarge, i + max(room, 0)) }
                    headerBytes += j - i
                    if field != .other { value.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<j])) }
                    i = j
                    continue
                }
                headerBytes += 1
                if headerBytes > limits.maximumHeaderBytes { return fail(.headersTooLarge, i) }
                // Not a value byte: the end of the line, or a control character.
                if b == ASCII.cr {
                    state = .valueEnd
                } else if b == ASCII.lf {
                    if let e = finishField() { return fail(e, i) }
                } else {
                    return fail(.bad("malformed header value"), i)
                }
            case .valueEnd:
                headerBytes += 1
                guard b == ASCII.lf else { return fail(.bad("malformed header line"), i) }
                if let e = finishField() { return fail(e, i) }
            case .headersEnd:
                guard b == ASCII.lf else { return fail(.bad("malformed end of headers"), i) }
                if let e = finishHead() { return fail(e, i) }
                if state == .complete { return ParseResult(consumed: i + 1, status: .complete) }
            case .body(let remaining):
                let take = min(remaining, n - i)
                i += take
                if take == remaining {
                    state = .complete
                    return ParseResult(consumed: i, status: .complete)
                }
                state = .body(remaining - take)
                continue
            case .complete, .failed:
                return ParseResult(consumed: i, status: .failed(.bad("internal parser state")))
            }
            i += 1
        }
        return ParseResult(consumed: n, status: .needMore)
    }

    /// The common case in one pass: a whole head at the start of `bytes` (clients send one
    /// at once), well inside every limit. Returns the index just past it, leaving `head`
    /// and `state` as the byte-by-byte machine below would. Returns nil for anything else
    /// (part of a head, leading empty lines, a bare line feed, an absolute-form target, a
    /// version other than 1.0 and 1.1, a limit reached, any error): the caller then resets
    /// and the machine takes the same bytes one state at a time, refusing at the byte the
    /// rules name. Taking a head this way costs a third of the machine's instructions:
    /// no state per byte, no copy of a header value before it is kept.
    private mutating func parseWholeHead(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard let base = bytes.baseAddress else { return nil }
        let n = bytes.count
        // The method (at most 32 token bytes), a space, an origin-form target, a space.
        let i = endOfToken(bytes, from: 0)
        guard i > 0, i <= ShortBytes.capacity, i + 1 < n, bytes[i] == ASCII.sp, bytes[i + 1] == ASCII.slash else { return nil }
        let targetStart = i + 1
        let targetEnd = endOfTarget(bytes, from: targetStart + 1)
        // The version, then CR LF; the line's bytes as the machine counts them (up to CR).
        let versionStart = targetEnd + 1
        guard n - versionStart >= 10, bytes[targetEnd] == ASCII.sp else { return nil }
        let version: HTTPVersion
        switch UInt64(littleEndian: base.loadUnaligned(fromByteOffset: versionStart, as: UInt64.self)) {
        case 0x312E_312F_5054_5448: version = .http11  // "HTTP/1.1"
        case 0x302E_312F_5054_5448: version = .http10  // "HTTP/1.0"
        default: return nil
        }
        let lineBytes = versionStart + 9
        guard bytes[versionStart + 8] == ASCII.cr, bytes[versionStart + 9] == ASCII.lf, lineBytes <= limits.maximumRequestLineBytes
        else { return nil }
        head.method = HTTPMethod(UnsafeRawBufferPointer(rebasing: bytes[0..<i]))
        head.version = version
        head.target.replaceSubrange(
            0..<head.target.count, with: UnsafeRawBufferPointer(rebasing: bytes[targetStart..<targetEnd]))
        // Header lines `name: value CR LF`, then CR LF.
        var p = versionStart + 10
        var headerBytes = 0
        var headerCount = 0
        while p < n {
            if bytes[p] == ASCII.cr {
                headerBytes += 1
                guard p + 1 < n, bytes[p + 1] == ASCII.lf, headerBytes <= limits.maximumHeaderBytes else { return nil }
                requestLineBytes = lineBytes
                self.headerBytes = headerBytes
                self.headerCount = headerCount
                guard finishHead() == nil else { return nil }
                return p + 2
            }
            headerCount += 1
            guard headerCount <= limits.maximumHeaderCount else { return nil }
            var j: Int
            let field: Field
            if Self.isAuthorizationName(bytes, at: p) {
                // The line a token adds to each request of a private image: its name known
                // in two words, not scanned and then looked up.
                j = p + 14
                field = .authorization
            } else {
                j = endOfToken(bytes, from: p)
                guard j > p, j < n, bytes[j] == ASCII.colon else { return nil }
                field = Self.field(named: UnsafeRawBufferPointer(rebasing: bytes[p..<j]))
                j += 1
            }
            while j < n, bytes[j] == ASCII.sp || bytes[j] == ASCII.ht { j += 1 }
            let valueStart = j
            if field == .authorization, !head.hasAuthorization,
                let end = Self.end(ofRepeated: head.authorization, in: bytes, at: valueStart)
            {
                // The value of the connection's last request (its token, sent with each
                // request): valid then, so valid now, and still in `head`.
                head.hasAuthorization = true
                headerBytes += end + 2 - p
                p = end + 2
                continue
            }
            j = endOfValue(bytes, from: j)
            guard n - j >= 2, bytes[j] == ASCII.cr, bytes[j + 1] == ASCII.lf else { return nil }
            headerBytes += j + 2 - p  // checked at the head's end: the count only grows
            if field != .other {
                guard j - valueStart <= Self.maximumValueBytes(field),
                    Self.apply(field, trimmed(UnsafeRawBufferPointer(rebasing: bytes[valueStart..<j])), to: &head) == nil
                else { return nil }
            }
            p = j + 2
        }
        return nil
    }

    private mutating func fail(_ error: HTTPParseError, _ at: Int) -> ParseResult {
        state = .failed
        return ParseResult(consumed: at + 1, status: .failed(error))
    }

    private mutating func finishRequestLine() -> HTTPParseError? {
        head.method = method.withUnsafeBytes { HTTPMethod($0) }
        // "HTTP/" DIGIT "." DIGIT
        guard version.count == 8, version[0] == 0x48, version[1] == 0x54, version[2] == 0x54, version[3] == 0x50,
            version[4] == ASCII.slash, version[6] == UInt8(ascii: "."),
            isDigit(version[5]), isDigit(version[7])
        else {
            return .bad("malformed HTTP version")
        }
        switch (version[5], version[7]) {
        case (UInt8(ascii: "1"), UInt8(ascii: "1")): head.version = .http11
        case (UInt8(ascii: "1"), UInt8(ascii: "0")): head.version = .http10
        default: return .versionNotSupported
        }
        // Absolute-form (`http://host/path`): keep only the path and query.
        let t = head.target
        if t.first != ASCII.slash {
            if t.count == 1 && t[0] == UInt8(ascii: "*") && head.method == .options {
                // asterisk-form, OPTIONS only
            } else if let schemeEnd = absoluteFormPathStart(t) {
                head.target.removeSubrange(0..<schemeEnd)
                if head.target.isEmpty { head.target.append(ASCII.slash) }
            } else {
                return .bad("the request target must start with '/'")
            }
        }
        state = .lineStart
        return nil
    }

    /// For `http://authority/path` or `https://…`, the index where the path starts.
    private func absoluteFormPathStart(_ t: [UInt8]) -> Int? {
        let http = Array("http://".utf8), https = Array("https://".utf8)
        let lower = t.prefix(8).map { $0 | (($0 >= 0x41 && $0 <= 0x5A) ? 0x20 : 0) }
        let skip: Int
        if lower.starts(with: http) { skip = http.count } else if lower.starts(with: https) { skip = https.count } else { return nil }
        guard let slashIndex = t[skip...].firstIndex(of: ASCII.slash) else { return t.count }
        return slashIndex
    }

    private mutating func finishField() -> HTTPParseError? {
        state = .lineStart
        defer { field = .other }
        guard field != .other else { return nil }
        let kept = value  // a reference to the bytes, so that `head` can change meanwhile
        return kept.withUnsafeBytes { Self.apply(field, trimmed($0), to: &head) }
    }

    private mutating func finishHead() -> HTTPParseError? {
        // See `clear()`.
        if !head.hasHost && !head.host.isEmpty { head.host.removeAll(keepingCapacity: true) }
        if !head.hasAuthorization && !head.authorization.isEmpty {
            head.authorization.removeAll(keepingCapacity: true)
            head.authorizationSerial = 0
        }
        if !head.hasCookieToken && !head.cookieToken.isEmpty {
            head.cookieToken.removeAll(keepingCapacity: true)
            head.cookieTokenSerial = 0
        }
        if head.hasTransferEncoding {
            if head.contentLength != nil { return .bad("Content-Length and Transfer-Encoding together are not accepted") }
            return .bodyTooLarge
        }
        if head.version == .http11 && !head.hasHost { return .bad("HTTP/1.1 requests must have a Host header") }
        let length = head.contentLength ?? 0
        if length > limits.maximumBodyBytes { return .bodyTooLarge }
        state = length > 0 ? .body(length) : .complete
        return nil
    }
}

/// Up to 32 bytes held in place (a method, a version, a header name), so that the parser
/// appends and empties them without touching the heap. Past 32 bytes only the count grows:
/// nothing the parser compares them with is that long.
private struct ShortBytes {
    static let capacity = 32
    private var storage: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// Appends `run`, ASCII letters lowercased if asked.
    @inline(__always)
    mutating func append(contentsOf run: UnsafeRawBufferPointer, lowercasing: Bool = false) {
        let start = count
        let kept = min(run.count, max(Self.capacity - start, 0))
        if kept > 0 {
            withUnsafeMutableBytes(of: &storage) { s in
                for k in 0..<kept {
                    let b = run[k]
                    s[start + k] = lowercasing && b >= 0x41 && b <= 0x5A ? b | 0x20 : b
                }
            }
        }
        count += run.count
    }

    mutating func removeAll() { count = 0 }

    /// The bytes kept: the first `min(count, 32)`.
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        Swift.withUnsafeBytes(of: storage) { body(UnsafeRawBufferPointer(rebasing: $0[..<min(count, Self.capacity)])) }
    }

    /// Byte `i`, which must be below `min(count, 32)`.
    subscript(i: Int) -> UInt8 { withUnsafeBytes { $0[i] } }
}

@inline(__always) func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

/// A byte a request target may hold: visible ASCII (no space, no control, no DEL).
@inline(__always) func isTargetByte(_ b: UInt8) -> Bool { b > 0x20 && b < 0x7F }

/// A byte of a header value that neither ends the line nor is refused: a tab, or
/// anything but a control character and DEL (obs-text included).
@inline(__always) func isValueByte(_ b: UInt8) -> Bool { (b >= 0x20 && b != 0x7F) || b == ASCII.ht }

/// RFC 9110 `tchar`.
@inline(__always) func isToken(_ b: UInt8) -> Bool {
    switch b {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
    case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
        UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
        UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
        true
    default: false
    }
}

/// `bytes` without the spaces and tabs at its end (and at its start, if asked).
func trimmed(_ bytes: UnsafeRawBufferPointer, leading: Bool = false) -> UnsafeRawBufferPointer {
    var a = 0, b = bytes.count
    if leading { while a < b, bytes[a] == ASCII.sp || bytes[a] == ASCII.ht { a += 1 } }
    while b > a, bytes[b - 1] == ASCII.sp || bytes[b - 1] == ASCII.ht { b -= 1 }
    return UnsafeRawBufferPointer(rebasing: bytes[a..<b])
}

func equalsLowercased(_ bytes: UnsafeRawBufferPointer, _ word: StaticString) -> Bool {
    guard bytes.count == word.utf8CodeUnitCount else { return false }
    let w = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
    for (a, b) in zip(bytes, w) where (a | ((a >= 0x41 && a <= 0x5A) ? 0x20 : 0)) != b { return false }
    return true
}
