import Testing
import TilerHTTP
@testable import TilerServer

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
}
