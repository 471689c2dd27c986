import Foundation
import Testing
@testable import TilerHTTP

@Suite struct JSONWriterTests {
    @Test func integersAndPiecewiseStringsMatchFoundation() throws {
        let numbers = [0, 1, -1, 9, 10, 255, -4096, 1 << 40, Int.max, Int.min]
        var w = JSONWriter()
        w.beginArray()
        for n in numbers { w.value(n) }
        w.stringValue { s in
            s.appendEscaped("/images/a\"b\\c\n/")
            s.appendDecimal(-12)
            s.appendEscaped(".png")
        }
        w.value("plain ascii")
        w.value("ünïcödé \u{1}")
        w.endArray()
        let text = String(decoding: w.bytes, as: UTF8.self)
        let parsed = try JSONSerialization.jsonObject(with: Data(w.bytes)) as? [Any]
        #expect(parsed?.count == numbers.count + 3, "\(text)")
        for (i, n) in numbers.enumerated() { #expect((parsed?[i] as? NSNumber)?.int64Value == Int64(n), "\(text)") }
        #expect(parsed?[numbers.count] as? String == "/images/a\"b\\c\n/-12.png")
        #expect(parsed?[numbers.count + 1] as? String == "plain ascii")
        #expect(parsed?[numbers.count + 2] as? String == "ünïcödé \u{1}")
    }
}
