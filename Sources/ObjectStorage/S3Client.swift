import CCurl
import Foundation
import TilerSettings
import TilerSystem

/// A client for the S3 API (AWS or any S3-compatible server) over libcurl: requests are
/// signed with Signature V4 by libcurl, every request is bounded in time
/// (``S3Configuration``), requests that may be repeated are retried with backoff after
/// connection errors, timeouts, 429 and 5xx, and no answer is kept beyond a bound the
/// request sets (never one an answer's header sets). Thread-safe; connections are
/// pooled and reused.
public final class S3Client: Sendable {
    public let configuration: S3Configuration
    private let session: CurlSession

    /// The largest answer of a request without a known size: a listing page of 1,000
    /// keys of up to 1 KiB each, an upload's XML.
    public static let documentLimit = 8 << 20
    static let errorDocumentLimit = CurlSession.errorDocumentLimit

    public init(configuration: S3Configuration) {
        self.configuration = configuration
        session = CurlSession(
            credentials: configuration.credentials, region: configuration.region,
            connectTimeout: configuration.connectTimeout)
    }

    // MARK: - Operations

    /// The object's size and ETag, or nil if there is no such key.
    public func head(bucket: String, key: String) throws(S3Error) -> S3ObjectInfo? {
        let response: HTTPResponse
        do {
            response = try send("HEAD", bucket: bucket, key: key, method: "HEAD", bodyLimit: 0)
        } catch  where error.status == 404 {
            return nil
        }
        return try objectInfo(response, operation: "HEAD", bucket: bucket, key: key)
    }

    /// Exactly `length` bytes at `offset` (a range request). With `ifMatch`, an object
    /// whose ETag is no longer that one is refused (`412 PreconditionFailed`) instead of
    /// mixing bytes of two versions.
    public func get(
        bucket: String, key: String, offset: UInt64, length: Int, ifMatch: String? = nil,
        timeout: Double? = nil
    ) throws(S3Error) -> [UInt8] {
        precondition(length >= 0)
        if length == 0 { return [] }
        let last = offset + UInt64(length) - 1
        var headers = ["Range: bytes=\(offset)-\(last)"]
        if let ifMatch { headers.append("If-Match: \(ifMatch)") }
        let response = try send(
            "GET", bucket: bucket, key: key, method: "GET", headers: headers,
            bodyLimit: length, reserve: length, timeout: timeout)
        let bad = { (why: String) in S3Error(.invalidResponse, operation: "GET", bucket: bucket, key: key, message: why) }
        switch response.status {
        case 206:
            let expected = "bytes \(offset)-\(last)/"
            guard let range = response.headers["content-range"], range.hasPrefix(expected) else {
                throw bad("asked for bytes \(offset)-\(last), got Content-Range '\(response.headers["content-range"] ?? "")'")
            }
        case 200 where offset == 0:
            break  // the whole object, which is exactly the range if the length matches below
        default:
            throw bad("asked for a range, got HTTP \(response.status)")
        }
        guard response.body.count == length else {
            throw bad("asked for \(length) bytes at \(offset), got \(response.body.count)")
        }
        // A store (or a proxy in front of it) that ignores If-Match answers from whatever
        // version it has now: its ETag says so. (An answer without one cannot be checked.)
        if let ifMatch, let etag = response.headers["etag"], Self.strongTag(etag) != Self.strongTag(ifMatch) {
            throw S3Error(
                .objectChanged, operation: "GET", bucket: bucket, key: key,
                message:
                    "the object changed (the answer's ETag \(etag.prefix(80)) is not \(ifMatch.prefix(80)), the one read first; the store ignored If-Match)"
            )
        }
        return response.body
    }

    /// An entity tag without the weak prefix a proxy may add (`W/"…"`) and without its
    /// quotes (some S3 clones list ETags unquoted and send them quoted).
    static func strongTag(_ tag: String) -> Substring {
        var t = Substring(tag.trimmingCharacters(in: .whitespaces))
        if t.hasPrefix("W/") { t = t.dropFirst(2) }
        if t.count >= 2, t.first == "\"", t.last == "\"" { t = t.dropFirst().dropLast() }
        return t
    }

