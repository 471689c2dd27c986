import Foundation
import TilerSettings

/// The ICC profile that CMYK input without an embedded profile is read through on its way
/// to sRGB.
///
/// libvips' built-in CMYK profile makes such images come out washed out next to what
/// browsers show; Ghostscript's `default_cmyk.icc` (Debian's `libgs-common`, which
/// `scripts/install-deps` and the container install) is a typical coated-press profile
/// and is used when it is there. `TILER_CMYK_PROFILE` (``Setting``) names another
/// profile file, or `builtin` for libvips' own; without it and without Ghostscript's file,
/// libvips' own is used.
public enum CMYKProfile: Sendable, Equatable {
    /// libvips' built-in CMYK profile.
    case builtin
    /// An ICC profile file.
    case file(String)
    /// `TILER_CMYK_PROFILE` names a file that cannot be read.
    case unreadable(String)

    /// Where Debian's packages put a usable CMYK profile, in the order tried.
    public static let knownLocations = ["/usr/share/color/icc/ghostscript/default_cmyk.icc"]

    /// The profile this process uses, chosen once.
    public static let current = CMYKProfile(environment: ProcessInfo.processInfo.environment)

    /// The profile `TILER_CMYK_PROFILE` names, else the first of `knownLocations` that
    /// can be read, else `builtin`.
    public init(environment: [String: String], locations: [String] = CMYKProfile.knownLocations) {
        if let (text, _) = Setting.profile.given(flags: [:], environment: environment) {
            self = .named(text)
        } else {
            self = locations.first(where: Self.isReadable).map { .file($0) } ?? .builtin
        }
    }

    /// The profile `text` names: `builtin`, else a file, `unreadable` (an error at the
    /// first cut, never at start) when this process cannot read it.
    static func named(_ text: String) -> CMYKProfile {
        text == "builtin" ? .builtin : isReadable(text) ? .file(text) : .unreadable(text)
    }

    /// Whether `path` is a file this process can read.
    static func isReadable(_ path: String) -> Bool {
        var isFolder: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) && !isFolder.boolValue
            && FileManager.default.isReadableFile(atPath: path)
    }

    /// `TILER_CMYK_PROFILE`, declared once: a table without flags, read by
    /// ``init(environment:locations:)``.
    public enum Setting: String, SettingTable {
        case profile

        public var variable: String? { "TILER_CMYK_PROFILE" }

        public static var takesFlags: Bool { false }

        /// The profile without the variable: the first of ``knownLocations`` that can be
        /// read, else libvips' own.
        public static var defaults: CMYKProfile { CMYKProfile(environment: [:]) }

        public var declaration: SettingDeclaration<CMYKProfile> {
            SettingDeclaration(
                summary: "The ICC profile CMYK input without one of its own is read through on its way to sRGB",
                value: .other(emptyIsValue: false) { profile, text, _ in profile = .named(text) },
                defaultText: "\(CMYKProfile.knownLocations.joined(separator: " or ")) where it can be read, else builtin",
                rangeText: "an ICC profile file, or builtin (libvips' own)")
        }
    }

    /// The profile's path as a C string that lives as long as the process (nil for the
    /// built-in one), for `tiler_tile_pixels.cmyk_profile`.
    /// Written once and never freed or changed, so safe to read from any thread.
    nonisolated(unsafe) static let currentPath: UnsafePointer<CChar>? = {
        guard case .file(let path) = current else { return nil }
        return UnsafePointer(strdup(path))
    }()
}
