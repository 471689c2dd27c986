import Testing
@testable import TilerHTTP

@Suite struct HTTPDateTests {
    @Test func formatsIMFFixdate() {
        #expect(String(decoding: HTTPDate.format(784111777), as: UTF8.self) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(String(decoding: HTTPDate.format(0), as: UTF8.self) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(String(decoding: HTTPDate.format(951782400), as: UTF8.self) == "Tue, 29 Feb 2000 00:00:00 GMT")
    }

    @Test func parsesAllThreeForms() {
        #expect(HTTPDate.parse(Array("Sun, 06 Nov 1994 08:49:37 GMT".utf8)) == 784111777)
        #expect(HTTPDate.parse(Array("Sunday, 06-Nov-94 08:49:37 GMT".utf8)) == 784111777)
        #expect(HTTPDate.parse(Array("Sun Nov  6 08:49:37 1994".utf8)) == 784111777)
        #expect(HTTPDate.parse(Array("Sun, 06 Nov 1994 08:49:37 UTC".utf8)) == nil)
        #expect(HTTPDate.parse(Array("yesterday".utf8)) == nil)
        #expect(HTTPDate.parse(Array("".utf8)) == nil)
    }

    @Test func roundTripsRandomTimes() {
        for _ in 0..<5000 {
            let t = Int64.random(in: 0...4_102_444_800)
            #expect(HTTPDate.parse(HTTPDate.format(t)) == t)
        }
    }
}
