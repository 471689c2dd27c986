/// Reason phrases for the statuses the server sends.
public enum HTTPStatus {
    public static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 204: "No Content"
        case 303: "See Other"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Status \(status)"
        }
    }

    /// The status line for the statuses the server sends, as a `StaticString` so that
    /// writing it touches no reference count shared between threads.
    static func staticStatusLine(_ status: Int) -> StaticString? {
        switch status {
        case 200: "HTTP/1.1 200 OK\r\n"
        case 204: "HTTP/1.1 204 No Content\r\n"
        case 303: "HTTP/1.1 303 See Other\r\n"
        case 304: "HTTP/1.1 304 Not Modified\r\n"
        case 400: "HTTP/1.1 400 Bad Request\r\n"
        case 401: "HTTP/1.1 401 Unauthorized\r\n"
        case 403: "HTTP/1.1 403 Forbidden\r\n"
        case 404: "HTTP/1.1 404 Not Found\r\n"
        case 405: "HTTP/1.1 405 Method Not Allowed\r\n"
        case 408: "HTTP/1.1 408 Request Timeout\r\n"
        case 413: "HTTP/1.1 413 Content Too Large\r\n"
        case 414: "HTTP/1.1 414 URI Too Long\r\n"
        case 431: "HTTP/1.1 431 Request Header Fields Too Large\r\n"
        case 500: "HTTP/1.1 500 Internal Server Error\r\n"
        case 503: "HTTP/1.1 503 Service Unavailable\r\n"
        case 504: "HTTP/1.1 504 Gateway Timeout\r\n"
        case 505: "HTTP/1.1 505 HTTP Version Not Supported\r\n"
        default: nil
        }
    }
}

extension Array where Element == UInt8 {
    /// Appends a static string's bytes.
    @inline(__always)
    mutating func append(_ s: StaticString) {
        append(contentsOf: UnsafeRawBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    /// Appends `bytes` through a pointer to them: no retain of their buffer, and the cheaper
    /// of `append(contentsOf:)`'s forms (this runs a few times for every response).
    @inline(__always)
    mutating func append(bytesOf bytes: [UInt8]) {
        bytes.withUnsafeBytes { append(contentsOf: $0) }
    }

    /// Appends `bytes[from..<to]` through a pointer to them.
    @inline(__always)
    mutating func append(bytesOf bytes: [UInt8], from: Int, to: Int) {
        bytes.withUnsafeBytes { append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[from..<to])) }
    }

    /// Appends a string's UTF-8 bytes without making an array of them first.
    @inline(__always)
    mutating func append(utf8Of s: String) {
        var s = s
        s.withUTF8 { append(contentsOf: $0) }
    }

    /// Appends `lead`, then `prefix`, `value` in decimal (not negative) and CRLF, with one
    /// append: the usual answer's first lines (status, `Date`, common headers) and its
    /// `X-Request-Id` line. A second append costs as much as the line's formatting (a
    /// uniqueness check, a capacity check, a copy), and this runs for every answer.
    mutating func append(_ lead: [UInt8], thenLine prefix: [UInt8], decimal value: Int) {
        let room = 512
        guard lead.count + prefix.count + 22 <= room else {
            append(bytesOf: lead)
            append(bytesOf: prefix)
            appendDecimal(value)
            append("\r\n")
            return
        }
        withUnsafeTemporaryAllocation(byteCount: room, alignment: 8) { b in
            let start = b.baseAddress!
            var n = 0
            lead.withUnsafeBytes { l in
                if let from = l.baseAddress { start.copyMemory(from: from, byteCount: l.count) }
                n = l.count
            }
            prefix.withUnsafeBytes { p in
                if let from = p.baseAddress { (start + n).copyMemory(from: from, byteCount: p.count) }
                n += p.count
            }
            n += Self.writeDecimal(value.magnitude, to: start + n)
            b[n] = 13
            b[n + 1] = 10
            append(contentsOf: UnsafeRawBufferPointer(rebasing: b[..<(n + 2)]))
        }
    }

