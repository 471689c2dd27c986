import TilerServer
import TilerSettings

extension Tiler.Remove {
    /// What `tiler rm` reads besides its arguments.
    struct Settings {
        /// Seconds between retiring a folder and deleting it.
        var grace = 5.0
    }

    /// `tiler rm`'s settings, declared once (`tiler cut --force` reads the same grace
    /// before deleting a folder it replaced by an archive).
    enum Setting: String, SettingTable {
        case grace

        var variable: String? { "TILER_RM_GRACE" }

        static var defaults: Settings { Settings() }

        var declaration: SettingDeclaration<Settings> {
            switch self {
            case .grace:
                SettingDeclaration(
                    summary:
                        "Seconds between retiring a folder and deleting its files: longer than the --rescan-interval of every server reading ROOT; 0 when none runs",
                    value: .seconds(\.grace, 0...3600), valueName: "SECONDS")
            }
        }
    }
}
