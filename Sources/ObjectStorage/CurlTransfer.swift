import CCurl
import CCurlShims
import Foundation
import Synchronization
import TilerSystem

/// One HTTP request as libcurl makes it for ``S3Client``: the request is signed by
/// libcurl (`CURLOPT_AWS_SIGV4`), bounded in time by libcurl's timeouts, and its answer is
/// kept only up to ``bodyLimit`` bytes.
struct HTTPRequest {
    enum Body {
        case none
        case bytes([UInt8])
        /// `length` bytes of an open file from `offset`, read with `pread` as they are
        /// sent (no copy of the part in memory).
        case file(descriptor: FileDescriptor, offset: UInt64, length: Int)

        var length: Int {
            switch self {
            case .none: 0
            case let .bytes(bytes): bytes.count
            case let .file(_, _, length): length
            }
        }
    }

    var method: String
    var url: String
    /// `Name: value` lines, signed with the request.
    var headers: [String] = []
    var body: Body = .none
    /// The most answer bytes kept; a larger answer fails (`bodyTooLarge`). Error
    /// documents are cut at ``CurlSession/errorDocumentLimit`` instead: their start
    /// (code and message) is enough.
    var bodyLimit: Int
    /// Bytes to reserve for the answer up front (a range read knows its length).
    var reserve = 0
    /// Whole-request bound, seconds.
    var timeout: Double
    /// Drop the transfer when it is slower than `bytesPerSecond` for `seconds`.
    var lowSpeed: (bytesPerSecond: Int, seconds: Int)?
    /// Polled during the transfer; true stops it (`cancelled`).
    var isCancelled: (@Sendable () -> Bool)?
}

struct HTTPResponse {
    var status: Int
    /// Lower-cased names; the last of repeated headers wins.
    var headers: [String: String]
    var body: [UInt8]

    var text: Substring { Substring(String(decoding: body, as: UTF8.self)) }
}

/// Why a request got no usable answer.
enum TransferFailure: Error {
    /// libcurl's error: no connection, a timeout, a broken transfer.
    case curl(code: UInt32, message: String)
    /// The answer's body was larger than the request allowed.
    case bodyTooLarge(limit: Int)
    case cancelled
    /// Reading the local file being uploaded failed (errno).
    case readFailed(Int32)

    var isTimeout: Bool {
        if case let .curl(code, _) = self { return code == CURLE_OPERATION_TIMEDOUT.rawValue }
        return false
    }
}

/// A pool of libcurl easy handles shared by every thread: each request takes an idle
/// handle (or makes one), and gives it back afterwards, so that its connection to the
/// server is reused by the next request.
final class CurlSession: Sendable {
    /// A libcurl easy handle. Unchecked `Sendable`: libcurl lets a handle move between
    /// threads as long as one thread uses it at a time, and the session hands each one to
    /// a single request until it is given back.
    private struct EasyHandle: @unchecked Sendable {
        let pointer: UnsafeMutableRawPointer
    }

    private let idle = Mutex<[EasyHandle]>([])
    private let credentials: S3Credentials
    private let signing: String
    private let connectTimeout: Double
    /// Idle handles (and so open connections) kept at most.
    static let maximumIdle = 32
    /// Response headers kept at most, in bytes: S3's answers carry a few hundred.
    static let headerLimit = 64 << 10
    /// The start of an error document kept for its code and message.
    static let errorDocumentLimit = 64 << 10

    init(credentials: S3Credentials, region: String, connectTimeout: Double) {
        precondition(tiler_curl_global_init() == CURLE_OK, "libcurl could not start")
        self.credentials = credentials
        signing = "aws:amz:\(region):s3"
        self.connectTimeout = connectTimeout
    }

    deinit {
        idle.withLock { handles in
            for handle in handles { curl_easy_cleanup(handle.pointer) }
        }
    }

    func perform(_ request: HTTPRequest) -> Result<HTTPResponse, TransferFailure> {
        let handle: UnsafeMutableRawPointer = idle.withLock { $0.popLast()?.pointer } ?? curl_easy_init()!
        let transfer = Transfer(request)
        let result = transfer.run(on: handle, session: self)
        curl_easy_reset(handle)
        let returned = EasyHandle(pointer: handle)
        let keep = idle.withLock { handles -> Bool in
            guard handles.count < Self.maximumIdle else { return false }
            handles.append(returned)
            return true
        }
        if !keep { curl_easy_cleanup(handle) }
        return result
    }

