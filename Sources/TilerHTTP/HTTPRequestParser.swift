import Glibc

/// The request methods the server distinguishes. Anything else is `.other` and gets 405.
public enum HTTPMethod: Sendable, Hashable {
    case get, head, options, other

    init(_ bytes: UnsafeRawBufferPointer) {
        switch bytes.count {
        case 3 where bytes[0] == 0x47 && bytes[1] == 0x45 && bytes[2] == 0x54: self = .get  // GET
        case 4 where bytes[0] == 0x48 && bytes[1] == 0x45 && bytes[2] == 0x41 && bytes[3] == 0x44: self = .head  // HEAD
        case 7 where bytes.elementsEqual("OPTIONS".utf8): self = .options
        default: self = .other
        }
    }
}

/// HTTP/1.0 or HTTP/1.1 (the only versions accepted; others are 505 or 400).
public enum HTTPVersion: Sendable, Hashable {
    case http10, http11
}

/// The parts of a request head the server acts on. The parser reuses the arrays'
/// storage from one request to the next, so reading a head allocates nothing.
public struct HTTPRequestHead: Sendable {
    public internal(set) var method: HTTPMethod = .other
    public internal(set) var version: HTTPVersion = .http11
    /// The request target as sent, e.g. `/images/a/tiles/0/0/0.png?x=1` (absolute-form
    /// targets are reduced to their path and query).
    public internal(set) var target: [UInt8] = []
    /// The raw value of `If-None-Match`, or empty when absent.
    public internal(set) var ifNoneMatch: [UInt8] = []
    /// The raw value of `If-Modified-Since`, or empty when absent.
    public internal(set) var ifModifiedSince: [UInt8] = []
    /// Whether `Connection: close` was sent.
    public internal(set) var connectionClose = false
    /// Whether `Connection: keep-alive` was sent.
    public internal(set) var connectionKeepAlive = false
    /// The declared body length, if any.
    public internal(set) var contentLength: Int?
    public internal(set) var hasTransferEncoding = false
    public internal(set) var hasHost = false
    /// The raw value of `Host`, or empty when absent (IIIF builds absolute ids from it).
    public internal(set) var host: [UInt8] = []
    /// The raw values of `Forwarded`, `X-Forwarded-Proto` and `X-Forwarded-Host`, each
    /// repeated field joined with `,`, or empty when absent. Kept for `--trust-proxy`;
    /// nothing believes them otherwise.
    public internal(set) var forwarded: [UInt8] = []
    public internal(set) var xForwardedProto: [UInt8] = []
    public internal(set) var xForwardedHost: [UInt8] = []
    /// The raw value of `X-Forwarded-Prefix` (repeated fields joined with `,`), or empty:
    /// never believed, only noticed (a proxy that strips a path prefix says so with it).
    public internal(set) var xForwardedPrefix: [UInt8] = []
    /// The raw value of `Accept`, repeated fields joined with `,`, or empty when absent
    /// (IIIF's info.json is negotiated: `AcceptHeader`).
    public internal(set) var accept: [UInt8] = []
    /// The value of `X-Request-Id` as sent (the last one when repeated) if it is sane
    /// (`RequestID.isSane`), else empty.
    public internal(set) var sentRequestID: [UInt8] = []
    /// The connection's id as `RequestID.tag` writes it (16 hex digits and `-`), set once
    /// per connection; with `requestNumber`, the id of a request that sent none.
    public internal(set) var connectionTag: [UInt8] = []
    /// The request's number on its connection, from 1.
    public internal(set) var requestNumber = 0
    /// The raw value of `Authorization` (the last one when repeated), or empty. At most
    /// `HTTPRequestParser.maximumAuthorizationBytes`; a longer one is 431.
    public internal(set) var authorization: [UInt8] = []
    /// The value of the cookie `tiler_token` (the first one, as browsers send the most
    /// specific first), or empty: only that cookie of `Cookie` is kept. A longer one than
    /// `HTTPRequestParser.maximumTokenBytes` is 431.
    public internal(set) var cookieToken: [UInt8] = []
    /// Whether this request's head set `authorization` and `cookieToken`: the parser
    /// empties them at the head's end when not, as it does `host`. A token sent again on
    /// a connection (the same length) is then copied over the last one in place, not
    /// emptied and appended: two generic array calls, a sixth of a tile request's cost.
    var hasAuthorization = false
    var hasCookieToken = false
    /// The number of `authorization`'s value on its connection: a new number for each new
    /// value, the same while the connection sends the same bytes again; 0 when empty.
    /// `cookieTokenSerial` the same for `cookieToken` (numbered with the same counter).
    public internal(set) var authorizationSerial: UInt64 = 0
    public internal(set) var cookieTokenSerial: UInt64 = 0
    /// The connection's `CredentialMemo`, when the handler asked for one
    /// (`HTTPRequestParser.Limits.credentialMemo`).
    public internal(set) var credentialMemo: CredentialMemo?
    /// The last number given (the connection's count of credential values).
    var lastCredentialSerial: UInt64 = 0

