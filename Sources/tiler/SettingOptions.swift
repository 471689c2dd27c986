import ArgumentParser
import TilerServer
import TilerSettings

/// The command line's side of a settings table (`SettingTable`): a command declares
/// each setting's flag with `@Option(name: .setting(X), help: .setting(X))` as text, and
/// hands the flags given to the table, which reads them with the environment and checks
/// them.
extension NameSpecification {
    /// The setting's long name, `--NAME`.
    static func setting(_ setting: some SettingTable) -> NameSpecification { setting.argumentName }

    /// `--s3-endpoint`, as every command that reaches a bucket names it.
    static var s3Endpoint: NameSpecification { .customLong(S3Settings.endpointName) }
}

extension ArgumentHelp {
    /// The setting's help (what it does, its variable, its default) and value name.
    static func setting(_ setting: some SettingTable) -> ArgumentHelp { setting.argumentHelp }

    /// `--s3-endpoint`'s help, the same for every command.
    static var s3Endpoint: ArgumentHelp { ArgumentHelp(S3Settings.endpointHelp, valueName: S3Settings.endpointValueName) }
}

extension SettingTable {
    /// The setting's long name, `--NAME`.
    var argumentName: NameSpecification { .customLong(rawValue) }

    /// The setting's help (what it does, its variable, its default) and value name.
    var argumentHelp: ArgumentHelp { ArgumentHelp(help, valueName: isSwitch ? nil : valueName) }

    /// The values of this table from `flags` (as typed) and `environment`, else the
    /// defaults; a value that cannot be used is a usage error naming its flag or variable.
    static func values(flags: [Self: String], environment: [String: String]) throws -> Values {
        var values = defaults
        do {
            try read(flags: flags, environment: environment, into: &values)
        } catch {
            throw ValidationError("\(error.description).")
        }
        return values
    }
}