    /// Stores `body` under `key` in one request. With `ifNoneMatch`, an existing key is
    /// left alone and the answer is `412 PreconditionFailed`. Returns the new ETag.
    @discardableResult
    public func put(
        bucket: String, key: String, body: HTTPBody, ifNoneMatch: Bool = false,
        isCancelled: (@Sendable () -> Bool)? = nil
    ) throws(S3Error) -> String {
        let response = try send(
            "PUT", bucket: bucket, key: key, method: "PUT",
            headers: ifNoneMatch ? ["If-None-Match: *"] : [], body: body.request,
            bodyLimit: Self.errorDocumentLimit, isCancelled: isCancelled)
        return response.headers["etag"] ?? ""
    }

    /// Starts a multipart upload; returns its id. Not retried (a retry could leave an
    /// orphan upload).
    public func createMultipartUpload(bucket: String, key: String) throws(S3Error) -> String {
        let response = try send(
            "CreateMultipartUpload", bucket: bucket, key: key, method: "POST",
            query: [("uploads", "")], bodyLimit: Self.documentLimit, idempotent: false)
        guard let id = XMLText.value("UploadId", in: response.text), !id.isEmpty else {
            throw S3Error(
                .invalidResponse, operation: "CreateMultipartUpload", bucket: bucket, key: key,
                message: "the answer has no UploadId")
        }
        return id
    }

    /// Uploads part `number` (1...10,000); returns its ETag for ``completeMultipartUpload``.
    public func uploadPart(
        bucket: String, key: String, uploadID: String, number: Int, body: HTTPBody,
        isCancelled: (@Sendable () -> Bool)? = nil
    ) throws(S3Error) -> String {
        let operation = "UploadPart \(number)"
        let response = try send(
            operation, bucket: bucket, key: key, method: "PUT",
            query: [("partNumber", String(number)), ("uploadId", uploadID)],
            body: body.request, bodyLimit: Self.errorDocumentLimit, isCancelled: isCancelled)
        guard let etag = response.headers["etag"], !etag.isEmpty else {
            throw S3Error(.invalidResponse, operation: operation, bucket: bucket, key: key, message: "the answer has no ETag")
        }
        return etag
    }

    /// Makes the uploaded parts the object, in one step. With `ifNoneMatch`, an
    /// existing key is left alone (`412 PreconditionFailed`). If a retry finds the upload
    /// gone because the first attempt completed it, an object of `expectedSize` bytes
    /// under `key` counts as success.
    public func completeMultipartUpload(
        bucket: String, key: String, uploadID: String, parts: [(number: Int, etag: String)],
        expectedSize: UInt64, ifNoneMatch: Bool = false
    ) throws(S3Error) {
        var xml = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        for part in parts {
            xml += "<Part><PartNumber>\(part.number)</PartNumber><ETag>\(XMLText.escape(part.etag))</ETag></Part>"
        }
        xml += "</CompleteMultipartUpload>"
        var attempts = 0
        do throws(S3Error) {
            let response = try send(
                "CompleteMultipartUpload", bucket: bucket, key: key, method: "POST",
                query: [("uploadId", uploadID)],
                headers: ["Content-Type: application/xml"] + (ifNoneMatch ? ["If-None-Match: *"] : []),
                body: .bytes(Array(xml.utf8)), bodyLimit: Self.documentLimit, reserve: 0,
                idempotent: true, timeout: nil, isCancelled: nil, attempts: &attempts)
            // S3 may answer 200 and report the failure in the body.
            if let code = XMLText.value("Code", in: response.text), XMLText.elements("Error", in: response.text).count > 0 {
                throw S3Error(
                    .service(status: 200, code: code), operation: "CompleteMultipartUpload", bucket: bucket, key: key,
                    message: XMLText.value("Message", in: response.text) ?? "")
            }
        } catch  where attempts > 1 && (error.code == "NoSuchUpload" || error.code == "PreconditionFailed") {
            guard let info = try head(bucket: bucket, key: key), info.size == expectedSize else { throw error }
        }
    }

