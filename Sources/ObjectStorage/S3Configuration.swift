import Foundation
import TilerSettings

/// The keys a request is signed with (Signature V4).
public struct S3Credentials: Sendable, Hashable {
    public var accessKeyID: String
    public var secretAccessKey: String
    /// Temporary credentials' token, sent as `x-amz-security-token`.
    public var sessionToken: String?

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }
}

/// How to reach a bucket and how long to wait for it: every request has a connect
/// bound and a whole-request bound, and requests that may be repeated are retried a
/// bounded number of times. Read from the environment the way every S3 tool reads it
/// (``init(environment:endpoint:)``).
public struct S3Configuration: Sendable, Hashable {
    public var credentials: S3Credentials
    /// Signing region (`AWS_REGION`, else `AWS_DEFAULT_REGION`, else us-east-1).
    public var region: String
    /// `http(s)://HOST[:PORT]` of an S3-compatible server, addressed path-style
    /// (`ENDPOINT/BUCKET/KEY`); nil for AWS itself, addressed virtual-hosted style
    /// (`https://BUCKET.s3.REGION.amazonaws.com/KEY`).
    public var endpoint: String?
    /// Seconds to establish a connection (`TILER_S3_CONNECT_TIMEOUT`).
    public var connectTimeout: Double
    /// Seconds for one whole request without a large body: a range read, HEAD, a list
    /// page, DELETE, starting or completing an upload (`TILER_S3_TIMEOUT`).
    public var requestTimeout: Double
    /// Uploads (PUT, UploadPart) get ``requestTimeout`` plus their size at this many
    /// bytes per second, and are dropped when slower than it for ``requestTimeout``
    /// (`TILER_S3_MIN_RATE`).
    public var minimumUploadRate: Int
    /// Extra attempts for a request that may be repeated (reads, PUT, UploadPart,
    /// DELETE, completing an upload) after a connection error, a timeout, 429 or a 5xx
    /// (`TILER_S3_RETRIES`). Waits 0.1 s, 0.2 s, 0.4 s, ... (at most 2 s, with jitter)
    /// between attempts.
    public var retries: Int
    /// Archives larger than this are uploaded in parts of this size; at most 10,000
    /// parts, so larger archives get larger parts (`TILER_S3_PART_SIZE`, 5 MiB-5 GiB).
    public var partSize: Int
    /// The most pages one listing of a prefix may take (`TILER_S3_LIST_PAGES`): past it
    /// the listing is an error, as is a page whose continuation token the store sent
    /// before.
    public var listPages: Int
    /// The most seconds one listing of a prefix may take in all, every page and retry
    /// included (`TILER_S3_LIST_SECONDS`).
    public var listSeconds: Double

    public static let defaultConnectTimeout = 5.0
    public static let defaultRequestTimeout = 30.0
    public static let defaultMinimumUploadRate = 256 << 10
    public static let defaultRetries = 3
    public static let defaultPartSize = 64 << 20
    /// 10,000 pages: ten million keys at S3's 1,000 a page (a listing stops at a million
    /// objects anyway), a hundred thousand at a store's 100.
    public static let defaultListPages = 10_000
    public static let defaultListSeconds = 300.0
    /// S3's bounds on a part (except the last) and on the number of parts.
    public static let partSizeRange = (5 << 20)...(5 << 30)
    public static let maximumParts = 10_000

    public init(
        credentials: S3Credentials, region: String = "us-east-1", endpoint: String? = nil,
        connectTimeout: Double = defaultConnectTimeout, requestTimeout: Double = defaultRequestTimeout,
        minimumUploadRate: Int = defaultMinimumUploadRate, retries: Int = defaultRetries,
        partSize: Int = defaultPartSize, listPages: Int = defaultListPages, listSeconds: Double = defaultListSeconds
    ) {
        self.credentials = credentials
        self.region = region
        self.endpoint = endpoint
        self.connectTimeout = connectTimeout
        self.requestTimeout = requestTimeout
        self.minimumUploadRate = minimumUploadRate
        self.retries = retries
        self.partSize = partSize
        self.listPages = listPages
        self.listSeconds = listSeconds
    }

    /// Reads `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
    /// `AWS_REGION` (or `AWS_DEFAULT_REGION`), `AWS_ENDPOINT_URL_S3` or
    /// `AWS_ENDPOINT_URL` (overridden by `endpoint`, the `--s3-endpoint` flag), and the
    /// `TILER_S3_*` limits (``Setting``). Throws a message naming the variable at fault.
    public init(environment: [String: String], endpoint flag: String? = nil) throws(S3Error) {
        func value(_ name: String) -> String? {
            guard let text = environment[name]?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
            return text
        }
        guard let key = value("AWS_ACCESS_KEY_ID"), let secret = value("AWS_SECRET_ACCESS_KEY") else {
            throw S3Error.configuration(
                "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials) to reach a bucket")
        }
        self.init(credentials: S3Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: value("AWS_SESSION_TOKEN")))
        region = value("AWS_REGION") ?? value("AWS_DEFAULT_REGION") ?? "us-east-1"
        guard region.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else {
            throw S3Error.configuration("AWS_REGION '\(region)' is not a region name (like us-east-1)")
        }
        if let endpoint = flag ?? value("AWS_ENDPOINT_URL_S3") ?? value("AWS_ENDPOINT_URL") {
            self.endpoint = try Self.checkedEndpoint(endpoint)
        }
        do {
            try Setting.read(flags: [:], environment: environment, into: &self)
        } catch {
            throw S3Error.configuration(error.description)
        }
    }

    /// `http(s)://HOST[:PORT]` without a trailing slash, or a configuration error.
    public static func checkedEndpoint(_ text: String) throws(S3Error) -> String {
        var trimmed = text
        while trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let url = URL(string: trimmed), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty, url.path.isEmpty, url.query == nil, url.user == nil
        else {
            throw S3Error.configuration("the S3 endpoint '\(text)' is not http(s)://HOST[:PORT]")
        }
        return trimmed
    }

    /// `123`, `64K`, `64M`, `1G` (binary multiples; a trailing `iB` or `B` is allowed).
    static func bytes(_ text: String) -> Int? {
        var digits = text.uppercased()
        for suffix in ["IB", "B"] where digits.hasSuffix(suffix) { digits.removeLast(suffix.count) }
        var multiplier = 1
        if let last = digits.last, let shift = ["K": 10, "M": 20, "G": 30][String(last)] {
            multiplier = 1 << shift
            digits.removeLast()
        }
        guard let number = Int(digits), number >= 0 else { return nil }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: multiplier)
        return overflow ? nil : bytes
    }

    /// The part size for an object of `size` bytes: ``partSize``, grown so that at most
    /// 10,000 parts are needed.
    public func partSize(forObjectOf size: UInt64) -> Int {
        let needed = (size + UInt64(Self.maximumParts) - 1) / UInt64(Self.maximumParts)
        return max(partSize, Int(min(needed, UInt64(Self.partSizeRange.upperBound))))
    }
}
