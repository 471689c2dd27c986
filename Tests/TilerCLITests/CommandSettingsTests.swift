import ArgumentParser
import Foundation
import Testing
import TilerCore
import TilerHTTP
import TilerImaging
import TilerServer
import TilerSettings
import TilerTestSupport

@testable import tiler

/// The settings tables of `cut`, `rm` and `healthcheck` (`SettingTable`, as `serve`'s):
/// each value read from its flag, else its variable, else the default declared once; a
/// value that cannot be used refused naming its flag or variable; the help made from the
/// table; and the README's rows held to it.
@Suite struct CommandSettingsTests {
    typealias Cut = Tiler.Cut.Setting
    typealias Remove = Tiler.Remove.Setting
    typealias Healthcheck = Tiler.Healthcheck.Setting

    /// With nothing set, the cut's settings are the library's defaults with `auto` tiles,
    /// rm waits 5 s, and the probe asks 127.0.0.1 on serve's default port for 3 s.
    @Test func nothingSetIsTheDefaults() throws {
        let cut = try Cut.values(flags: [:], environment: ["TILER_MAX_PIXELS": ""])
        let library = CutOptions()
        #expect(cut.tileSize == library.tileSize && cut.thumbnailSize == library.thumbnailSize)
        #expect(cut.maxPixels == CutOptions.defaultMaxPixels && cut.format == nil && cut.quality == nil)
        #expect(try Remove.values(flags: [:], environment: ["TILER_RM_GRACE": ""]).grace == 5)
        let probe = try Healthcheck.values(flags: [:], environment: [:])
        #expect(probe.host == "127.0.0.1" && probe.port == HTTPConfiguration().port && probe.timeout == 3)
    }

    /// Every variable is read, and a flag wins over it.
    @Test func variablesAreReadAndFlagsWin() throws {
        #expect(try Cut.values(flags: [:], environment: ["TILER_MAX_PIXELS": "1000"]).maxPixels == 1000)
        #expect(try Cut.values(flags: [.maxPixels: "7"], environment: ["TILER_MAX_PIXELS": "lots"]).maxPixels == 7)
        #expect(try Remove.values(flags: [:], environment: ["TILER_RM_GRACE": "0.2"]).grace == 0.2)
        #expect(try Remove.values(flags: [.grace: "0"], environment: ["TILER_RM_GRACE": "soon"]).grace == 0)
        #expect(try Healthcheck.values(flags: [:], environment: ["TILER_PORT": "1234"]).port == 1234)
        #expect(try Healthcheck.values(flags: [.port: "99"], environment: ["TILER_PORT": "x"]).port == 99)
        #expect(Set(Cut.allCases.compactMap(\.variable)) == ["TILER_MAX_PIXELS"])
        #expect(Set(Remove.allCases.compactMap(\.variable)) == ["TILER_RM_GRACE"])
        #expect(Set(Healthcheck.allCases.compactMap(\.variable)) == ["TILER_PORT"])
        let cut = try Cut.values(
            flags: [.tileSize: "512", .format: "webp", .quality: "70", .thumbnailSize: "64"], environment: [:])
        #expect(cut.tileSize == 512 && cut.format == .webp && cut.quality == 70 && cut.thumbnailSize == 64)
    }

    /// Values that cannot be used are usage errors naming the flag or variable.
    @Test(
        arguments: [
            ([:], ["TILER_MAX_PIXELS": "lots"], "TILER_MAX_PIXELS='lots' is not an integer."),
            ([:], ["TILER_MAX_PIXELS": "0"], "TILER_MAX_PIXELS must be at least 1, not 0."),
            ([.maxPixels: "0"], [:], "--max-pixels must be at least 1, not 0."),
            ([.tileSize: "8"], [:], "--tile-size must be 16...8192, not 8."),
            ([.thumbnailSize: "2049"], [:], "--thumbnail-size must be 16...2048, not 2049."),
            ([.quality: "0"], [:], "--quality must be 1...100, not 0."),
            ([.format: "gif"], [:], "--format='gif' is not auto, png, jpeg or webp."),
        ] as [([Cut: String], [String: String], String)])
    func badCutValuesAreRefused(flags: [Cut: String], environment: [String: String], message: String) {
        #expect(Self.refusal { try Cut.values(flags: flags, environment: environment) } == message)
    }

    @Test(
        arguments: [
            ([:], ["TILER_RM_GRACE": "soon"], "TILER_RM_GRACE='soon' is not a number."),
            ([:], ["TILER_RM_GRACE": "3601"], "TILER_RM_GRACE must be a number of seconds from 0 to 3600, not 3601."),
            ([.grace: "-1"], [:], "--grace must be a number of seconds from 0 to 3600, not -1."),
            ([.grace: "nan"], [:], "--grace must be a number of seconds from 0 to 3600, not nan."),
        ] as [([Remove: String], [String: String], String)])
    func badGraceIsRefused(flags: [Remove: String], environment: [String: String], message: String) {
        #expect(Self.refusal { try Remove.values(flags: flags, environment: environment) } == message)
    }

