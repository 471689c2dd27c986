import Testing

@testable import TilerHTTP

/// The access log's path: credentials in the query never reach it.
@Suite struct LoggedPathTests {
    @Test(arguments: [
        ("/images/a/tiles/0/0/0.png", "/images/a/tiles/0/0/0.png"),
        ("/a?token=secret", "/a?token=REDACTED"),
        ("/a?x=1&token=secret&y=2", "/a?x=1&token=REDACTED&y=2"),
        ("/a?TOKEN=secret", "/a?TOKEN=REDACTED"),
        ("/a?%74oken=secret", "/a?%74oken=REDACTED"),
        ("/a?access_token=s&key=k&signature=g", "/a?access_token=REDACTED&key=REDACTED&signature=REDACTED"),
        ("/a?tokens=kept&mytoken=kept", "/a?tokens=kept&mytoken=kept"),
        ("/a?token", "/a?token"),
        ("/a?token=", "/a?token=REDACTED"),
        ("/a?&&token=s&", "/a?&&token=REDACTED&"),
    ])
    func credentialsAreRedacted(_ target: String, _ logged: String) {
        #expect(LoggedPath.text(of: Array(target.utf8)) == logged)
    }

    @Test func longTargetsAreCut() {
        let long = "/" + String(repeating: "a", count: 2000) + "?token=" + String(repeating: "s", count: 100)
        let logged = LoggedPath.text(of: Array(long.utf8))
        #expect(logged.utf8.count == LoggedPath.maximumBytes)
        #expect(!logged.contains("sss"))
    }

    @Test(arguments: [
        ("abc-123", true), ("0b1c-Trace_ID.42:x+y/z=@", true), (String(repeating: "a", count: 128), true),
        ("", false), (String(repeating: "a", count: 129), false), ("has space", false), ("quote\"", false),
        ("semi;colon", false), ("comma,", false), ("tab\t", false), ("é", false),
    ])
    func sentIDsKeptOnlyWhenSane(_ id: String, _ sane: Bool) {
        #expect(RequestID.isSane(Array(id.utf8)) == sane)
    }

    @Test func connectionTagsAreSixteenHexDigitsAndADash() {
        var seen: Set<ArraySlice<UInt8>> = []
        for n in 1...1000 as ClosedRange<UInt64> {
            let line = RequestID.tag(of: RequestID.connection(seed: 42, number: n))
            #expect(line.starts(with: Array("X-Request-Id: ".utf8)))
            let tag = line[RequestID.headerStart...]
            #expect(tag.count == 17 && tag.last == UInt8(ascii: "-"))
            #expect(tag.dropLast().allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
            seen.insert(tag)
        }
        #expect(seen.count == 1000)
    }
}