    /// Writes `value` in decimal at `to`; returns how many digits it wrote (20 at most).
    /// Two digits at a time, from a table: a request's number is formatted for every answer.
    @inline(__always)
    private static func writeDecimal(_ value: UInt, to: UnsafeMutableRawPointer) -> Int {
        var digits = 1
        var power: UInt = 10
        while digits < 20 && value >= power {
            digits += 1
            power = power &* 10
        }
        let pairs = UnsafeRawPointer(decimalPairs.utf8Start)
        var m = value
        var i = digits
        while m >= 100 {
            i -= 2
            to.storeBytes(of: pairs.loadUnaligned(fromByteOffset: Int(m % 100) * 2, as: UInt16.self), toByteOffset: i, as: UInt16.self)
            m /= 100
        }
        if m >= 10 {
            to.storeBytes(of: pairs.loadUnaligned(fromByteOffset: Int(m) * 2, as: UInt16.self), toByteOffset: 0, as: UInt16.self)
        } else {
            to.storeBytes(of: UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: m), toByteOffset: 0, as: UInt8.self)
        }
        return digits
    }

    /// "00" to "99", for `writeDecimal`.
    private static var decimalPairs: StaticString {
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"
    }

    /// Appends `prefix`, `value` in decimal and CRLF (an `X-Request-Id` line).
    mutating func appendLine(prefix: [UInt8], decimal value: Int) {
        append([], thenLine: prefix, decimal: value)
    }

    /// Appends an integer in decimal.
    mutating func appendDecimal(_ value: Int) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of room: a sign and 20 digits
        Swift.withUnsafeMutableBytes(of: &digits) { d in
            var n = 0
            if value < 0 {
                d[0] = UInt8(ascii: "-")
                n = 1
            }
            n += Self.writeDecimal(value.magnitude, to: d.baseAddress! + n)
            append(contentsOf: UnsafeRawBufferPointer(rebasing: d[..<n]))
        }
    }
}

/// An HTTP error as a value: a status and a message for the client. Its body is the
/// contract's JSON: `{"error": {"status": 404, "message": "no image named 'x'"}}`.
public struct HTTPError: Error, Sendable, Hashable, CustomStringConvertible {
    public var status: Int
    public var message: String
    /// For a 401, the `WWW-Authenticate` value (RFC 6750: `Bearer`, with
    /// `error="invalid_token"` when a token was sent and refused).
    public var challenge: String?

    public init(_ status: Int, _ message: String, challenge: String? = nil) {
        self.status = status
        self.message = message
        self.challenge = challenge
    }

    public var jsonBody: [UInt8] {
        var json = JSONWriter(capacity: 64 + message.utf8.count)
        json.beginObject()
        json.key("error")
        json.beginObject()
        json.field("status", status)
        json.field("message", message)
        json.endObject()
        json.endObject()
        return json.bytes
    }

    public var description: String { "\(status) \(message)" }
}

/// A response built once and sent many times: a file or document with its headers
/// pre-rendered, and the validators that decide a 304.
///
/// `Content-Type`, `Content-Length`, `ETag`, `Last-Modified` and `Cache-Control` are
/// rendered into bytes at construction, so sending it formats nothing: the status line,
/// `Date` and the common headers are copied, and the rest goes out from where it is
/// stored (`wire`; copied too when it is short). The body is bytes, or a range of an
/// open file that the event loop sends with `sendfile` (see `FileRange`).
public final class PreparedResponse: Sendable {
    /// What the body is.
    public enum Content: Sendable {
        case bytes([UInt8])
        /// Sent with `sendfile`: only ranges whose pages are resident (see `FileRange`).
        case file(FileRange)
    }

    /// The quoted entity tag, e.g. `"5f2-1a2b3c-42"`, or empty for none.
    public let etag: [UInt8]
    /// Modification time in seconds since 1970, or nil for none.
    public let lastModified: Int64?
    /// `Content-Type` and `Content-Length` lines, then `ETag`, `Last-Modified` and
    /// `Cache-Control` lines from `validatorsStart` (those alone are sent with 304), then
    /// the empty line that ends a head when no `Connection` line is due; from `bodyStart`,
    /// the body when it is bytes. One array: a hit sends the head's last lines and the
    /// body as one shared run of bytes, without copying either, and touches one object
    /// fewer that may be cold.
    let wire: [UInt8]
    let validatorsStart: Int
    let bodyStart: Int
    /// The body when it is a file range (`wire` then ends with the head).
    let file: FileRange?

