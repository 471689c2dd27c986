import Foundation

/// The one default ROOT of `cut`, `serve` and `ls`: `TILER_ROOT`, else `tiles` (in the
/// current folder), so that `tiler cut IMAGE` then `tiler serve` serves what was cut.
public enum DefaultRoot {
    /// The folder `tiler cut` writes and `tiler serve` serves when no ROOT is given.
    public static let folder = "tiles"
    /// The variable that names another default ROOT.
    public static let variable = "TILER_ROOT"

    /// The ROOT `TILER_ROOT` names in `environment`, or nil when it is unset or empty.
    public static func named(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        environment[variable].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// `TILER_ROOT` if set and not empty, else `tiles`.
    public static func resolved(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        named(environment: environment) ?? folder
    }
}
