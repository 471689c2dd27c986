import ObjectStorage
import Testing
import TilerImaging
import TilerServer
import TilerSettings
import TilerStorage
import TilerTestSupport

/// What the libraries read from the environment alone, declared as tables without flags
/// (`SettingTable.takesFlags`): the README's rows held to them as to the commands' tables
/// (`CommandSettingsTests.expectRows`), and every row there naming such a variable
/// declared.
@Suite struct VariableSettingsTests {
    /// The cutter's PNG encoder (`TILER_PNG_*`) and the profile of untagged CMYK input.
    @Test func thePNGAndCMYKRowsAreTheTables() throws {
        let section = try ReadmeSection("## Cutting")
        CommandSettingsTests.expectRows(PNGSettings.Setting.self, in: section)
        CommandSettingsTests.expectRows(CMYKProfile.Setting.self, in: section)
        #expect(section.rowVariables(prefix: "TILER_PNG_") == Set(PNGSettings.Setting.allCases.compactMap(\.variable)))
        #expect(section.rowVariables(prefix: "TILER_CMYK_") == Set(CMYKProfile.Setting.allCases.compactMap(\.variable)))
    }

    /// The request bounds of every command that reaches a bucket, `TILER_S3_*`, and the
    /// staging folder of `cut` and `pack` (`S3Settings`).
    @Test func theS3RowsAreTheTables() throws {
        let section = try ReadmeSection("### Cutting into a bucket")
        CommandSettingsTests.expectRows(S3Configuration.Setting.self, in: section)
        let declared = Set(S3Configuration.Setting.allCases.compactMap(\.variable)).union([S3Settings.stagingVariable])
        #expect(section.rowVariables(prefix: "TILER_S3_") == declared)
    }

    /// The one default ROOT of `cut`, `serve` and `ls` (`DefaultRoot`): `TILER_ROOT` when set
    /// and not empty, else `tiles`; the README's ROOT rows say so.
    @Test(arguments: ["## Managing pyramids", "## Serving"])
    func theRootRowsAreTheDefaultRoot(_ heading: String) throws {
        #expect(DefaultRoot.named(environment: [DefaultRoot.variable: ""]) == nil)
        #expect(DefaultRoot.resolved(environment: [DefaultRoot.variable: ""]) == DefaultRoot.folder)
        #expect(DefaultRoot.resolved(environment: [DefaultRoot.variable: "/data"]) == "/data")
        let problems = try ReadmeSection(heading).problems(
            flag: "ROOT", variable: DefaultRoot.variable, defaultMentions: ["`\(DefaultRoot.folder)`"])
        #expect(problems.isEmpty, "\(problems)")
    }
}