    public convenience init(
        body: [UInt8], contentType: String, etag: String?, lastModified: Int64?,
        cacheControl: String?, vary: String? = nil
    ) {
        self.init(
            .bytes(body), contentType: contentType, etag: etag, lastModified: lastModified,
            cacheControl: cacheControl, vary: vary)
    }

    /// A response whose body is `file`'s range, sent straight from the page cache.
    public convenience init(
        file: FileRange, contentType: String, etag: String?, lastModified: Int64?,
        cacheControl: String?, vary: String? = nil
    ) {
        self.init(
            .file(file), contentType: contentType, etag: etag, lastModified: lastModified,
            cacheControl: cacheControl, vary: vary)
    }

    /// `vary`, when given, is a `Vary` line sent with the validators (and so with a 304
    /// too): `Authorization, Cookie` on a private image's responses.
    public init(
        _ content: Content, contentType: String, etag: String?, lastModified: Int64?, cacheControl: String?,
        vary: String? = nil
    ) {
        self.etag = etag.map { Array($0.utf8) } ?? []
        self.lastModified = lastModified
        let length =
            switch content {
            case .bytes(let bytes): bytes.count
            case .file(let range): range.count
            }
        var lines = Array("Content-Type: \(contentType)\r\nContent-Length: \(length)\r\n".utf8)
        validatorsStart = lines.count
        if let etag { lines += Array("ETag: \(etag)\r\n".utf8) }
        if let lastModified { lines += Array("Last-Modified: ".utf8) + HTTPDate.format(lastModified) + [0x0D, 0x0A] }
        if let cacheControl, !cacheControl.isEmpty { lines += Array("Cache-Control: \(cacheControl)\r\n".utf8) }
        if let vary { lines += Array("Vary: \(vary)\r\n".utf8) }
        lines += [0x0D, 0x0A]
        bodyStart = lines.count
        switch content {
        case .bytes(let bytes):
            lines.reserveCapacity(lines.count + bytes.count)
            lines += bytes
            file = nil
        case .file(let range):
            file = range
        }
        wire = lines
    }

    /// What the body is (a copy of its bytes when they are bytes).
    public var content: Content {
        if let file { return .file(file) }
        return .bytes(body)
    }

    /// A copy of the body's bytes; empty when the body is a file range (see `content`).
    public var body: [UInt8] { file == nil ? Array(wire[bodyStart...]) : [] }

    /// Its header lines (`Content-Type` … `Cache-Control`, `Vary`) as text: for tests and
    /// logs, not for sending.
    public var headerText: String { String(decoding: wire[..<bodyStart], as: UTF8.self) }

    /// The body's length in bytes (`Content-Length`).
    public var contentLength: Int { file?.count ?? wire.count - bodyStart }

    /// Whether the request's validators match, so a 304 answers it (RFC 9110 §13.2.2:
    /// `If-None-Match` wins over `If-Modified-Since` when both are present).
    public func isNotModified(for head: HTTPRequestHead) -> Bool {
        if !head.ifNoneMatch.isEmpty {
            return !etag.isEmpty && Self.entityTagList(head.ifNoneMatch, matches: etag)
        }
        if !head.ifModifiedSince.isEmpty, let lastModified, let since = HTTPDate.parse(head.ifModifiedSince) {
            return lastModified <= since
        }
        return false
    }

    /// Weak comparison of `etag` against a comma-separated `If-None-Match` list or `*`.
    static func entityTagList(_ list: [UInt8], matches etag: [UInt8]) -> Bool {
        var i = 0
        let n = list.count
        while i < n {
            while i < n, list[i] == 0x20 || list[i] == 0x09 || list[i] == UInt8(ascii: ",") { i += 1 }
            if i >= n { break }
            if list[i] == UInt8(ascii: "*") { return true }
            if i + 1 < n, list[i] == UInt8(ascii: "W"), list[i + 1] == UInt8(ascii: "/") { i += 2 }
            let start = i
            if i < n, list[i] == UInt8(ascii: "\"") {
                i += 1
                while i < n, list[i] != UInt8(ascii: "\"") { i += 1 }
                i = min(i + 1, n)
            } else {
                while i < n, list[i] != UInt8(ascii: ",") { i += 1 }
            }
            if i - start == etag.count, list[start..<i].elementsEqual(etag) { return true }
        }
        return false
    }
}

