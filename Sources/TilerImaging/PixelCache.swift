import Dispatch
import Synchronization
import TilerCore

/// A tile's pixels: rows of `width * bands` bytes.
public struct TilePixels: Sendable {
    public let bytes: [UInt8]
    public let width: Int
    public let height: Int

    public init(bytes: [UInt8], width: Int, height: Int) {
        self.bytes = bytes
        self.width = width
        self.height = height
    }
}

/// Decoded tile pixels kept for reuse, at most `capacity` bytes, least recently used
/// dropped first. Two kinds of owner use one: sources served on the fly keep their tiles
/// to make the levels below from (`SourcePyramid`), and drawings keep the tiles they
/// decoded for the next drawing of the same area (`DecodedTiles`).
///
/// With a `PixelCacheLender`, every byte kept is borrowed from it first (the render
/// budget: room no drawing is using), and given back when dropped or when the lender
/// asks for it (`reclaim`); a tile the lender has no room for is not kept.
public final class PixelCache: Sendable {
    struct Key: Hashable {
        /// Whose tile: a source's or a served pyramid's serial number.
        let owner: UInt64
        let tile: TileCoordinate
        /// Decoded at 1/denominator of its size (libjpeg's DCT scaling).
        let denominator: Int
    }

    private struct State {
        var entries: [Key: (pixels: TilePixels, used: UInt64)] = [:]
        var clock: UInt64 = 0
        var bytes = 0

        /// Drops entries, least recently used first, until `bytes` is at most `target`;
        /// returns the bytes dropped.
        mutating func dropLeastRecentlyUsed(until target: Int) -> Int {
            guard bytes > target else { return 0 }
            var freed = 0
            for (key, entry) in entries.sorted(by: { $0.value.used < $1.value.used }) where bytes > target {
                entries[key] = nil
                let size = PixelCache.size(entry.pixels)
                bytes -= size
                freed += size
            }
            return freed
        }
    }

    public let capacity: Int
    private let lender: (any PixelCacheLender)?
    private let state = Mutex(State())

    public init(capacity: Int, lender: (any PixelCacheLender)? = nil) {
        self.capacity = max(0, capacity)
        self.lender = lender
    }

    /// Bytes held.
    public var bytesInUse: Int { state.withLock { $0.bytes } }

    /// What a tile holds in the cache: its pixels and the entry's bookkeeping.
    private static func size(_ pixels: TilePixels) -> Int { pixels.bytes.count + 64 }

    func value(for key: Key) -> TilePixels? {
        state.withLock { s in
            guard let entry = s.entries[key] else { return nil }
            s.clock += 1
            s.entries[key] = (entry.pixels, s.clock)
            return entry.pixels
        }
    }

    func insert(_ pixels: TilePixels, for key: Key) {
        let size = Self.size(pixels)
        guard size <= capacity / 4 else { return }
        // Borrowed before the lock is taken (the lender's lock is never taken under ours).
        if let lender, !lender.borrow(size) { return }
        let capacity = self.capacity
        let freed = state.withLock { s -> Int in
            s.clock += 1
            var freed = 0
            if let old = s.entries.updateValue((pixels, s.clock), forKey: key) {
                s.bytes -= Self.size(old.pixels)
                freed += Self.size(old.pixels)
            }
            s.bytes += size
            if s.bytes > capacity {
                // Drop the least recently used quarter at once: eviction stays rare.
                freed += s.dropLeastRecentlyUsed(until: capacity * 3 / 4)
            }
            return freed
        }
        if freed > 0 { lender?.giveBack(freed) }
    }

    /// Drops tiles, least recently used first, until at least `bytes` are freed or none is
    /// left, and gives what they held back to the lender. Returns the bytes freed.
    @discardableResult
    public func reclaim(_ bytes: Int) -> Int {
        guard bytes > 0 else { return 0 }
        let freed = state.withLock { s in s.dropLeastRecentlyUsed(until: max(0, s.bytes - bytes)) }
        if freed > 0 { lender?.giveBack(freed) }
        return freed
    }
}

/// Where a `PixelCache` borrows the memory it keeps tiles in.
public protocol PixelCacheLender: Sendable {
    /// Takes `bytes` if there is room now (never waits); false when there is not.
    func borrow(_ bytes: Int) -> Bool
    /// Returns `bytes` borrowed before.
    func giveBack(_ bytes: Int)
}

/// The tiles one pyramid's drawings keep in a shared `PixelCache`, by level, row, column
/// and DCT scale. `owner` must be unique to the pyramid as loaded (a re-cut pyramid is
/// another owner), so that no drawing is made of another image's pixels.
public struct DecodedTiles: Sendable {
    let cache: PixelCache
    let owner: UInt64

    public init(cache: PixelCache, owner: UInt64) {
        self.cache = cache
        self.owner = owner
    }

    func pixels(of tile: TileCoordinate, denominator: Int) -> TilePixels? {
        cache.value(for: PixelCache.Key(owner: owner, tile: tile, denominator: denominator))
    }

    func keep(_ pixels: TilePixels, of tile: TileCoordinate, denominator: Int) {
        cache.insert(pixels, for: PixelCache.Key(owner: owner, tile: tile, denominator: denominator))
    }
}

/// Runs the work for a key once while it is under way: callers asking for the same key
/// meanwhile wait (each on the flight's semaphore) for that result instead of doing it
/// again.
public final class SingleFlight<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// One piece of work under way. `result` is written once, before the waiters are
    /// woken, and read only after their semaphore wait; `waiters` is guarded by `flights`.
    private final class Flight: @unchecked Sendable {
        let wake = DispatchSemaphore(value: 0)
        var waiters = 0
        var result: Result<Value, any Error>?
    }

    private let flights = Mutex<[Key: Flight]>([:])

    public init() {}

    public func run(_ key: Key, _ work: () throws -> Value) throws -> Value {
        let (flight, leads) = flights.withLock { flights -> (Flight, Bool) in
            if let existing = flights[key] {
                existing.waiters += 1
                return (existing, false)
            }
            let flight = Flight()
            flights[key] = flight
            return (flight, true)
        }
        if !leads {
            flight.wake.wait()
            return try flight.result!.get()
        }
        let result = Result { try work() }
        flight.result = result
        let waiters = flights.withLock { flights -> Int in
            flights[key] = nil
            return flight.waiters
        }
        for _ in 0..<waiters { flight.wake.signal() }
        return try result.get()
    }
}