    /// The port is the one range a server listens on, less the 0 that asks `serve` for any
    /// free port: `serve --port 0` is accepted, `healthcheck --port 0` refused, and a
    /// `TILER_PORT` the check cannot use fails the check, naming the variable.
    @Test func thePortRangeIsServesLessZero() throws {
        #expect(HTTPConfiguration.Range.connectablePort == 1...HTTPConfiguration.Range.port.upperBound)
        #expect(HTTPConfiguration.Range.port.lowerBound == 0)
        #expect(try ServerConfiguration(flags: [.port: "0"], environment: [:]).http.port == 0)
        #expect(Self.refusal { try Healthcheck.values(flags: [.port: "0"], environment: [:]) } == "--port must be 1...65535, not 0.")
        #expect(
            Self.refusal { try Healthcheck.values(flags: [.timeout: "0"], environment: [:]) }
                == "--timeout must be a number of seconds above 0 and at most 3600, not 0.")
        let command = try Tiler.Healthcheck.parse([])
        for value in ["0", "65536", "x"] {
            #expect(throws: HealthcheckError.self) { try command.probe(environment: ["TILER_PORT": value]) }
            do {
                _ = try command.probe(environment: ["TILER_PORT": value])
            } catch {
                #expect(error.description == "TILER_PORT is '\(value)', not a port number between 1 and 65535")
            }
        }
    }

    /// `--quality` with PNG tiles is refused: they are lossless.
    @Test func qualityWithPNGIsRefused() throws {
        var cut = try Tiler.Cut.parse(["a.png"])
        cut.format = "png"
        cut.quality = "80"
        #expect(
            Self.refusal { try cut.settings(environment: [:]) }
                == "--quality applies to --format auto, jpeg or webp; PNG tiles are lossless.")
    }

    /// Each setting's help says what it is, names its variable and gives the default
    /// the values have (made from it, not written twice).
    @Test func helpNamesTheVariableAndTheDefault() {
        func check<T: SettingTable>(_ table: T.Type) {
            for setting in T.allCases {
                if let variable = setting.variable { #expect(setting.help.contains("env \(variable)")) }
                #expect(setting.help.contains("default: \(setting.defaultDescription)"))
            }
        }
        check(Cut.self)
        check(Remove.self)
        check(Healthcheck.self)
        #expect(Cut.tileSize.defaultDescription == "\(CutOptions().tileSize)")
        #expect(Cut.format.defaultDescription == "auto")
        #expect(Healthcheck.port.defaultDescription == "\(HTTPConfiguration().port)")
    }

    /// `--s3-endpoint` says the same in every command that takes it: one declaration.
    @Test func everyCommandDescribesTheEndpointAlike() {
        #expect(ServerConfiguration.Setting.s3Endpoint.flag == S3Settings.endpointFlag)
        let commands: [any ParsableCommand.Type] = [
            Tiler.Serve.self, Tiler.Cut.self, Tiler.Pack.self, Tiler.Info.self, Tiler.Verify.self, Tiler.List.self,
        ]
        for command in commands {
            let help = Tiler.helpMessage(for: command, columns: 10_000)
            #expect(help.contains(S3Settings.endpointSummary), "\(command)")
            #expect(help.contains(S3Settings.endpointDefault), "\(command)")
        }
    }

    /// The README has a row for every setting of each table, naming its variable and
    /// saying its default and range; and every row there naming a `TILER_*` variable is a
    /// setting of the table that reads it.
    @Test(arguments: ["## Cutting", "## Managing pyramids", "### Health check"])
    func theReadmeHasARowForEachSetting(_ heading: String) throws {
        let section = try ReadmeSection(heading)
        switch heading {
        case "## Cutting": Self.expectRows(Cut.self, in: section)
        case "## Managing pyramids": Self.expectRows(Remove.self, in: section)
        default: Self.expectRows(Healthcheck.self, in: section)
        }
        if heading == "## Cutting" {
            #expect(section.lines.contains { $0.hasPrefix("| ") && $0.contains("`\(S3Settings.stagingVariable)`") })
        }
        // The variables the S3 tools read, where the endpoint's row is.
        if heading != "### Health check" {
            let problems = section.problems(
                flag: S3Settings.endpointFlag, variable: "AWS_ENDPOINT_URL_S3", defaultMentions: ["AWS itself"])
            #expect(problems.isEmpty, "\(problems)")
        }
    }

    /// The message of the usage error `body` throws, or nil when it throws none.
    static func refusal(_ body: () throws -> Any) -> String? {
        do {
            _ = try body()
            return nil
        } catch {
            return (error as? ValidationError)?.message ?? "\(error)"
        }
    }

    /// A row in `section` for every setting of the table (by its flag, or by its variable
    /// for a table without flags), naming its variable and saying its default and its
    /// range; and, for a table with flags, every row of a flag naming a `TILER_*` variable
    /// is a setting of the table that reads it.
    static func expectRows<T: SettingTable>(_ table: T.Type, in section: ReadmeSection) {
        for setting in T.allCases {
            let mentions = [setting.defaultDescription] + [setting.rangeDescription].compactMap { $0 }
            let problems =
                T.takesFlags
                ? section.problems(flag: setting.flag, variable: setting.variable, defaultMentions: mentions)
                : section.problems(variable: setting.variable ?? "", defaultMentions: mentions)
            #expect(problems.isEmpty, "\(problems)")
        }
        guard T.takesFlags else { return }
        for (flag, variables) in section.variablesByFlag {
            let setting = T.allCases.first { $0.flag == flag }
            #expect(setting?.variable.map { variables == [$0] } == true, "\(section.heading): \(flag) names \(variables)")
        }
    }
}
