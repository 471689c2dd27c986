import Foundation
import Testing
import TilerCore

/// The one percent-decoder, which the router's path and query and IIIF identifiers share.
@Suite struct PercentDecodingTests {
    @Test func decodesEscapesInEitherCaseAndKeepsTheRest() {
        #expect(percentDecodedBytes(Array("a%2fb%2Fc+d%00".utf8)) == Array("a/b/c+d".utf8) + [0])
        #expect(percentDecodedBytes(Array("".utf8)) == [])
        #expect(percentDecodedBytes(Array("%e2%82%AC".utf8)) == [0xE2, 0x82, 0xAC])
    }

    @Test func refusesEscapesWithoutTwoHexDigits() {
        for bad in ["%", "%4", "a%", "%G1", "%1G", "%%41", "x%2"] {
            #expect(percentDecodedBytes(Array(bad.utf8)) == nil, "\(bad)")
        }
    }

    /// Against Foundation's decoder over generated strings of escapes and plain bytes:
    /// the same bytes whenever Foundation decodes (it also wants valid UTF-8), and nil
    /// whenever an escape is malformed.
    @Test func agreesWithFoundation() {
        var rng = SystemRandomNumberGenerator()
        let pieces = ["a", "Z", "0", "+", "/", "-", "%41", "%7e", "%C3%A9", "%e2%82%ac", "%2F", "%25", "%", "%4", "%zz", "é"]
        for _ in 0..<2000 {
            let text = (0..<Int.random(in: 0...8, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
            let ours = percentDecodedBytes(Array(text.utf8))
            if let theirs = text.removingPercentEncoding {
                #expect(ours == Array(theirs.utf8), "\(text)")
            }
            let malformed = text.range(of: "%(?![0-9A-Fa-f]{2})", options: .regularExpression) != nil
            #expect((ours == nil) == malformed, "\(text)")
        }
    }
}