    /// Abandons a multipart upload and frees its parts. An upload already gone is not an
    /// error.
    public func abortMultipartUpload(bucket: String, key: String, uploadID: String) throws(S3Error) {
        do {
            try send(
                "AbortMultipartUpload", bucket: bucket, key: key, method: "DELETE",
                query: [("uploadId", uploadID)], bodyLimit: Self.errorDocumentLimit)
        } catch  where error.status == 404 {
            return
        }
    }

    /// One page (up to `maxKeys`, at most 1,000 objects) of the keys starting with
    /// `prefix`.
    public func list(
        bucket: String, prefix: String, continuationToken: String? = nil, maxKeys: Int? = nil,
        timeout: Double? = nil
    ) throws(S3Error) -> S3ListPage {
        var query = [("list-type", "2"), ("prefix", prefix)]
        if let continuationToken { query.append(("continuation-token", continuationToken)) }
        if let maxKeys { query.append(("max-keys", String(maxKeys))) }
        let response = try send(
            "ListObjectsV2", bucket: bucket, key: nil, method: "GET", query: query,
            bodyLimit: Self.documentLimit, timeout: timeout)
        let text = response.text
        guard text.contains("<ListBucketResult") else {
            throw S3Error(
                .invalidResponse, operation: "ListObjectsV2", bucket: bucket, key: nil, message: "the answer is not a ListBucketResult")
        }
        var objects: [S3Object] = []
        for block in XMLText.elements("Contents", in: text) {
            guard let key = XMLText.value("Key", in: block), let size = XMLText.value("Size", in: block).flatMap({ UInt64($0) }) else {
                throw S3Error(
                    .invalidResponse, operation: "ListObjectsV2", bucket: bucket, key: nil, message: "an entry has no Key or Size")
            }
            objects.append(
                S3Object(
                    key: key, size: size, etag: XMLText.value("ETag", in: block) ?? "",
                    lastModified: XMLText.value("LastModified", in: block).flatMap(S3Object.seconds(iso8601:))))
        }
        let truncated = XMLText.value("IsTruncated", in: text) == "true"
        let token = XMLText.value("NextContinuationToken", in: text)
        if truncated, token?.isEmpty ?? true {
            throw S3Error(
                .invalidResponse, operation: "ListObjectsV2", bucket: bucket, key: nil,
                message: "a truncated listing without a NextContinuationToken")
        }
        return S3ListPage(objects: objects, continuationToken: truncated ? token : nil)
    }

    /// Every key starting with `prefix`, page after page. A listing that would not end is
    /// an error rather than an unbounded loop: more than `limit` objects, a continuation
    /// token the store already sent (it would lead back to a page already read), more
    /// than `configuration.listPages` pages, or longer than `configuration.listSeconds`
    /// seconds in all.
    public func listAll(
        bucket: String, prefix: String, limit: Int = 1_000_000, pageSize: Int? = nil,
        timeout: Double? = nil
    ) throws(S3Error) -> [S3Object] {
        var objects: [S3Object] = []
        var token: String?
        var seen: Set<String> = []
        var pages = 0
        let started = DispatchTime.now().uptimeNanoseconds
        let refuse = { (why: String) in
            S3Error(.invalidResponse, operation: "ListObjectsV2", bucket: bucket, key: nil, message: why)
        }
        repeat {
            let page = try list(bucket: bucket, prefix: prefix, continuationToken: token, maxKeys: pageSize, timeout: timeout)
            pages += 1
            objects += page.objects
            guard objects.count <= limit else { throw refuse("more than \(limit) objects under '\(prefix)'") }
            token = page.continuationToken
            guard let next = token else { break }
            guard seen.insert(next).inserted else {
                throw refuse(
                    "page \(pages) of the listing of '\(prefix)' gave a continuation token the store had already sent; "
                        + "the listing would never end (a fault of the store)")
            }
            guard pages < configuration.listPages else {
                throw refuse(
                    "the listing of '\(prefix)' did not end within \(configuration.listPages) pages (\(S3Configuration.Setting.listPages.variable!))"
                )
            }
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            guard seconds < configuration.listSeconds else {
                throw refuse(
                    "the listing of '\(prefix)' did not end within \(Self.shown(configuration.listSeconds)) s "
                        + "(\(pages) pages; \(S3Configuration.Setting.listSeconds.variable!))")
            }
        } while true
        return objects
    }

