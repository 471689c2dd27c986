import Synchronization
import TilerHTTP

/// A cache of prepared responses, bounded by the bytes of their bodies (plus a fixed
/// overhead per entry).
public final class ResponseCache<Key: ClockCacheKey>: Sendable {
    private let entries: ClockCache<Key, PreparedResponse>

    /// The most bytes held at once.
    public var capacity: Int { entries.capacity }

    public init(capacity: Int) {
        entries = ClockCache(capacity: capacity)
    }

    /// Bytes held now (bodies plus a fixed overhead per entry).
    public var totalBytes: Int { entries.totalCost }
    /// Entries held now.
    public var count: Int { entries.count }

    /// The cached value, marking it recently used.
    public func value(for key: Key) -> PreparedResponse? { entries.value(for: key) }

    /// Stores `value`, evicting entries not used recently to stay within capacity.
    /// Values larger than the whole capacity are not stored.
    public func insert(_ value: PreparedResponse, for key: Key) {
        entries.insert(value, cost: value.contentLength + 256, for: key)
    }

    /// Drops everything.
    public func removeAll() { entries.removeAll() }
}