    fileprivate func configure(_ handle: UnsafeMutableRawPointer, _ request: HTTPRequest) {
        tiler_curl_set_string(handle, CURLOPT_URL, request.url)
        tiler_curl_set_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")
        tiler_curl_set_long(handle, CURLOPT_NOSIGNAL, 1)
        tiler_curl_set_long(handle, CURLOPT_TCP_KEEPALIVE, 1)
        tiler_curl_set_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(connectTimeout))
        tiler_curl_set_long(handle, CURLOPT_TIMEOUT_MS, Self.milliseconds(request.timeout))
        if let lowSpeed = request.lowSpeed {
            tiler_curl_set_long(handle, CURLOPT_LOW_SPEED_LIMIT, lowSpeed.bytesPerSecond)
            tiler_curl_set_long(handle, CURLOPT_LOW_SPEED_TIME, lowSpeed.seconds)
        }
        tiler_curl_set_string(handle, CURLOPT_AWS_SIGV4, signing)
        tiler_curl_set_string(handle, CURLOPT_USERNAME, credentials.accessKeyID)
        tiler_curl_set_string(handle, CURLOPT_PASSWORD, credentials.secretAccessKey)
        tiler_curl_set_string(handle, CURLOPT_USERAGENT, "tiler")
    }

    private static func milliseconds(_ seconds: Double) -> Int {
        max(1, Int(min(seconds * 1000, Double(Int32.max))))
    }

    /// Extra headers every request carries: the payload hash S3 requires
    /// (`UNSIGNED-PAYLOAD` for bodies, which are streamed; the empty body's hash
    /// otherwise) and the session token. (Not `Expect:` to turn 100-continue off: libcurl
    /// 7.88 signs the emptied header but does not send it, and the signature fails.)
    fileprivate func standardHeaders(hasBody: Bool) -> [String] {
        var headers = ["x-amz-content-sha256: \(hasBody ? "UNSIGNED-PAYLOAD" : Self.emptyPayloadHash)"]
        if let token = credentials.sessionToken { headers.append("x-amz-security-token: \(token)") }
        return headers
    }

    static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
}

/// The state of one transfer, reached from libcurl's callbacks.
private final class Transfer {
    let request: HTTPRequest
    var body: [UInt8] = []
    var exceeded = false
    var headers: [String: String] = [:]
    var headerBytes = 0
    var sent = 0
    var readError: Int32 = 0
    var cancelled = false
    var handle: UnsafeMutableRawPointer?
    /// Set at the first body bytes: the answer is an error document, kept up to
    /// ``CurlSession/errorDocumentLimit`` whatever the request's own limit.
    var status: Int?

    init(_ request: HTTPRequest) {
        self.request = request
        body.reserveCapacity(min(request.reserve, request.bodyLimit))
    }

    func run(on handle: UnsafeMutableRawPointer, session: CurlSession) -> Result<HTTPResponse, TransferFailure> {
        self.handle = handle
        session.configure(handle, request)
        let context = Unmanaged.passUnretained(self).toOpaque()
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        defer { errorBuffer.deallocate() }
        tiler_curl_set_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer)

        tiler_curl_set_data_callback(handle, CURLOPT_WRITEFUNCTION) { bytes, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            return transfer.receive(UnsafeRawBufferPointer(start: bytes, count: size * count))
        }
        tiler_curl_set_pointer(handle, CURLOPT_WRITEDATA, context)
        tiler_curl_set_data_callback(handle, CURLOPT_HEADERFUNCTION) { bytes, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            return transfer.header(UnsafeRawBufferPointer(start: bytes, count: size * count))
        }
        tiler_curl_set_pointer(handle, CURLOPT_HEADERDATA, context)
        if request.isCancelled != nil {
            tiler_curl_set_long(handle, CURLOPT_NOPROGRESS, 0)
            tiler_curl_set_progress_callback(handle) { context, _, _, _, _ in
                let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
                if transfer.request.isCancelled?() == true {
                    transfer.cancelled = true
                    return 1
                }
                return 0
            }
            tiler_curl_set_pointer(handle, CURLOPT_XFERINFODATA, context)
        }

