/// Why a request to object storage failed: which operation on which bucket and key, and
/// S3's own error code (`NoSuchKey`, `SignatureDoesNotMatch`, ...) or the connection
/// problem. `description` is one line: `s3://tiles/a/b.pmtiles: GET: 403 AccessDenied:
/// Access Denied`.
public struct S3Error: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// Missing or malformed settings (credentials, endpoint, an `s3://` address).
        case configuration
        /// The server answered with an error status and, usually, an S3 error code.
        case service(status: Int, code: String)
        /// No answer in time: the connection or the whole request took longer than its
        /// bound.
        case timedOut
        /// No connection, or it broke (refused, reset, DNS, TLS).
        case connection
        /// An answer that breaks the protocol (a body larger than asked for, a range
        /// other than the one requested, XML without the expected element).
        case invalidResponse
        /// The operation was stopped on request (an interrupted cut).
        case cancelled
        /// A local file could not be read for an upload.
        case localFile
        /// A range read pinned to an ETag was answered from another version of the object
        /// (the answer's ETag is not the pinned one: the store or a proxy in front of it
        /// ignored `If-Match`). Nothing of the answer is used.
        case objectChanged
    }

    public let kind: Kind
    /// `GET`, `HEAD`, `PUT`, `ListObjectsV2`, `UploadPart 3`, ...; empty for configuration.
    public let operation: String
    public let bucket: String?
    public let key: String?
    public let message: String

    public init(_ kind: Kind, operation: String, bucket: String?, key: String?, message: String) {
        self.kind = kind
        self.operation = operation
        self.bucket = bucket
        self.key = key
        self.message = message
    }

    static func configuration(_ message: String) -> S3Error {
        S3Error(.configuration, operation: "", bucket: nil, key: nil, message: message)
    }

    /// S3's error code (`NoSuchKey`), or nil when the server did not answer.
    public var code: String? {
        if case let .service(_, code) = kind { return code }
        return nil
    }

    /// The HTTP status, or nil when the server did not answer.
    public var status: Int? {
        if case let .service(status, _) = kind { return status }
        return nil
    }

    /// Storage is unreachable, slow or failing (as opposed to a refusal of this request):
    /// a timeout, a connection error, 408, 429, a 5xx, or S3's `400 RequestTimeout` (the
    /// connection idled). A server answers 503 or 504 for these; requests are retried.
    public var isUnavailable: Bool {
        switch kind {
        case .timedOut, .connection: true
        case let .service(status, code): status == 408 || status == 429 || status >= 500 || code == "RequestTimeout"
        default: false
        }
    }

    /// The store refused the credentials or their permission, for every request alike
    /// (as opposed to a fault of one object): a revoked or unknown key
    /// (`InvalidAccessKeyId`), a wrong secret (`SignatureDoesNotMatch`), an expired or
    /// invalid session token (`ExpiredToken`, `InvalidToken`), a policy that no longer
    /// allows it (`AccessDenied`), a clock too far off (`RequestTimeTooSkewed`): any 401 or
    /// 403, and these codes whatever the status. It lasts until the credentials work
    /// again, so a server answers 503 meanwhile, not "damaged".
    public var isAccessRefused: Bool {
        guard case let .service(status, code) = kind else { return false }
        return status == 401 || status == 403 || Self.accessCodes.contains(code)
    }

    static let accessCodes: Set<String> = [
        "AccessDenied", "AccountProblem", "AllAccessDisabled", "AuthorizationHeaderMalformed", "ExpiredToken",
        "InvalidAccessKeyId", "InvalidToken", "RequestExpired", "RequestTimeTooSkewed", "SignatureDoesNotMatch",
        "TokenRefreshRequired", "InvalidSecurity",
    ]

    /// The object is no longer the version a read was pinned to: refused with `412
    /// PreconditionFailed` (`If-Match`), or answered from another version
    /// (``Kind/objectChanged``).
    public var isObjectChanged: Bool { kind == .objectChanged || code == "PreconditionFailed" }

    /// Where: `s3://BUCKET/KEY`, `s3://BUCKET`, or nothing.
    public var resource: String {
        guard let bucket else { return "" }
        guard let key else { return "s3://\(bucket)" }
        return "s3://\(bucket)/\(key)"
    }

    public var description: String {
        var parts: [String] = []
        if !resource.isEmpty { parts.append(resource) }
        if !operation.isEmpty { parts.append(operation) }
        switch kind {
        case let .service(status, code): parts.append(code.isEmpty ? "HTTP \(status)" : "\(status) \(code)")
        case .timedOut: parts.append("timed out")
        default: break
        }
        if !message.isEmpty { parts.append(message) }
        return parts.joined(separator: ": ")
    }
}
