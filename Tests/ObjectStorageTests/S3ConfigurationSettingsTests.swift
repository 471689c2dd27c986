import ObjectStorage
import Testing
import TilerSettings

/// The `TILER_S3_*` variables as a table without flags (`S3Configuration.Setting`): read
/// trimmed, an empty or blank one unset, a value outside its range refused with the
/// message naming its variable, and the defaults the configuration's own.
@Suite struct S3ConfigurationSettingsTests {
    static let credentials = ["AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"]

    static func configuration(_ variables: [String: String]) throws(S3Error) -> S3Configuration {
        try S3Configuration(environment: credentials.merging(variables) { $1 })
    }

    @Test func everyVariableIsReadTrimmedAndBlankIsUnset() throws {
        let set = try Self.configuration([
            "TILER_S3_CONNECT_TIMEOUT": " 1.5 ", "TILER_S3_TIMEOUT": "2", "TILER_S3_MIN_RATE": "1000", "TILER_S3_RETRIES": "2.9",
            "TILER_S3_LIST_PAGES": "5", "TILER_S3_LIST_SECONDS": "0.5", "TILER_S3_PART_SIZE": "6MiB",
        ])
        #expect(set.connectTimeout == 1.5 && set.requestTimeout == 2 && set.minimumUploadRate == 1000 && set.retries == 2)
        #expect(set.listPages == 5 && set.listSeconds == 0.5 && set.partSize == 6 << 20)
        let blank = try Self.configuration(
            Dictionary(uniqueKeysWithValues: S3Configuration.Setting.allCases.compactMap(\.variable).map { ($0, "  ") }))
        let plain = try Self.configuration([:])
        #expect(blank == plain)
        #expect(Set(S3Configuration.Setting.allCases.compactMap(\.variable)).count == S3Configuration.Setting.allCases.count)
        #expect(!S3Configuration.Setting.takesFlags)
    }

    /// The messages are those the variables were refused with before the table.
    @Test(
        arguments: [
            ("TILER_S3_CONNECT_TIMEOUT", "0", "TILER_S3_CONNECT_TIMEOUT must be a number in 0.001...600.0, not '0'"),
            ("TILER_S3_TIMEOUT", " soon ", "TILER_S3_TIMEOUT must be a number in 0.001...3600.0, not 'soon'"),
            ("TILER_S3_MIN_RATE", "0", "TILER_S3_MIN_RATE must be a number in 1.0...1000000000000.0, not '0'"),
            ("TILER_S3_RETRIES", "many", "TILER_S3_RETRIES must be a number in 0.0...20.0, not 'many'"),
            ("TILER_S3_LIST_PAGES", "0", "TILER_S3_LIST_PAGES must be a number in 1.0...1000000.0, not '0'"),
            ("TILER_S3_LIST_SECONDS", "1e9", "TILER_S3_LIST_SECONDS must be a number in 0.001...86400.0, not '1e9'"),
            ("TILER_S3_PART_SIZE", "1M", "TILER_S3_PART_SIZE must be 5MiB...5GiB (bytes, or with a K, M or G suffix), not '1M'"),
        ])
    func badValuesAreRefusedNamingTheVariable(variable: String, value: String, message: String) throws {
        let error = try #require(throws: S3Error.self) { try Self.configuration([variable: value]) }
        #expect(error.kind == .configuration && error.message == message)
    }

    /// The defaults the table gives (for the README) are the configuration's.
    @Test func theDefaultsAreTheConfigurations() {
        typealias Setting = S3Configuration.Setting
        #expect(Setting.connectTimeout.defaultDescription == SettingText.decimal(S3Configuration.defaultConnectTimeout))
        #expect(Setting.requestTimeout.defaultDescription == SettingText.decimal(S3Configuration.defaultRequestTimeout))
        #expect(Setting.minimumUploadRate.defaultDescription == "\(S3Configuration.defaultMinimumUploadRate >> 10) KiB/s")
        #expect(Setting.retries.defaultDescription == "\(S3Configuration.defaultRetries)")
        #expect(Setting.listPages.defaultDescription == "\(S3Configuration.defaultListPages)")
        #expect(Setting.listSeconds.defaultDescription == SettingText.decimal(S3Configuration.defaultListSeconds))
        #expect(Setting.partSize.defaultDescription == "\(S3Configuration.defaultPartSize >> 20)M")
        #expect(Setting.partSize.rangeDescription == "5M–5G")
        #expect(Setting.listPages.rangeDescription == "1–1000000")
    }
}