/// What a `.blocking` response's work is, which decides the threads and the queue it
/// waits in (`HTTPConfiguration.blockingThreads`/`maximumQueuedReads`,
/// `renderThreads`/`maximumQueuedRenders` or `storageThreads`/`maximumQueuedStorageReads`).
public enum BlockingKind: Sendable, Hashable {
    /// Reading a file that is not in the page cache: short, waits on the disk.
    case read
    /// Drawing an image (an IIIF region, a small DeepZoom level): long, uses CPU and memory.
    case render
    /// Reading from object storage over the network: waits on another machine, which may
    /// be slow or down. Its own threads, so a slow store never holds a disk read's thread.
    case storage
}

/// What a handler answers.
public enum HTTPResponse: Sendable {
    /// A prepared file or document, 200 or 304 depending on the request's validators.
    case prepared(PreparedResponse)
    /// Bytes with a status and content type, e.g. a JSON document built for this request.
    case bytes(status: Int, contentType: String, body: [UInt8], cacheControl: String?)
    /// An error, sent as the contract's JSON error body.
    case error(HTTPError)
    /// Another response with extra header lines (`Location`, `Link`), e.g. IIIF's 303.
    indirect case withHeaders([(name: String, value: String)], HTTPResponse)
    /// A response that may take a while to make (a file read from disk, an image drawn):
    /// the server runs it on its blocking pool, in `kind`'s lane, and sends its result
    /// when it is done, serving other connections meanwhile. Requests pipelined behind it
    /// on the same connection wait, so responses keep their order. Past the lane's queue
    /// limit the answer is 503; if the client leaves before a thread takes the work, the
    /// work is dropped without running.
    case blocking(BlockingKind, @Sendable () -> HTTPResponse)

    /// The old spelling, `.blocking { … }`: work of unknown cost, run as `.render` (the
    /// lane with the smaller thread cap).
    public static func blocking(_ make: @escaping @Sendable () -> HTTPResponse) -> HTTPResponse {
        .blocking(.render, make)
    }

    /// The work of a `.blocking` response and its kind, with any header lines wrapped
    /// around it, as one closure; nil when nothing in the response blocks.
    public var blockingWork: (kind: BlockingKind, make: @Sendable () -> HTTPResponse)? {
        switch self {
        case let .blocking(kind, make):
            return (kind, make)
        case let .withHeaders(fields, inner):
            guard let work = inner.blockingWork else { return nil }
            let make = work.make
            return (work.kind, { .withHeaders(fields, make()) })
        default:
            return nil
        }
    }

    /// A JSON document.
    public static func json(_ body: [UInt8], status: Int = 200, cacheControl: String? = "no-cache") -> HTTPResponse {
        .bytes(status: status, contentType: "application/json", body: body, cacheControl: cacheControl)
    }
}

/// Renders responses into a connection's output: status line, `Date`, the server's common
/// headers (`X-Content-Type-Options: nosniff`, CORS), the response's headers,
/// `Connection`, then the body unless the request was HEAD (or the answer is a 304).
struct ResponseSerializer {
    /// `X-Content-Type-Options: nosniff`, `Access-Control-Allow-Origin` and the like, sent
    /// on every response. They are part of the 200 heads' first lines made once a second
    /// (`ResponseDate.okHeadStart`), so the usual answer pays nothing for them.
    let commonHeaders: [UInt8]
    /// Sent on every answer, so that no browser takes a body for another type than the
    /// one it is sent as (an error's JSON echoes parts of the request).
    static let noSniffHeader = Array("X-Content-Type-Options: nosniff\r\n".utf8)
    /// The headers of the 204 answer to OPTIONS.
    let optionsHeaders: [UInt8]
    static let allowHeader = Array("Allow: GET, HEAD, OPTIONS\r\n".utf8)

    init(configuration: HTTPConfiguration) {
        self.init(corsAllowOrigin: configuration.corsAllowOrigin)
    }