    public init() {}

    /// Whether the connection may carry another request after this one: HTTP/1.1 unless
    /// `Connection: close`, HTTP/1.0 only with `Connection: keep-alive`.
    public var keepAlive: Bool {
        switch version {
        case .http11: !connectionClose
        case .http10: connectionKeepAlive && !connectionClose
        }
    }

    /// The length of the path part of `target` (up to `?` or `#`).
    public var pathLength: Int {
        target.withUnsafeBufferPointer { t in
            var i = 0
            while i < t.count, t[i] != UInt8(ascii: "?"), t[i] != UInt8(ascii: "#") { i += 1 }
            return i
        }
    }

    /// Empties everything but `target` and `host`, which every request has, and the
    /// tokens, which a connection sends again and again: the parser replaces them where
    /// the next ones start (one range replacement, or a copy in place, rather than an
    /// emptying and an append), and empties them at the end of a head without them.
    mutating func clear() {
        method = .other
        version = .http11
        connectionClose = false
        connectionKeepAlive = false
        contentLength = nil
        hasTransferEncoding = false
        hasHost = false
        // `removeAll(keepingCapacity:)` only where there is something to remove: it is a
        // generic range replacement, and most of these are empty for most requests.
        Self.empty(&ifNoneMatch)
        Self.empty(&ifModifiedSince)
        Self.empty(&forwarded)
        Self.empty(&xForwardedProto)
        Self.empty(&xForwardedHost)
        Self.empty(&xForwardedPrefix)
        Self.empty(&accept)
        Self.empty(&sentRequestID)
        hasAuthorization = false
        hasCookieToken = false
    }

    /// A new number for a credential value (`authorizationSerial`).
    mutating func nextCredentialSerial() -> UInt64 {
        lastCredentialSerial += 1
        return lastCredentialSerial
    }

    @inline(__always)
    private static func empty(_ bytes: inout [UInt8]) {
        if !bytes.isEmpty { bytes.removeAll(keepingCapacity: true) }
    }
}

