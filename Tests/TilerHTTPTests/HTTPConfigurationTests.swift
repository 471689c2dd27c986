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
    ]

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