    init(corsAllowOrigin: String?) {
        var common = Self.noSniffHeader
        if let origin = corsAllowOrigin, !origin.isEmpty {
            common += Array("Access-Control-Allow-Origin: \(origin)\r\n".utf8)
            if origin != "*" { common += Array("Vary: Origin\r\n".utf8) }
        }
        commonHeaders = common
        var options = Self.allowHeader
        if corsAllowOrigin != nil {
            options += Array("Access-Control-Allow-Methods: GET, HEAD, OPTIONS\r\n".utf8)
            // `*` does not cover `Authorization` (Fetch standard): named, for Bearer tokens.
            options += Array("Access-Control-Allow-Headers: Authorization, *\r\n".utf8)
            options += Array("Access-Control-Max-Age: 86400\r\n".utf8)
        }
        optionsHeaders = options
    }

    /// The `Date` of this serializer's answers in the second `wallSeconds`, its 200 heads'
    /// first lines (status, `Date`, common headers) made once for the second. For this
    /// serializer's answers only: another's common headers may differ.
    func date(wallSeconds: Int64) -> ResponseDate {
        ResponseDate(wallSeconds: wallSeconds, then: commonHeaders)
    }

    /// What a response amounted to, for the access log.
    struct Written: Sendable, Hashable {
        var status: Int
        /// The body's length (sent or, for HEAD, announced).
        var bytes: Int
    }

    /// Appends the response to `out`. Bodies are queued as they are: a prepared body is
    /// shared with its cache, a file range is queued for `sendfile`.
    @discardableResult
    func write(
        _ response: HTTPResponse, for head: HTTPRequestHead, keepAlive: Bool, date: ResponseDate,
        extra: [UInt8] = [], into out: inout OutputQueue
    ) -> Written {
        let isHead = head.method == .head
        switch response {
        case let .withHeaders(fields, inner):
            var lines = extra
            for f in fields { lines += Array("\(f.name): \(f.value)\r\n".utf8) }
            return write(inner, for: head, keepAlive: keepAlive, date: date, extra: lines, into: &out)
        case .prepared(let p):
            let status = p.isNotModified(for: head) ? 304 : 200
            // The lines end with the head's end, unless a `Connection` line is due first.
            let ended = keepAlive && head.version == .http11
            if status == 200 && ended && !isHead && p.file == nil {
                // The usual hit: the header lines and the body go out as they are stored.
                out.appendStaged { o in
                    if date.includesCommonHeaders && head.sentRequestID.isEmpty && !head.connectionTag.isEmpty {
                        o.append(date.okHeadStart, thenLine: head.connectionTag, decimal: head.requestNumber)
                    } else {
                        begin(200, date: date, into: &o)
                        appendRequestID(of: head, into: &o)
                    }
                    if !extra.isEmpty { o += extra }
                }
                out.append(body: p.wire)
                return Written(status: 200, bytes: p.contentLength)
            }
            let from = status == 304 ? p.validatorsStart : 0
            out.appendStaged { o in
                begin(status, date: date, into: &o)
                appendRequestID(of: head, into: &o)
                if !extra.isEmpty { o += extra }
                o.append(bytesOf: p.wire, from: from, to: ended ? p.bodyStart : p.bodyStart - 2)
                if !ended { end(keepAlive: keepAlive, version: head.version, into: &o) }
            }
            if status == 304 { return Written(status: 304, bytes: 0) }
            if !isHead {
                if let file = p.file { out.append(file: file) } else { out.append(body: p.wire, from: p.bodyStart) }
            }
            return Written(status: 200, bytes: p.contentLength)
        case let .bytes(status, contentType, body, cacheControl):
            writeBytes(
                status: status, contentType: contentType, body: body, cacheControl: cacheControl, extra: extra,
                isHead: isHead, keepAlive: keepAlive, version: head.version, date: date,
                requestID: { appendRequestID(of: head, into: &$0) }, into: &out)
            return Written(status: status, bytes: body.count)
        case .blocking(_, let make):
            // The event loop runs these on its pool; any other caller waits for it here.
            return write(make(), for: head, keepAlive: keepAlive, date: date, extra: extra, into: &out)
        case .error(let e):
            let body = e.jsonBody
            writeBytes(
                status: e.status, contentType: "application/json", body: body, cacheControl: "no-store",
                extra: e.status == 405
                    ? extra + Self.allowHeader
                    : e.status == 401 ? extra + Array("WWW-Authenticate: \(e.challenge ?? "Bearer")\r\n".utf8) : extra,
                isHead: isHead, keepAlive: keepAlive, version: head.version, date: date,
                requestID: { appendRequestID(of: head, into: &$0) }, into: &out)
            return Written(status: e.status, bytes: body.count)
        }
    }

