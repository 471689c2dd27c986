import Synchronization
import TilerHTTP

/// A key a `ClockCache` can index without `Hasher`: SipHash and a dictionary probe cost
/// about 300 instructions, on every tile request.
public protocol ClockCacheKey: Hashable, Sendable {
    /// The key's bits for the cache's index. Equal keys give equal bits; different keys
    /// should differ in them as often as they can (a collision costs a comparison, never a
    /// wrong answer). The cache mixes them with a secret seed of its own, so plain
    /// coordinates will do.
    var cacheKeyBits: UInt64 { get }
}

/// A thread-safe cache bounded by a cost per entry, with CLOCK eviction (an
/// approximation of least-recently-used).
///
/// A hit only sets the entry's "referenced" bit; eviction walks the table like a clock
/// hand, sparing (and clearing) referenced entries once. Compared with a linked-list LRU
/// this keeps hits to one probe and one store under the lock, with no pointer chasing and
/// no weak references.
///
/// The entries live in the index itself: an open-addressing table with linear probing,
/// at most half full, keyed by the key's bits mixed with a secret seed per cache (the
/// SplitMix64 finalizer: without the seed the positions cannot be predicted, so requests
/// cannot be chosen to collide). A hit reads one entry, where a separate index of slot
/// numbers took two reads of memory a busy server rarely has in its caches. Removal
/// shifts the entries that follow back, so no tombstones accumulate.
public final class ClockCache<Key: ClockCacheKey, Value: Sendable>: Sendable {
    /// A position of the table: an entry, or free (`isUsed` false; its key and hash are
    /// stale, its value nil).
    private struct Entry {
        var hash: UInt64
        var key: Key
        var value: Value?
        var cost: Int
        var isUsed: Bool
        var referenced: Bool
    }

    private struct Table {
        /// Empty until the first entry, whose key fills the free positions.
        var entries: [Entry] = []
        var count = 0
        var cost = 0
        /// The clock hand: the next position eviction looks at.
        var hand = 0

        /// Positions wrap with this (the table's size is a power of two).
        @inline(__always)
        var mask: Int { entries.count - 1 }

        /// The position holding `key` (whose hash is `hash`), if any.
        @inline(__always)
        func position(of key: Key, hash: UInt64) -> Int? {
            guard !entries.isEmpty else { return nil }
            var p = Int(truncatingIfNeeded: hash) & mask
            while entries[p].isUsed {
                if entries[p].hash == hash && entries[p].key == key { return p }
                p = (p + 1) & mask
            }
            return nil
        }

        /// Stores an entry for `key`, which is not in the table.
        mutating func add(_ value: Value, cost: Int, key: Key, hash: UInt64) {
            if entries.isEmpty {
                entries = Array(
                    repeating: Entry(hash: 0, key: key, value: nil, cost: 0, isUsed: false, referenced: false), count: 16)
            } else if (count + 1) * 2 > entries.count {
                grow()
            }
            let p = freePosition(for: hash)
            entries[p] = Entry(hash: hash, key: key, value: value, cost: cost, isUsed: true, referenced: false)
            count += 1
            self.cost += cost
        }

        /// Empties position `p`, then moves each later entry of its probe run into the
        /// hole when its home position does not lie in (hole, its position], so every
        /// probe still finds it.
        mutating func remove(at p: Int) {
            count -= 1
            cost -= entries[p].cost
            entries[p].value = nil
            entries[p].cost = 0
            entries[p].isUsed = false
            var hole = p
            var q = (p + 1) & mask
            while entries[q].isUsed {
                let home = Int(truncatingIfNeeded: entries[q].hash) & mask
                let stays = hole <= q ? (home > hole && home <= q) : (home > hole || home <= q)
                if !stays {
                    entries.swapAt(hole, q)
                    hole = q
                }
                q = (q + 1) & mask
            }
        }

        /// The first free position of `hash`'s probe run.
        private func freePosition(for hash: UInt64) -> Int {
            var p = Int(truncatingIfNeeded: hash) & mask
            while entries[p].isUsed { p = (p + 1) & mask }
            return p
        }

        mutating func evictOne() {
            while true {
                if hand > mask { hand = 0 }
                if entries[hand].isUsed {
                    if entries[hand].referenced {
                        entries[hand].referenced = false
                    } else {
                        remove(at: hand)
                        hand += 1
                        return
                    }
                }
                hand += 1
            }
        }

        private mutating func grow() {
            var old = entries
            entries = old.map { Entry(hash: 0, key: $0.key, value: nil, cost: 0, isUsed: false, referenced: false) }
            entries += entries
            hand = 0
            for i in old.indices where old[i].isUsed {
                let p = freePosition(for: old[i].hash)
                swap(&entries[p], &old[i])
            }
        }
    }

    /// The most cost held at once.
    public let capacity: Int
    private let table = Mutex(Table())
    private let seed = UInt64.random(in: .min ... .max)

    public init(capacity: Int) {
        self.capacity = capacity
    }

    /// A key's bits mixed with the seed: every bit of the key moves about half of the
    /// hash's. Outside the lock: it needs nothing of the table.
    @inline(__always)
    private func hash(_ key: Key) -> UInt64 {
        var x = key.cacheKeyBits ^ seed
        x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
        x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
        return x ^ (x >> 31)
    }

    /// The cost of the entries held now.
    public var totalCost: Int { table.withLock { $0.cost } }
    /// Entries held now.
    public var count: Int { table.withLock { $0.count } }

    /// The cached value, marking it recently used.
    public func value(for key: Key) -> Value? {
        let hash = hash(key)
        return table.withLock { t in
            guard let p = t.position(of: key, hash: hash) else { return nil }
            t.entries[p].referenced = true
            return t.entries[p].value
        }
    }

    /// Stores `value`, evicting entries not used recently to stay within capacity.
    /// Values costing more than the whole capacity are not stored.
    public func insert(_ value: Value, cost: Int, for key: Key) {
        guard cost <= capacity else { return }
        let hash = hash(key)
        table.withLock { t in
            if let old = t.position(of: key, hash: hash) { t.remove(at: old) }
            while t.cost + cost > capacity, t.count > 0 { t.evictOne() }
            t.add(value, cost: cost, key: key, hash: hash)
        }
    }

    /// Drops the entry for `key` if it is still `isIt` (a newer one stored meanwhile stays).
    public func remove(_ key: Key, if isIt: (Value) -> Bool) {
        let hash = hash(key)
        table.withLock { t in
            guard let p = t.position(of: key, hash: hash), let value = t.entries[p].value, isIt(value) else {
                return
            }
            t.remove(at: p)
        }
    }

    /// Drops everything.
    public func removeAll() {
        table.withLock { t in t = Table() }
    }
}
