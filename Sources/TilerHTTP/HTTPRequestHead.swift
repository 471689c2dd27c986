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
