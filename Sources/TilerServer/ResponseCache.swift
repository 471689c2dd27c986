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
/// A hit only sets the entry's "referenced" bit; eviction walks the slots like a clock
/// hand, sparing (and clearing) referenced entries once. Compared with a linked-list LRU
/// this keeps hits to one probe of the index and one store under the lock, with no
/// pointer chasing and no weak references.
public final class ClockCache<Key: ClockCacheKey, Value: Sendable>: Sendable {
    /// An entry, or a free slot (`value` nil; its key is stale). Not an optional slot:
    /// a probe reads the key in place, where unwrapping one would copy the whole slot.
    private struct Slot {
        var key: Key
        var value: Value?
        var cost: Int
        var referenced: Bool
    }

    private struct Contents {
        var index: SlotIndex
        var slots: [Slot] = []
        var free: [Int] = []
        /// The clock hand: the next slot eviction looks at.
        var hand = 0
        var cost = 0

        init(seed: UInt64) { index = SlotIndex(seed: seed) }

        /// The slot holding `key`, if any.
        func slot(of key: Key) -> Int? {
            let hash = index.hash(key.cacheKeyBits)
            var position = index.home(of: hash)
            while let i = index.nextSlot(from: &position, hash: hash) {
                if slots[i].key == key { return i }
            }
            return nil
        }

        mutating func evictOne() {
            while true {
                if hand >= slots.count { hand = 0 }
                if slots[hand].value != nil {
                    if slots[hand].referenced {
                        slots[hand].referenced = false
                    } else {
                        remove(at: hand, slots[hand].key)
                        hand += 1
                        return
                    }
                }
                hand += 1
            }
        }

        mutating func remove(at i: Int, _ key: Key) {
            index.remove(slot: i, hash: index.hash(key.cacheKeyBits))
            cost -= slots[i].cost
            slots[i].value = nil
            slots[i].cost = 0
            free.append(i)
        }
    }

    /// The most cost held at once.
    public let capacity: Int
    private let contents: Mutex<Contents>

    public init(capacity: Int) {
        self.capacity = capacity
        contents = Mutex(Contents(seed: UInt64.random(in: .min ... .max)))
    }

    /// The cost of the entries held now.
    public var totalCost: Int { contents.withLock { $0.cost } }
    /// Entries held now.
    public var count: Int { contents.withLock { $0.index.count } }

    /// The cached value, marking it recently used.
    public func value(for key: Key) -> Value? {
        contents.withLock { c in
            guard let i = c.slot(of: key) else { return nil }
            c.slots[i].referenced = true
            return c.slots[i].value
        }
    }

    /// Stores `value`, evicting entries not used recently to stay within capacity.
    /// Values costing more than the whole capacity are not stored.
    public func insert(_ value: Value, cost: Int, for key: Key) {
        guard cost <= capacity else { return }
        contents.withLock { c in
            if let old = c.slot(of: key) { c.remove(at: old, key) }
            while c.cost + cost > capacity, c.index.count > 0 { c.evictOne() }
            let slot = Slot(key: key, value: value, cost: cost, referenced: false)
            let i: Int
            if let reused = c.free.popLast() {
                i = reused
                c.slots[i] = slot
            } else {
                i = c.slots.count
                c.slots.append(slot)
            }
            c.index.insert(slot: i, hash: c.index.hash(key.cacheKeyBits))
            c.cost += cost
        }
    }

    /// Drops the entry for `key` if it is still `isIt` (a newer one stored meanwhile stays).
    public func remove(_ key: Key, if isIt: (Value) -> Bool) {
        contents.withLock { c in
            guard let i = c.slot(of: key), let value = c.slots[i].value, isIt(value) else { return }
            c.remove(at: i, key)
        }
    }

    /// Drops everything.
    public func removeAll() {
        contents.withLock { c in c = Contents(seed: c.index.seed) }
    }
}

/// A `ClockCache`'s index: slot numbers by their key's hash, in an open-addressing table
/// with linear probing, at most half full, whose entries also hold the whole hash (so a
/// probe compares keys only when the hashes are equal). Removal shifts the entries that
/// follow back, so no tombstones accumulate.
struct SlotIndex {
    private struct Entry {
        var hash: UInt64
        /// The slot number + 1; 0 marks an empty entry.
        var slotPlusOne: Int
    }

    private var entries: [Entry]
    private var mask: Int
    let seed: UInt64
    private(set) var count = 0

    init(seed: UInt64) {
        self.seed = seed
        entries = Array(repeating: Entry(hash: 0, slotPlusOne: 0), count: 16)
        mask = 15
    }

    /// A key's bits mixed with the seed (the SplitMix64 finalizer): every bit of the key
    /// moves about half of the hash's, and without the seed the positions cannot be
    /// predicted, so requests cannot be chosen to collide.
    @inline(__always)
    func hash(_ bits: UInt64) -> UInt64 {
        var x = bits ^ seed
        x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
        x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
        return x ^ (x >> 31)
    }

    /// Where a probe for `hash` starts.
    @inline(__always)
    func home(of hash: UInt64) -> Int { Int(truncatingIfNeeded: hash) & mask }

    /// The next slot recorded under `hash` at or after `position` in the probe, moving
    /// `position` past it; nil when the probe ends (the key is not in the index).
    @inline(__always)
    func nextSlot(from position: inout Int, hash: UInt64) -> Int? {
        while true {
            let e = entries[position]
            if e.slotPlusOne == 0 { return nil }
            position = (position + 1) & mask
            if e.hash == hash { return e.slotPlusOne - 1 }
        }
    }

    /// Records `slot` (whose key is not in the index) under `hash`.
    mutating func insert(slot: Int, hash: UInt64) {
        if (count + 1) * 2 > entries.count { grow() }
        var p = home(of: hash)
        while entries[p].slotPlusOne != 0 { p = (p + 1) & mask }
        entries[p] = Entry(hash: hash, slotPlusOne: slot + 1)
        count += 1
    }

    /// Forgets `slot`, recorded under `hash`.
    mutating func remove(slot: Int, hash: UInt64) {
        var p = home(of: hash)
        while entries[p].slotPlusOne != slot + 1 {
            precondition(entries[p].slotPlusOne != 0, "slot \(slot) is not in the index")
            p = (p + 1) & mask
        }
        // Backward shift: move each later entry of the run into the hole when its home
        // position does not lie in (hole, its position], so every probe still finds it.
        var hole = p
        var q = (p + 1) & mask
        while entries[q].slotPlusOne != 0 {
            let home = home(of: entries[q].hash)
            let stays = hole <= q ? (home > hole && home <= q) : (home > hole || home <= q)
            if !stays {
                entries[hole] = entries[q]
                hole = q
            }
            q = (q + 1) & mask
        }
        entries[hole] = Entry(hash: 0, slotPlusOne: 0)
        count -= 1
    }

    private mutating func grow() {
        let old = entries
        entries = Array(repeating: Entry(hash: 0, slotPlusOne: 0), count: old.count * 2)
        mask = entries.count - 1
        count = 0
        for e in old where e.slotPlusOne != 0 { insert(slot: e.slotPlusOne - 1, hash: e.hash) }
    }
}

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
