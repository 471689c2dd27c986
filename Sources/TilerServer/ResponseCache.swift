import Synchronization
import TilerHTTP

/// A thread-safe cache bounded by a cost per entry, with CLOCK eviction (an
/// approximation of least-recently-used).
///
/// A hit only sets the entry's "referenced" bit; eviction walks the slots like a clock
/// hand, sparing (and clearing) referenced entries once. Compared with a linked-list LRU
/// this keeps hits to one dictionary lookup and one store under the lock, with no
/// pointer chasing and no weak references.
public final class ClockCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Slot {
        var key: Key
        var value: Value
        var cost: Int
        var referenced: Bool
    }

    private struct Contents {
        var index: [Key: Int] = [:]
        var slots: [Slot?] = []
        var free: [Int] = []
        /// The clock hand: the next slot eviction looks at.
        var hand = 0
        var cost = 0

        mutating func evictOne() {
            while true {
                if hand >= slots.count { hand = 0 }
                if let slot = slots[hand] {
                    if slot.referenced {
                        slots[hand]!.referenced = false
                    } else {
                        remove(at: hand, slot.key)
                        hand += 1
                        return
                    }
                }
                hand += 1
            }
        }

        mutating func remove(at i: Int, _ key: Key) {
            index[key] = nil
            cost -= slots[i]!.cost
            slots[i] = nil
            free.append(i)
        }
    }

    /// The most cost held at once.
    public let capacity: Int
    private let contents = Mutex(Contents())

    public init(capacity: Int) {
        self.capacity = capacity
    }

    /// The cost of the entries held now.
    public var totalCost: Int { contents.withLock { $0.cost } }
    /// Entries held now.
    public var count: Int { contents.withLock { $0.index.count } }

    /// The cached value, marking it recently used.
    public func value(for key: Key) -> Value? {
        contents.withLock { c in
            guard let i = c.index[key] else { return nil }
            c.slots[i]!.referenced = true
            return c.slots[i]!.value
        }
    }

    /// Stores `value`, evicting entries not used recently to stay within capacity.
    /// Values costing more than the whole capacity are not stored.
    public func insert(_ value: Value, cost: Int, for key: Key) {
        guard cost <= capacity else { return }
        contents.withLock { c in
            if let old = c.index[key] { c.remove(at: old, key) }
            while c.cost + cost > capacity, !c.index.isEmpty { c.evictOne() }
            let slot = Slot(key: key, value: value, cost: cost, referenced: false)
            let i: Int
            if let reused = c.free.popLast() {
                i = reused
                c.slots[i] = slot
            } else {
                i = c.slots.count
                c.slots.append(slot)
            }
            c.index[key] = i
            c.cost += cost
        }
    }

    /// Drops the entry for `key` if it is still `isIt` (a newer one stored meanwhile stays).
    public func remove(_ key: Key, if isIt: (Value) -> Bool) {
        contents.withLock { c in
            guard let i = c.index[key], isIt(c.slots[i]!.value) else { return }
            c.remove(at: i, key)
        }
    }

    /// Drops everything.
    public func removeAll() {
        contents.withLock { c in c = Contents() }
    }
}

/// A cache of prepared responses, bounded by the bytes of their bodies (plus a fixed
/// overhead per entry).
public final class ResponseCache<Key: Hashable & Sendable>: Sendable {
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
        entries.insert(value, cost: value.body.count + 256, for: key)
    }

    /// Drops everything.
    public func removeAll() { entries.removeAll() }
}
