import Testing
@testable import TilerHTTP

@Suite struct HTTPConfigurationTests {
    @Test func defaultsAreValid() throws {
        try HTTPConfiguration().validate()
    }

    /// One setting changed from the defaults.
    static func with(_ change: (inout HTTPConfiguration) -> Void) -> HTTPConfiguration {
        var c = HTTPConfiguration()
        change(&c)
        return c
    }

    static let outOfRange: [(String, HTTPConfiguration)] = [
        ("idleTimeout", with { $0.idleTimeout = 1e16 }),
        ("requestHeadTimeout", with { $0.requestHeadTimeout = .infinity }),
        ("writeTimeout", with { $0.writeTimeout = .nan }),
        ("idleTimeout", with { $0.idleTimeout = 0 }),
        ("shutdownGracePeriod", with { $0.shutdownGracePeriod = -1 }),
        ("port", with { $0.port = 70000 }),
        ("threads", with { $0.threads = 0 }),
        ("renderThreads", with { $0.renderThreads = 100_000 }),
        ("maximumQueuedReads", with { $0.maximumQueuedReads = 0 }),
        ("maximumQueuedRenders", with { $0.maximumQueuedRenders = Int.max }),
        ("maximumRequestLineBytes", with { $0.maximumRequestLineBytes = 1 << 62 }),
        ("maximumHeaderBytes", with { $0.maximumHeaderBytes = 10 }),
        ("maximumConnections", with { $0.maximumConnections = 0 }),
        ("host", with { $0.host = "example.org" }),
        ("host", with { $0.host = "" }),
        ("corsAllowOrigin", with { $0.corsAllowOrigin = "*\r\nSet-Cookie: a=b" }),
    ]

    /// The hosts a server can listen on; the header values it can send.
    @Test func hostsAndHeaderValues() {
        for host in ["127.0.0.1", "0.0.0.0", "::", "::1", "localhost"] { #expect(HTTPConfiguration.isListenableHost(host), "\(host)") }
        for host in ["example.org", "", "256.0.0.1", "127.0.0.1:80"] { #expect(!HTTPConfiguration.isListenableHost(host), "\(host)") }
        #expect(HTTPConfiguration.isHeaderValue("public, max-age=86400\twith a tab"))
        for bad in ["a\rb", "a\nb", "a\u{0}b", "a\u{7F}b"] { #expect(!HTTPConfiguration.isHeaderValue(bad), "\(bad.debugDescription)") }
    }

    /// Every numeric setting has a range; values past it (or NaN, or infinite) are refused
    /// by name instead of trapping later in arithmetic.
    @Test(arguments: outOfRange)
    func outOfRangeSettingsAreRefusedByName(setting: String, configuration: HTTPConfiguration) {
        #expect(throws: HTTPConfiguration.InvalidSetting.self) { try configuration.validate() }
        do {
            try configuration.validate()
        } catch {
            #expect(error.setting == setting)
        }
    }

    @Test func millisecondsSaturate() {
        #expect(HTTPConfiguration.milliseconds(1.5) == 1500)
        #expect(HTTPConfiguration.milliseconds(1e16) == HTTPConfiguration.maximumMilliseconds)
        #expect(HTTPConfiguration.milliseconds(.infinity) == HTTPConfiguration.maximumMilliseconds)
        #expect(HTTPConfiguration.milliseconds(.nan) == 0)
        #expect(HTTPConfiguration.milliseconds(-3) == 0)
    }
}
