import Foundation
import TilerHTTP

/// A thread-safe cache of prepared responses, bounded by the bytes of their bodies, with
/// CLOCK eviction (an approximation of least-recently-used).
///
/// A hit only sets the entry's "referenced" bit; eviction walks the slots like a clock
/// hand, sparing (and clearing) referenced entries once. Compared with a linked-list LRU
/// this keeps hits to one dictionary lookup and one store under the lock, with no
/// pointer chasing and no weak references.
public final class ResponseCache<Key: Hashable & Sendable>: @unchecked Sendable {
    private struct Slot {
        var key: Key
        var value: PreparedResponse
        var cost: Int
        var referenced: Bool
    }

    /// The most bytes held at once.
    public let capacity: Int
    private let lock = NSLock()
    private var index: [Key: Int] = [:]
    private var slots: [Slot?] = []
    private var free: [Int] = []
    private var hand = 0
    private var bytes = 0

    public init(capacity: Int) {
        self.capacity = capacity
    }

    /// Bytes held now (bodies plus a fixed overhead per entry).
    public var totalBytes: Int { lock.withLock { bytes } }
    /// Entries held now.
    public var count: Int { lock.withLock { index.count } }

    /// The cached value, marking it recently used.
    public func value(for key: Key) -> PreparedResponse? {
        lock.lock()
        defer { lock.unlock() }
        guard let i = index[key] else { return nil }
        slots[i]!.referenced = true
        return slots[i]!.value
    }

    /// Stores `value`, evicting entries not used recently to stay within capacity.
    /// Values larger than the whole capacity are not stored.
    public func insert(_ value: PreparedResponse, for key: Key) {
        let cost = value.body.count + 256
        guard cost <= capacity else { return }
        lock.lock()
        defer { lock.unlock() }
        if let old = index[key] {
            bytes -= slots[old]!.cost
            slots[old] = nil
            free.append(old)
            index[key] = nil
        }
        while bytes + cost > capacity, !index.isEmpty { evictOne() }
        let slot = Slot(key: key, value: value, cost: cost, referenced: false)
        let i: Int
        if let reused = free.popLast() {
            i = reused
            slots[i] = slot
        } else {
            i = slots.count
            slots.append(slot)
        }
        index[key] = i
        bytes += cost
    }

    /// Drops everything.
    public func removeAll() {
        lock.withLock {
            index.removeAll()
            slots.removeAll()
            free.removeAll()
            hand = 0
            bytes = 0
        }
    }

    private func evictOne() {
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
