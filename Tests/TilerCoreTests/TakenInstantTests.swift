import Foundation
import Testing
import TilerCore
import TilerTestSupport

/// `TakenInstant` against Foundation's ISO 8601 parser on generated dates and offsets.
@Suite struct TakenInstantTests {
    @Test func generatedDatesAreTheInstantsFoundationReads() throws {
        var random = SplitMix(seed: 7)
        let parser = ISO8601DateFormatter()
        for _ in 0..<2000 {
            let year = 1900 + Int(random.next() % 200), month = 1 + Int(random.next() % 12), day = 1 + Int(random.next() % 28)
            let (h, m, s) = (Int(random.next() % 24), Int(random.next() % 60), Int(random.next() % 60))
            let offset = (Int(random.next() % 57) - 28) * 30
            let sign = offset < 0 ? "-" : "+"
            let zone = offset == 0 && random.next() % 2 == 0 ? "Z" : String(format: "%@%02d:%02d", sign, abs(offset) / 60, abs(offset) % 60)
            let text = String(format: "%04d-%02d-%02dT%02d:%02d:%02d", year, month, day, h, m, s) + zone
            let instant = try #require(TakenInstant(text), "\(text)")
            let expected = try #require(parser.date(from: text), "\(text)")
            #expect(Double(instant.seconds) == expected.timeIntervalSince1970, "\(text)")
            // navDate: the same instant, in UTC.
            #expect(parser.date(from: instant.utcDateTime) == expected, "\(text) → \(instant.utcDateTime)")
            #expect(instant.utcDateTime.hasSuffix("Z") && instant.utcDateTime.count == 20)
        }
    }

    @Test func formsAndRefusals() {
        #expect(TakenInstant("2024-05-01T23:30:00-02:00")!.seconds > TakenInstant("2024-05-02T00:10:00+00:00")!.seconds)
        #expect(TakenInstant("2024-05-01T14:03:22")?.utcDateTime == "2024-05-01T14:03:22Z")
        #expect(TakenInstant("2024-05-01T14:03:22.250+0200")?.utcDateTime == "2024-05-01T12:03:22Z")
        #expect(TakenInstant("2024-05-01")?.utcDateTime == "2024-05-01T00:00:00Z")
        #expect(TakenInstant("2024-02-29T00:00:00Z") != nil)
        for bad in [
            "", "2024", "2023-02-29T00:00:00Z", "2024-13-01", "2024-05-01T24:00:00", "2024-05-01T12:00:00+",
            "2024-05-01T12:00:00 +02:00", "2024:05:01 14:03:22", "yesterday", "2024-05-01T12:00:00Zjunk",
        ] {
            #expect(TakenInstant(bad) == nil, "\(bad)")
        }
    }
}