    /// `30`, `0.5`: a setting's value as a person writes it.
    private static func shown(_ seconds: Double) -> String {
        seconds == seconds.rounded() && seconds < 1e15 ? String(Int(seconds)) : String(seconds)
    }

    /// Deletes `key`; a key already gone is not an error (S3 answers 204 either way).
    public func delete(bucket: String, key: String) throws(S3Error) {
        do {
            try send("DELETE", bucket: bucket, key: key, method: "DELETE", bodyLimit: Self.errorDocumentLimit)
        } catch  where error.status == 404 {
            return
        }
    }

    // MARK: - Uploading a file

    /// Uploads `size` bytes of an open file as `key`: one PUT up to the part size, else
    /// a multipart upload, which is aborted (its parts freed) on any failure or when
    /// `isCancelled` turns true. Either way the object appears whole or not at all.
    /// `uploadStarted` gets the multipart upload's id as soon as it exists (so that a
    /// signal handler can abort it) and `uploadEnded` is called when it is completed or
    /// aborted; `uploaded` gets the bytes sent so far after each part. With
    /// `ifNoneMatch`, an existing key is left alone (412).
    public func upload(
        file descriptor: FileDescriptor, size: UInt64, bucket: String, key: String, ifNoneMatch: Bool,
        isCancelled: (@Sendable () -> Bool)? = nil,
        uploadStarted: (String) -> Void = { _ in }, uploadEnded: () -> Void = {},
        uploaded: (UInt64) -> Void = { _ in }
    ) throws(S3Error) {
        let partSize = configuration.partSize(forObjectOf: size)
        if size <= UInt64(partSize) {
            try put(
                bucket: bucket, key: key, body: .file(descriptor: descriptor, offset: 0, length: Int(size)),
                ifNoneMatch: ifNoneMatch, isCancelled: isCancelled)
            uploaded(size)
            return
        }
        let uploadID = try createMultipartUpload(bucket: bucket, key: key)
        uploadStarted(uploadID)
        defer { uploadEnded() }
        do throws(S3Error) {
            var parts: [(number: Int, etag: String)] = []
            var offset: UInt64 = 0
            while offset < size {
                if isCancelled?() == true {
                    throw S3Error(.cancelled, operation: "UploadPart \(parts.count + 1)", bucket: bucket, key: key, message: "interrupted")
                }
                let length = Int(min(UInt64(partSize), size - offset))
                let etag = try uploadPart(
                    bucket: bucket, key: key, uploadID: uploadID, number: parts.count + 1,
                    body: .file(descriptor: descriptor, offset: offset, length: length),
                    isCancelled: isCancelled)
                parts.append((parts.count + 1, etag))
                offset += UInt64(length)
                uploaded(offset)
            }
            if isCancelled?() == true {
                throw S3Error(.cancelled, operation: "CompleteMultipartUpload", bucket: bucket, key: key, message: "interrupted")
            }
            try completeMultipartUpload(
                bucket: bucket, key: key, uploadID: uploadID, parts: parts, expectedSize: size,
                ifNoneMatch: ifNoneMatch)
        } catch {
            try? abortMultipartUpload(bucket: bucket, key: key, uploadID: uploadID)
            throw error
        }
    }