/// Why a request was refused before it reached a handler: a status and a fixed reason.
public struct HTTPParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public let status: Int
    public let reason: String

    static func bad(_ reason: String) -> HTTPParseError { HTTPParseError(status: 400, reason: reason) }
    static let uriTooLong = HTTPParseError(status: 414, reason: "the request line is too long")
    static let headersTooLarge = HTTPParseError(status: 431, reason: "the request headers are too large")
    static let tooManyHeaders = HTTPParseError(status: 431, reason: "the request has too many headers")
    static let bodyTooLarge = HTTPParseError(status: 413, reason: "request bodies are not accepted")
    static let versionNotSupported = HTTPParseError(status: 505, reason: "only HTTP/1.0 and HTTP/1.1 are supported")

    public var description: String { "\(status) \(reason)" }
}

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

    /// Headers whose values the parser keeps.
    private enum Field: Sendable {
        case other, host, connection, contentLength, transferEncoding, ifNoneMatch, ifModifiedSince
        case forwarded, xForwardedProto, xForwardedHost, xForwardedPrefix, accept, xRequestID
        case authorization, cookie
    }

    public let limits: Limits
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
    private static func maximumValueBytes(_ field: Field) -> Int {
        switch field {
        case .other, .cookie: Int.max
        case .authorization: maximumAuthorizationBytes
        default: maximumKeptValueBytes
        }
    }
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
                if b == cr || b == lf {
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
                if b == sp {
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
                guard b == sp else { return fail(.bad("malformed request target"), i) }
                guard !head.target.isEmpty else { return fail(.bad("missing request target"), i) }
                state = .version
            case .version:
                if b != cr && b != lf {
                    // The version's bytes up to the end of the line in one piece. One by one,
                    // byte k fails at the line's limit first, then past 8 bytes of version.
                    var j = i + 1
                    while j < n, bytes[j] != cr, bytes[j] != lf { j += 1 }
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
                if b == cr {
                    state = .requestLineEnd
                } else {
                    if let e = finishRequestLine() { return fail(e, i) }
                }
            case .requestLineEnd:
                guard b == lf else { return fail(.bad("malformed request line"), i) }
                if let e = finishRequestLine() { return fail(e, i) }
            case .lineStart:
                headerBytes += 1
                if headerBytes > limits.maximumHeaderBytes { return fail(.headersTooLarge, i) }
                if b == cr {
                    state = .headersEnd
                } else if b == lf {
                    if let e = finishHead() { return fail(e, i) }
                    if state == .complete { return ParseResult(consumed: i + 1, status: .complete) }
                } else if b == sp || b == ht {
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
                if b == colon {
                    guard !name.isEmpty else { return fail(.bad("empty header name"), i) }
                    field = name.withUnsafeBytes { Self.field(named: $0) }
                    if !value.isEmpty { value.removeAll(keepingCapacity: true) }
                    state = .valueSpace
                } else {
                    return fail(.bad("malformed header name"), i)
                }
            case .valueSpace:
                if b == sp || b == ht {
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
                if b == cr {
                    state = .valueEnd
                } else if b == lf {
                    if let e = finishField() { return fail(e, i) }
                } else {
                    return fail(.bad("malformed header value"), i)
                }
            case .valueEnd:
                headerBytes += 1
                guard b == lf else { return fail(.bad("malformed header line"), i) }
                if let e = finishField() { return fail(e, i) }
            case .headersEnd:
                guard b == lf else { return fail(.bad("malformed end of headers"), i) }
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
        guard i > 0, i <= ShortBytes.capacity, i + 1 < n, bytes[i] == sp, bytes[i + 1] == slash else { return nil }
        let targetStart = i + 1
        let targetEnd = endOfTarget(bytes, from: targetStart + 1)
        // The version, then CR LF; the line's bytes as the machine counts them (up to CR).
        let versionStart = targetEnd + 1
        guard n - versionStart >= 10, bytes[targetEnd] == sp else { return nil }
        let version: HTTPVersion
        switch UInt64(littleEndian: base.loadUnaligned(fromByteOffset: versionStart, as: UInt64.self)) {
        case 0x312E_312F_5054_5448: version = .http11  // "HTTP/1.1"
        case 0x302E_312F_5054_5448: version = .http10  // "HTTP/1.0"
        default: return nil
        }
        let lineBytes = versionStart + 9
        guard bytes[versionStart + 8] == cr, bytes[versionStart + 9] == lf, lineBytes <= limits.maximumRequestLineBytes
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
            if bytes[p] == cr {
                headerBytes += 1
                guard p + 1 < n, bytes[p + 1] == lf, headerBytes <= limits.maximumHeaderBytes else { return nil }
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
                guard j > p, j < n, bytes[j] == colon else { return nil }
                field = Self.field(named: UnsafeRawBufferPointer(rebasing: bytes[p..<j]))
                j += 1
            }
            while j < n, bytes[j] == sp || bytes[j] == ht { j += 1 }
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
            guard n - j >= 2, bytes[j] == cr, bytes[j + 1] == lf else { return nil }
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
            version[4] == slash, version[6] == UInt8(ascii: "."),
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
        if t.first != slash {
            if t.count == 1 && t[0] == UInt8(ascii: "*") && head.method == .options {
                // asterisk-form, OPTIONS only
            } else if let schemeEnd = absoluteFormPathStart(t) {
                head.target.removeSubrange(0..<schemeEnd)
                if head.target.isEmpty { head.target.append(slash) }
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
        guard let slashIndex = t[skip...].firstIndex(of: slash) else { return t.count }
        return slashIndex
    }

    /// The field a header name names, from its bytes in any case (as sent, or lowercased
    /// by the state machine; a name past 32 bytes, of which it keeps 32, names none). The
    /// kept names are lowercase letters and hyphens, and a token byte ORed with 0x20 is one
    /// of those only if it is that byte in either case (0x0D, the other byte that becomes a
    /// hyphen, is no token).
    private static func field(named name: UnsafeRawBufferPointer) -> Field {
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

    private mutating func finishField() -> HTTPParseError? {
        state = .lineStart
        defer { field = .other }
        guard field != .other else { return nil }
        let kept = value  // a reference to the bytes, so that `head` can change meanwhile
        return kept.withUnsafeBytes { Self.apply(field, trimmed($0), to: &head) }
    }

    /// Records a kept field's value (trailing blanks removed) in `head`.
    private static func apply(_ field: Field, _ value: UnsafeRawBufferPointer, to head: inout HTTPRequestHead)
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
    private static func isAuthorizationName(_ bytes: UnsafeRawBufferPointer, at p: Int) -> Bool {
        bytes.count - p >= 14 && bytes[p + 13] == colon
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
    private static func end(ofRepeated previous: [UInt8], in bytes: UnsafeRawBufferPointer, at start: Int) -> Int? {
        let count = previous.count
        guard count > 0, bytes.count - start >= count + 2 else { return nil }
        let end = start + count
        guard bytes[end] == cr, bytes[end + 1] == lf,
            previous.withUnsafeBytes({ memcmp($0.baseAddress!, bytes.baseAddress! + start, count) == 0 })
        else { return nil }
        return end
    }

    /// Makes `bytes` hold `value`, a token of a few hundred bytes, and says whether it held
    /// it already (as a connection's token is each time): then nothing is copied.
    private static func assign(_ value: UnsafeRawBufferPointer, to bytes: inout [UInt8]) -> Bool {
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
    private static func appendListValue(_ value: UnsafeRawBufferPointer, to list: inout [UInt8]) {
        if !list.isEmpty { list.append(UInt8(ascii: ",")) }
        list.append(contentsOf: value)
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

private let cr: UInt8 = 0x0D
private let lf: UInt8 = 0x0A
private let sp: UInt8 = 0x20
private let ht: UInt8 = 0x09
private let colon: UInt8 = 0x3A
private let slash: UInt8 = 0x2F

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

@inline(__always) private func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

/// A byte a request target may hold: visible ASCII (no space, no control, no DEL).
@inline(__always) func isTargetByte(_ b: UInt8) -> Bool { b > 0x20 && b < 0x7F }

/// A byte of a header value that neither ends the line nor is refused: a tab, or
/// anything but a control character and DEL (obs-text included).
@inline(__always) func isValueByte(_ b: UInt8) -> Bool { (b >= 0x20 && b != 0x7F) || b == ht }

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
private func trimmed(_ bytes: UnsafeRawBufferPointer, leading: Bool = false) -> UnsafeRawBufferPointer {
    var a = 0, b = bytes.count
    if leading { while a < b, bytes[a] == sp || bytes[a] == ht { a += 1 } }
    while b > a, bytes[b - 1] == sp || bytes[b - 1] == ht { b -= 1 }
    return UnsafeRawBufferPointer(rebasing: bytes[a..<b])
}

private func equalsLowercased(_ bytes: UnsafeRawBufferPointer, _ word: StaticString) -> Bool {
    guard bytes.count == word.utf8CodeUnitCount else { return false }
    let w = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
    for (a, b) in zip(bytes, w) where (a | ((a >= 0x41 && a <= 0x5A) ? 0x20 : 0)) != b { return false }
    return true
}
