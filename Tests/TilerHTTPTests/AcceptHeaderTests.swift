import Testing
import TilerHTTP

@Suite struct AcceptHeaderTests {
    func quality(_ accept: String?, _ type: String, _ subtype: String) -> Double {
        AcceptHeader(Array((accept ?? "").utf8)).quality(type: type, subtype: subtype)
    }

    /// The most specific matching range decides, whatever its weight (RFC 9110 §12.5.1's
    /// example: `text/*;q=0.3, text/plain;q=0.7, text/plain;format=flowed, */*;q=0.5`).
    @Test func theMostSpecificRangeDecides() {
        let accept = "text/*;q=0.3, text/plain;q=0.7, */*;q=0.5"
        #expect(quality(accept, "text", "plain") == 0.7)
        #expect(quality(accept, "text", "html") == 0.3)
        #expect(quality(accept, "image", "jpeg") == 0.5)
        #expect(quality("application/json;q=0, */*", "application", "json") == 0)
        #expect(quality("*/*;q=0.1, application/*", "application", "json") == 1)
    }

    @Test func absentMeansAnything() {
        #expect(quality(nil, "application", "json") == 1)
        #expect(quality("  ", "application", "ld+json") == 1)
    }

    @Test func unmatchedAndMalformedWeighNothing() {
        #expect(quality("text/html", "application", "json") == 0)
        #expect(quality("application", "application", "json") == 0)
        #expect(quality("*/json", "application", "json") == 0)
        #expect(quality("/json, application/", "application", "json") == 0)
        // A weight that is no qvalue drops its range, as if it were not sent.
        for q in ["2", "x", "0.1234", "1.5", "0x1", "1e0", ".5", "-0", "0.5 5", ""] {
            #expect(quality("application/json;q=\(q)", "application", "json") == 0, "q=\(q)")
            #expect(quality("application/json;q=\(q), */*;q=0.3", "application", "json") == 0.3, "q=\(q)")
        }
        #expect(quality("application/json;q=1.000", "application", "json") == 1)
        #expect(quality("application/json;q=0.125", "application", "json") == 0.125)
    }

    /// Commas and semicolons inside a quoted parameter value are part of it.
    @Test func quotedValuesDoNotSplit() {
        let accept = #"application/ld+json;profile="a;q=0,b", application/json;q=0.5"#
        #expect(quality(accept, "application", "ld+json") == 1)
        #expect(quality(accept, "application", "json") == 0.5)
        #expect(quality(#"text/plain;x="\",q=0";q=0.2"#, "text", "plain") == 0.2)
    }

    @Test func namesAreCaseInsensitiveAndBlanksIgnored() {
        #expect(quality("  Application/JSON ; Q=0.5 ", "application", "json") == 0.5)
        #expect(quality("application/ld+json;profile=\"http://iiif.io/api/image/3/context.json\"", "application", "ld+json") == 1)
    }

    /// At most `maximumRanges` ranges are read: a huge header costs a bounded parse.
    @Test func longListsAreCutShort() {
        let many = Array(repeating: "text/plain", count: 40).joined(separator: ",") + ", application/json"
        #expect(quality(many, "application", "json") == 0)
        #expect(quality(many, "text", "plain") == 1)
    }
}
