import Synchronization
import TilerHTTP

/// A thread-safe cache of prepared responses, bounded by the bytes of their bodies, with
/// CLOCK eviction (an approximation of least-recently-used).
///
/// A hit only sets the entry's "referenced" bit; eviction walks the slots like a clock
/// hand, sparing (and clearing) referenced entries once. Compared with a linked-list LRU
/// this keeps hits to one dictionary lookup and one store under the lock, with no
/// pointer chasing and no weak references.
public final class ResponseCache<Key: Hashable & Sendable>: Sendable {
    private struct Slot {
        var key: Key
        var value: PreparedResponse
        var cost: Int
        var referenced: Bool
    }

    private struct Contents {
        var index: [Key: Int] = [:]
        var slots: [Slot?] = []
        var free: [Int] = []
        /// The clock hand: the next slot eviction looks at.
        var hand = 0
        var bytes = 0

        mutating func evictOne() {
            while true {
                if hand >= slots.count { hand = 0 }
                if let slot = slots[hand] {
                    if slot.referenced {
                        slots[hand]!.referenced = false
                    } else {
                        index[slot.key] = nil
                        bytes -= slot.cost
                        slots[hand] = nil
                        free.append(hand)
                        hand += 1
                        return
                    }
                }
                hand += 1
            }
        }
    }

    /// The most bytes held at once.
    public let capacity: Int
    private let contents = Mutex(Contents())

    public init(capacity: Int) {
        self.capacity = capacity
    }

    /// Bytes held now (bodies plus a fixed overhead per entry).
    public var totalBytes: Int { contents.withLock { $0.bytes } }
    /// Entries held now.
    public var count: Int { contents.withLock { $0.index.count } }

    /// The cached value, marking it recently used.
    public func value(for key: Key) -> PreparedResponse? {
        contents.withLock { c in
            guard let i = c.index[key] else { return nil }
            c.slots[i]!.referenced = true
            return c.slots[i]!.value
        }
    }

    /// Stores `value`, evicting entries not used recently to stay within capacity.
    /// Values larger than the whole capacity are not stored.
    public func insert(_ value: PreparedResponse, for key: Key) {
        let cost = value.body.count + 256
        guard cost <= capacity else { return }
        contents.withLock { c in
            if let old = c.index[key] {
                c.bytes -= c.slots[old]!.cost
                c.slots[old] = nil
                c.free.append(old)
                c.index[key] = nil
            }
            while c.bytes + cost > capacity, !c.index.isEmpty { c.evictOne() }
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
            c.bytes += cost
        }
    }

    /// Drops everything.
    public func removeAll() {
        contents.withLock { c in c = Contents() }
    }
}