    // MARK: - Requests

    /// A request body.
    public enum HTTPBody: Sendable {
        case bytes([UInt8])
        /// `length` bytes of an open file from `offset`, read as they are sent.
        case file(descriptor: FileDescriptor, offset: UInt64, length: Int)

        var request: HTTPRequest.Body {
            switch self {
            case let .bytes(bytes): .bytes(bytes)
            case let .file(descriptor, offset, length): .file(descriptor: descriptor, offset: offset, length: length)
            }
        }
    }

    private func objectInfo(_ response: HTTPResponse, operation: String, bucket: String, key: String) throws(S3Error) -> S3ObjectInfo {
        guard let length = response.headers["content-length"].flatMap({ UInt64($0) }) else {
            throw S3Error(.invalidResponse, operation: operation, bucket: bucket, key: key, message: "no Content-Length")
        }
        return S3ObjectInfo(size: length, etag: response.headers["etag"] ?? "")
    }

    @discardableResult
    private func send(
        _ operation: String, bucket: String, key: String?, method: String, query: [(String, String)] = [],
        headers: [String] = [], body: HTTPRequest.Body = .none, bodyLimit: Int, reserve: Int = 0,
        idempotent: Bool = true, timeout: Double? = nil,
        isCancelled: (@Sendable () -> Bool)? = nil
    ) throws(S3Error) -> HTTPResponse {
        var attempts = 0
        return try send(
            operation, bucket: bucket, key: key, method: method, query: query, headers: headers, body: body,
            bodyLimit: bodyLimit, reserve: reserve, idempotent: idempotent, timeout: timeout,
            isCancelled: isCancelled, attempts: &attempts)
    }

    /// Sends a request, retrying it (if `idempotent`) after connection errors, timeouts,
    /// 429 and 5xx, at most ``S3Configuration/retries`` times; any other non-2xx answer is
    /// an error carrying S3's code and message.
    private func send(
        _ operation: String, bucket: String, key: String?, method: String, query: [(String, String)],
        headers: [String], body: HTTPRequest.Body, bodyLimit: Int, reserve: Int,
        idempotent: Bool, timeout: Double?, isCancelled: (@Sendable () -> Bool)?,
        attempts: inout Int
    ) throws(S3Error) -> HTTPResponse {
        let configuration = self.configuration
        var seconds = timeout ?? configuration.requestTimeout
        var lowSpeed: (Int, Int)?
        if body.length > 0 {
            seconds += Double(body.length) / Double(configuration.minimumUploadRate)
            lowSpeed = (configuration.minimumUploadRate, max(1, Int(configuration.requestTimeout.rounded(.up))))
        }
        var request = HTTPRequest(
            method: method, url: url(bucket: bucket, key: key, query: query), headers: headers,
            body: body, bodyLimit: bodyLimit, reserve: reserve, timeout: seconds,
            lowSpeed: lowSpeed, isCancelled: isCancelled)
        let deadline = StorageDeadline.current
        while true {
            // A caller's deadline (a server answering a client) caps every attempt, and
            // no attempt starts once it has passed.
            if let deadline {
                let left = deadline.secondsLeft
                guard left > 0.001 else {
                    throw S3Error(
                        .timedOut, operation: operation, bucket: bucket, key: key,
                        message: "no complete answer within the \(deadline.text) s allowed")
                }
                request.timeout = min(seconds, left)
            }
            attempts += 1
            let error: S3Error
            switch session.perform(request) {
            case let .success(response) where (200..<300).contains(response.status):
                return response
            case let .success(response):
                let text = response.text
                let code = XMLText.value("Code", in: text) ?? Self.code(forStatus: response.status)
                var message = XMLText.value("Message", in: text) ?? ""
                if code == "PreconditionFailed", method == "GET" {
                    message = "the object changed (its ETag is no longer the one read first)"
                }
                error = S3Error(
                    .service(status: response.status, code: code), operation: operation, bucket: bucket, key: key, message: message)
            case let .failure(failure):
                error = Self.error(failure, operation: operation, bucket: bucket, key: key, seconds: request.timeout)
            }
            let retryable = idempotent && error.isUnavailable && error.kind != .cancelled
            guard retryable, attempts <= configuration.retries, isCancelled?() != true else { throw error }
            let delay = min(2.0, 0.1 * pow(2.0, Double(attempts - 1))) * Double.random(in: 0.5...1.0)
            if let deadline, deadline.secondsLeft < delay + 0.01 { throw error }
            usleep(UInt32(delay * 1_000_000))
        }
    }