        let headerLines = request.headers + session.standardHeaders(hasBody: request.body.length > 0)
        switch request.method {
        case "GET":
            tiler_curl_set_long(handle, CURLOPT_HTTPGET, 1)
        case "HEAD":
            tiler_curl_set_long(handle, CURLOPT_NOBODY, 1)
        case "PUT", "POST":
            // An upload (PUT semantics) whose method is then named: the body, empty or
            // not, comes from the read callback with a Content-Length, never as a form.
            tiler_curl_set_long(handle, CURLOPT_UPLOAD, 1)
            tiler_curl_set_offset(handle, CURLOPT_INFILESIZE_LARGE, curl_off_t(request.body.length))
            tiler_curl_set_data_callback(handle, CURLOPT_READFUNCTION) { bytes, size, count, context in
                let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
                return transfer.send(into: bytes!, capacity: size * count)
            }
            tiler_curl_set_pointer(handle, CURLOPT_READDATA, context)
            tiler_curl_set_string(handle, CURLOPT_CUSTOMREQUEST, request.method)
        default:
            tiler_curl_set_string(handle, CURLOPT_CUSTOMREQUEST, request.method)
        }
        var list: UnsafeMutablePointer<curl_slist>?
        for line in headerLines { list = curl_slist_append(list, line) }
        defer { curl_slist_free_all(list) }
        tiler_curl_set_pointer(handle, CURLOPT_HTTPHEADER, list)

        let code = curl_easy_perform(handle)
        if cancelled { return .failure(.cancelled) }
        if exceeded { return .failure(.bodyTooLarge(limit: request.bodyLimit)) }
        if readError != 0 { return .failure(.readFailed(readError)) }
        guard code == CURLE_OK else {
            var message = String(cString: errorBuffer)
            if message.isEmpty { message = String(cString: curl_easy_strerror(code)) }
            return .failure(.curl(code: code.rawValue, message: message))
        }
        var status = 0
        tiler_curl_get_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return .success(HTTPResponse(status: status, headers: headers, body: body))
    }

    func receive(_ bytes: UnsafeRawBufferPointer) -> Int {
        if status == nil {
            var code = 0
            tiler_curl_get_long(handle, CURLINFO_RESPONSE_CODE, &code)
            status = code
        }
        let isError = status.map { $0 >= 300 } ?? false
        let limit = isError ? CurlSession.errorDocumentLimit : request.bodyLimit
        let room = limit - body.count
        if bytes.count > room {
            if isError {
                body.append(contentsOf: bytes.prefix(max(0, room)))
                return bytes.count
            }
            exceeded = true
            return 0
        }
        body.append(contentsOf: bytes)
        return bytes.count
    }

    func header(_ bytes: UnsafeRawBufferPointer) -> Int {
        headerBytes += bytes.count
        guard headerBytes <= CurlSession.headerLimit else {
            exceeded = true
            return 0
        }
        let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if line.hasPrefix("HTTP/") {
            // A new answer (after a 100 Continue, say): forget the previous one's headers.
            headers = [:]
        } else if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].lowercased()
            headers[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return bytes.count
    }

    func send(into buffer: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
        let remaining = request.body.length - sent
        let count = min(capacity, remaining)
        guard count > 0 else { return 0 }
        switch request.body {
        case .none:
            return 0
        case let .bytes(bytes):
            bytes.withUnsafeBytes { raw in
                UnsafeMutableRawPointer(buffer).copyMemory(from: raw.baseAddress! + sent, byteCount: count)
            }
            sent += count
            return count
        case let .file(descriptor, offset, _):
            let n: Int
            do {
                n = try descriptor.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: count), at: Int(offset) + sent)
            } catch {
                readError = error.errno
                return Int(CURL_READFUNC_ABORT)
            }
            guard n > 0 else {
                readError = EIO  // the file ends early
                return Int(CURL_READFUNC_ABORT)
            }
            sent += n
            return n
        }
    }
}