    /// The 204 answer to OPTIONS (no Content-Length, as RFC 9110 requires for 204).
    func writeOptions(for head: HTTPRequestHead, keepAlive: Bool, date: ResponseDate, into out: inout OutputQueue) {
        out.appendStaged { o in
            begin(204, date: date, into: &o)
            appendRequestID(of: head, into: &o)
            o += optionsHeaders
            end(keepAlive: keepAlive, version: head.version, into: &o)
        }
    }

    /// An error for a request that never parsed; always closes. Its id is the
    /// `requestNumber`th of the connection tagged `connectionTag` (none when empty).
    func writeProtocolError(
        _ error: HTTPError, date: ResponseDate, connectionTag: [UInt8] = [], requestNumber: Int = 0,
        into out: inout OutputQueue
    ) {
        writeBytes(
            status: error.status, contentType: "application/json", body: error.jsonBody, cacheControl: "no-store",
            extra: [], isHead: false, keepAlive: false, version: .http11, date: date,
            requestID: { o in
                guard !connectionTag.isEmpty else { return }
                o.appendLine(prefix: connectionTag, decimal: requestNumber)
            }, into: &out)
    }

    /// `writeProtocolError` as bytes of their own (the refusal sent to a connection past
    /// the cap, which never gets a queue).
    func protocolError(_ error: HTTPError, date: ResponseDate) -> [UInt8] {
        var out = OutputQueue()
        writeProtocolError(error, date: date, into: &out)
        return out.withLeadingBytes { vectors in
            vectors.reduce(into: [UInt8]()) { $0 += UnsafeRawBufferPointer(start: $1.iov_base, count: $1.iov_len) }
        }
    }

    /// Headers and body for bytes built per request; `requestID` writes the
    /// `X-Request-Id` line.
    private func writeBytes(
        status: Int, contentType: String, body: [UInt8], cacheControl: String?, extra: [UInt8],
        isHead: Bool, keepAlive: Bool, version: HTTPVersion, date: ResponseDate,
        requestID: (inout [UInt8]) -> Void, into out: inout OutputQueue
    ) {
        out.appendStaged { o in
            begin(status, date: date, into: &o)
            requestID(&o)
            o.append("Content-Type: ")
            o.append(utf8Of: contentType)
            o.append("\r\nContent-Length: ")
            o.appendDecimal(body.count)
            o.append("\r\n")
            if let cacheControl {
                o.append("Cache-Control: ")
                o.append(utf8Of: cacheControl)
                o.append("\r\n")
            }
            o += extra
            end(keepAlive: keepAlive, version: version, into: &o)
        }
        if !isHead { out.append(body: body) }
    }

    @inline(__always)
    private func begin(_ status: Int, date: ResponseDate, into out: inout [UInt8]) {
        if status == 200 && date.includesCommonHeaders {
            out.append(bytesOf: date.okHeadStart)
            return
        }
        if let line = HTTPStatus.staticStatusLine(status) {
            out.append(line)
        } else {
            out += Array("HTTP/1.1 \(status) \(HTTPStatus.reason(status))\r\n".utf8)
        }
        out.append("Date: ")
        out += date.imfFixdate
        out.append("\r\n")
        if !commonHeaders.isEmpty { out.append(bytesOf: commonHeaders) }
    }

    /// `X-Request-Id`: the id the client sent (sane, `RequestID.isSane`), else the
    /// connection's tag and the request's number; nothing for a head no connection read.
    @inline(__always)
    private func appendRequestID(of head: HTTPRequestHead, into o: inout [UInt8]) {
        if !head.sentRequestID.isEmpty {
            o.append("X-Request-Id: ")
            o.append(bytesOf: head.sentRequestID)
            o.append("\r\n")
        } else if !head.connectionTag.isEmpty {
            o.appendLine(prefix: head.connectionTag, decimal: head.requestNumber)
        }
    }

    @inline(__always)
    private func end(keepAlive: Bool, version: HTTPVersion, into out: inout [UInt8]) {
        if !keepAlive {
            out.append("Connection: close\r\n")
        } else if version == .http10 {
            out.append("Connection: keep-alive\r\n")
        }
        out.append("\r\n")
    }
}