    private static func error(
        _ failure: TransferFailure, operation: String, bucket: String, key: String?,
        seconds: Double
    ) -> S3Error {
        switch failure {
        case .cancelled:
            return S3Error(.cancelled, operation: operation, bucket: bucket, key: key, message: "interrupted")
        case let .bodyTooLarge(limit):
            return S3Error(
                .invalidResponse, operation: operation, bucket: bucket, key: key, message: "the answer is larger than \(limit) bytes")
        case let .readFailed(code):
            return S3Error(
                .localFile, operation: operation, bucket: bucket, key: key,
                message: "reading the file to upload: \(SystemCallError.reason(code))")
        case let .curl(code, message):
            if code == CURLE_OPERATION_TIMEDOUT.rawValue {
                return S3Error(
                    .timedOut, operation: operation, bucket: bucket, key: key,
                    message: "no complete answer within \(String(format: "%g", seconds)) s (\(message))")
            }
            return S3Error(.connection, operation: operation, bucket: bucket, key: key, message: message)
        }
    }

    /// A code for answers without a body (HEAD), named as S3 names them.
    private static func code(forStatus status: Int) -> String {
        switch status {
        case 400: "BadRequest"
        case 403: "AccessDenied"
        case 404: "NotFound"
        case 412: "PreconditionFailed"
        case 416: "InvalidRange"
        case 500: "InternalError"
        case 503: "ServiceUnavailable"
        default: ""
        }
    }

    // MARK: - Addresses

    /// Path-style `ENDPOINT/BUCKET/KEY` for a custom endpoint, virtual-hosted
    /// `https://BUCKET.s3.REGION.amazonaws.com/KEY` for AWS; the query sorted by name and
    /// every part percent-encoded as Signature V4's canonical request wants it (libcurl
    /// signs the URL as given).
    func url(bucket: String, key: String?, query: [(String, String)]) -> String {
        let path = key.map { "/" + Self.percentEncode($0, keepingSlash: true) } ?? ""
        var url: String
        if let endpoint = configuration.endpoint {
            url = "\(endpoint)/\(bucket)\(path)"
        } else {
            url = "https://\(bucket).s3.\(configuration.region).amazonaws.com\(path.isEmpty ? "/" : path)"
        }
        if !query.isEmpty {
            let pairs: [(name: String, value: String)] = query.map { pair in
                (Self.percentEncode(pair.0, keepingSlash: false), Self.percentEncode(pair.1, keepingSlash: false))
            }
            // Byte order of the encoded names, as Signature V4 sorts them.
            let sorted = pairs.sorted { a, b in
                a.name == b.name
                    ? Array(a.value.utf8).lexicographicallyPrecedes(b.value.utf8)
                    : Array(a.name.utf8).lexicographicallyPrecedes(b.name.utf8)
            }
            url += "?" + sorted.map { pair in pair.name + "=" + pair.value }.joined(separator: "&")
        }
        return url
    }

    /// RFC 3986 percent-encoding of everything but unreserved characters (and `/` in
    /// keys), as Signature V4 wants it.
    static func percentEncode(_ text: String, keepingSlash: Bool) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            let unreserved =
                (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                || byte == 0x2D || byte == 0x5F || byte == 0x2E || byte == 0x7E
            if unreserved || (keepingSlash && byte == 0x2F) {
                out.append(byte)
            } else {
                out += [0x25, hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
