import Foundation

/// The one default ROOT of `cut`, `serve` and `ls`: `TILER_ROOT`, else `tiles` (in the
/// current folder), so that `tiler cut IMAGE` then `tiler serve` serves what was cut.
public enum DefaultRoot {
    /// The folder `tiler cut` writes and `tiler serve` serves when no ROOT is given.
    public static let folder = "tiles"

    /// `TILER_ROOT` if set and not empty, else `tiles`.
    public static func resolved(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let root = environment["TILER_ROOT"], !root.isEmpty { return root }
        return folder
    }
}
