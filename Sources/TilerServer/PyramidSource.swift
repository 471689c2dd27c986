import TilerCore
import TilerHTTP
import TilerSystem

/// Where one pyramid's bytes live, as the server reads them: a folder
/// (`ROOT/ID/LEVEL/ROW/COLUMN.EXT`, ``FolderSource``), an archive on the local disk
/// (`ROOT/ID.pmtiles`, ``LocalArchiveSource``) or an archive in a bucket
/// (`s3://BUCKET/PREFIX/ID.pmtiles`, ``BucketArchiveSource``). The manifest is read once,
/// when the catalog opens the source (``PyramidCatalog``), and lives in the ``Pyramid``;
/// a source answers for the parts it stores, tiles and the thumbnail.
///
/// Every read is asked first without waiting (`readIfReady`, which an event loop calls):
/// a source answers the bytes at once when it has them without blocking (a file in the
/// page cache), or names the lane of the blocking pool where `read` must run (`.read` for
/// a disk, `.storage` for the network, `.render` for parts made on demand). The store,
/// not the source, keeps the response cache, checks tiles, and turns errors into HTTP.
///
/// A source is immutable: a pyramid re-cut, replaced or re-uploaded is a new source (and
/// a new ``Pyramid`` with a new generation), while requests holding the old one finish
/// with the old bytes (an open file keeps its inode, an S3 read is pinned to its ETag).
public protocol PyramidSource: AnyObject, Sendable {
    /// The folder, file or object, for log lines: `ROOT/ID`, `ROOT/ID.pmtiles`,
    /// `s3://BUCKET/KEY`.
    var location: String { get }
    /// Where `part` is, for log lines: its file in a folder, else the archive and the part.
    func location(of part: PyramidPart) -> String
    /// Validators of the pyramid as a whole (the manifest, and documents made from it).
    var validators: Validators { get }
    /// `part` if it can be had without waiting, `.absent` when the pyramid has no such
    /// part, or the lane where `read` must be called. Never blocks.
    func readIfReady(_ part: PyramidPart, maximumBytes: Int) throws(SourceError) -> SourceRead
    /// `part`'s bytes; may block (disk, network). Storage requests end by the
    /// `StorageDeadline` in force, if any.
    func read(_ part: PyramidPart, maximumBytes: Int) throws(SourceError) -> StoredBytes
}

extension PyramidSource {
    public func location(of part: PyramidPart) -> String { "\(location): \(part)" }
}

/// A thing a pyramid stores.
public enum PyramidPart: Sendable, Hashable, CustomStringConvertible {
    case tile(TileCoordinate)
    /// The thumbnail the manifest names.
    case thumbnail

    public var description: String {
        switch self {
        case let .tile(t): "tile \(t.level)/\(t.row)/\(t.column)"
        case .thumbnail: "the thumbnail"
        }
    }
}

/// `ETag` and `Last-Modified` of something served.
public struct Validators: Sendable, Hashable {
    /// A strong entity tag, quotes included.
    public var etag: String
    /// Seconds since 1970, or nil when not known.
    public var lastModified: Int64?

    public init(etag: String, lastModified: Int64?) {
        self.etag = etag
        self.lastModified = lastModified
    }

    /// The validators of a file: `FileInfo.entityTag` and its modification time.
    init(_ info: FileInfo) {
        self.init(etag: info.entityTag, lastModified: info.modificationSeconds)
    }

    /// A tag derived from this one for a part of the thing it validates: same quotes,
    /// `suffix` appended inside them, so it changes whenever this one does.
    func derived(_ suffix: String) -> Validators {
        Validators(etag: String(etag.dropLast()) + "-" + suffix + "\"", lastModified: lastModified)
    }
}

/// Bytes read from a source and their validators.
public struct StoredBytes: Sendable {
    public var bytes: [UInt8]
    public var validators: Validators

    public init(bytes: [UInt8], validators: Validators) {
        self.bytes = bytes
        self.validators = validators
    }
}

/// What `readIfReady` found.
public enum SourceRead: Sendable {
    case read(StoredBytes)
    /// The pyramid has no such part (404).
    case absent
    /// Reading it would wait: call `read` on this lane of the blocking pool.
    case mustWait(BlockingKind)
}

/// Why a part could not be read.
public enum SourceError: Error, Sendable, CustomStringConvertible {
    /// Not there: 404.
    case absent
    /// There, but not something the server reads (a symbolic link, a FIFO or device, a
    /// folder): 404 like `absent`; the text says why, for the log of a drawing.
    case refused(String)
    /// Stored but unusable (a damaged or truncated archive, an unreadable file): 500.
    /// The text names the file and the fault, for the log only.
    case damaged(String)
    /// The storage did not answer, or not in time (`timedOut`): 503 or 504, and the
    /// server carries on serving what it has cached.
    case unavailable(String, timedOut: Bool)
    /// The object was replaced since the source was opened (its ETag changed): nothing of
    /// the new one is mixed in; the catalog opens the new one.
    case replaced(String)
    /// Making the part (a tile made on the fly) found no room in the render memory within
    /// the wait: 503, retry later.
    case busy(String)

    public var description: String {
        switch self {
        case .absent: "not there"
        case let .refused(why), let .damaged(why), let .unavailable(why, _), let .replaced(why), let .busy(why): why
        }
    }
}
