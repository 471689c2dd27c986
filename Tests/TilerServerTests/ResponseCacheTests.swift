import Testing
import TilerHTTP
@testable import TilerServer

extension Int: ClockCacheKey {
    public var cacheKeyBits: UInt64 { UInt64(bitPattern: Int64(self)) }
}

extension String: ClockCacheKey {
    public var cacheKeyBits: UInt64 { UInt64(bitPattern: Int64(hashValue)) }
}

/// A key whose index bits collide on purpose (a third of all keys share each), or, with
/// `collides` false, are its id.
private struct CollidingKey: ClockCacheKey {
    var id: Int
    var collides = true
    var cacheKeyBits: UInt64 { collides ? UInt64(id % 3) : UInt64(id) }
}

@Suite struct ResponseCacheTests {
    func response(_ size: Int) -> PreparedResponse {
        PreparedResponse(body: [UInt8](repeating: 1, count: size), contentType: "x", etag: nil, lastModified: nil, cacheControl: nil)
    }

    @Test func staysWithinItsByteBudget() {
        let cache = ResponseCache<Int>(capacity: 100 * (1000 + 256))
        for i in 0..<1000 {
            cache.insert(response(1000), for: i)
            #expect(cache.totalBytes <= cache.capacity)
        }
        #expect(cache.count == 100)
        #expect(cache.value(for: 999) != nil)
        #expect(cache.value(for: 0) == nil)
    }

    @Test func recentlyUsedEntriesSurviveEviction() {
        let cache = ResponseCache<Int>(capacity: 10 * (100 + 256))
        for i in 0..<10 { cache.insert(response(100), for: i) }
        for _ in 0..<3 { #expect(cache.value(for: 3) != nil) }
        for i in 10..<19 {
            cache.insert(response(100), for: i)
            #expect(cache.value(for: 3) != nil, "hot entry evicted after inserting \(i)")
        }
    }

    @Test func replacingAKeyKeepsOneEntryAndOversizedValuesAreNotStored() {
        let cache = ResponseCache<String>(capacity: 5000)
        cache.insert(response(100), for: "a")
        cache.insert(response(200), for: "a")
        #expect(cache.count == 1)
        #expect(cache.value(for: "a")?.body.count == 200)
        cache.insert(response(10_000), for: "huge")
        #expect(cache.value(for: "huge") == nil)
        #expect(cache.totalBytes == 200 + 256)
    }

    /// Inserts, replacements, removals and lookups against a dictionary, with keys that
    /// collide in the index (long probes, removals from the middle of them; 30 caches,
    /// each with a seed of its own, so that some probe runs wrap past the table's end) and
    /// keys that do not, and a capacity that never evicts: the cache must hold exactly
    /// what the model holds.
    @Test func theIndexFindsWhatWasStoredAndNothingElse() {
        var rng = SystemRandomNumberGenerator()
        for (collides, caches, steps, ids) in [(true, 30, 2_000, 60), (false, 1, 20_000, 3000)] {
            for _ in 0..<caches {
                let cache = ClockCache<CollidingKey, Int>(capacity: .max)
                var model: [Int: Int] = [:]
                for step in 0..<steps {
                    let key = CollidingKey(id: Int.random(in: 0..<ids, using: &rng), collides: collides)
                    switch Int.random(in: 0..<3, using: &rng) {
                    case 0:
                        cache.insert(step, cost: 1, for: key)
                        model[key.id] = step
                    case 1:
                        cache.remove(key) { _ in true }
                        model[key.id] = nil
                    default:
                        #expect(cache.value(for: key) == model[key.id], "step \(step)")
                    }
                    #expect(cache.count == model.count)
                }
                for id in 0..<(2 * ids) {
                    #expect(cache.value(for: CollidingKey(id: id, collides: collides)) == model[id], "\(id)")
                }
            }
        }
    }

    /// With eviction: every lookup gives nil or the value last stored for that key, and
    /// the count and cost stay within the capacity.
    @Test func evictionLeavesTheIndexTrue() {
        var rng = SystemRandomNumberGenerator()
        let cache = ClockCache<CollidingKey, Int>(capacity: 50)
        var last: [Int: Int] = [:]
        for step in 0..<20_000 {
            let key = CollidingKey(id: Int.random(in: 0..<200, using: &rng))
            if Bool.random(using: &rng) {
                cache.insert(step, cost: Int.random(in: 1...5, using: &rng), for: key)
                last[key.id] = step
            } else if let found = cache.value(for: key) {
                #expect(found == last[key.id])
            }
            #expect(cache.totalCost <= 50)
        }
        let held = (0..<200).filter { cache.value(for: CollidingKey(id: $0)) != nil }.count
        #expect(held == cache.count && held > 0)
    }
}
