/// `s3://BUCKET/PREFIX`: a bucket and a key prefix (without leading or trailing `/`;
/// empty for the bucket's top), where pyramids live as `PREFIX/ID.pmtiles`.
public struct S3Location: Sendable, Hashable, CustomStringConvertible {
    public let bucket: String
    public let prefix: String

    public static let scheme = "s3://"

    /// Whether `text` names object storage at all (so that a malformed `s3://` root is
    /// reported as such, not taken for a local folder).
    public static func isS3(_ text: String) -> Bool { text.lowercased().hasPrefix(scheme) }

    /// Parses `s3://BUCKET[/PREFIX][/]`; throws a message saying what is wrong.
    public init(parsing text: String) throws(S3Error) {
        guard Self.isS3(text) else { throw .configuration("'\(text)' is not an s3://BUCKET/PREFIX address") }
        let rest = text.dropFirst(Self.scheme.count)
        let bucket = String(rest.prefix { $0 != "/" })
        guard Self.isBucketName(bucket) else {
            throw .configuration(
                "'\(bucket)' in '\(text)' is not a bucket name (3-63 characters: a-z, 0-9, '.', '-', starting and ending with a letter or digit)"
            )
        }
        var prefix = String(rest.dropFirst(bucket.count))
        while prefix.hasPrefix("/") { prefix.removeFirst() }
        while prefix.hasSuffix("/") { prefix.removeLast() }
        guard !prefix.contains("//"), prefix.utf8.count <= 900,
            !prefix.split(separator: "/").contains(where: { $0 == "." || $0 == ".." }),
            prefix.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F })
        else {
            throw .configuration(
                "the prefix '\(prefix)' in '\(text)' is not usable (no empty, '.' or '..' parts, no control characters, at most 900 bytes)")
        }
        self.bucket = bucket
        self.prefix = prefix
    }

    public init(bucket: String, prefix: String) {
        self.bucket = bucket
        self.prefix = prefix
    }

    /// The key of `name` under the prefix.
    public func key(_ name: String) -> String { prefix.isEmpty ? name : "\(prefix)/\(name)" }

    /// What ListObjectsV2 is asked for: the prefix and a slash, or nothing.
    public var listPrefix: String { prefix.isEmpty ? "" : prefix + "/" }

    /// `s3://BUCKET/KEY`.
    public func url(ofKey key: String) -> String { "\(Self.scheme)\(bucket)/\(key)" }

    public var description: String { prefix.isEmpty ? "\(Self.scheme)\(bucket)" : "\(Self.scheme)\(bucket)/\(prefix)" }

    /// S3's rules for new buckets: 3-63 characters of a-z, 0-9, '.' and '-', starting and
    /// ending with a letter or digit.
    public static func isBucketName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (3...63).contains(bytes.count) else { return false }
        func alphanumeric(_ b: UInt8) -> Bool { (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) }
        return alphanumeric(bytes.first!) && alphanumeric(bytes.last!)
            && bytes.allSatisfy { alphanumeric($0) || $0 == 0x2E || $0 == 0x2D }
    }
}
