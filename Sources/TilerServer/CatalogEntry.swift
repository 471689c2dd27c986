import ObjectStorage
import TilerSystem

/// What the catalog compares to tell whether a stored pyramid changed since it was
/// loaded: the manifest's `stat` for a folder, the archive's `lstat` for a local archive,
/// the listing's key, size and ETag for an object.
enum SourceSignature: Sendable, Hashable {
    case folder(manifest: FileInfo)
    case archive(FileInfo)
    case object(key: String, size: UInt64, etag: String)
    /// An image file in the `--sources` folder, as `lstat` saw it.
    case sourceFile(name: String, FileInfo)

    init(_ object: S3Object) {
        self = .object(key: object.key, size: object.size, etag: object.etag)
    }
}

/// What the catalog knows about a name under ROOT.
enum CatalogEntry: Sendable {
    /// A pyramid that can be served.
    case pyramid(Pyramid)
    /// A pyramid whose manifest or archive exists but cannot be used: requests for it get
    /// a 500 with `message` (short, no paths); the details went to the log. `signature` is
    /// what failed, so an unchanged one is not read again.
    case broken(message: String, signature: SourceSignature?)

    var pyramid: Pyramid? {
        if case let .pyramid(p) = self { return p }
        return nil
    }

    var signature: SourceSignature? {
        switch self {
        case let .pyramid(p): p.signature
        case let .broken(_, signature): signature
        }
    }

    /// Whether `other` is this very entry (the same loaded pyramid, or the same failure).
    func isSame(as other: CatalogEntry?) -> Bool {
        switch (self, other) {
        case let (.pyramid(a), .pyramid(b)?): a === b
        case let (.broken(m, f), .broken(n, g)?): m == n && f == g
        default: false
        }
    }
}
