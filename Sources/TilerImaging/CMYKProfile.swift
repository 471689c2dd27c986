import Foundation

/// The ICC profile that CMYK input without an embedded profile is read through on its way
/// to sRGB.
///
/// libvips' built-in CMYK profile makes such images come out washed out next to what
/// browsers show; Ghostscript's `default_cmyk.icc` (Debian's `libgs-common`, which
/// `scripts/install-deps` and the container install) is a typical coated-press profile
/// and is used when it is there. `TILER_CMYK_PROFILE` names another profile file, or
/// `builtin` for libvips' own; without it and without Ghostscript's file, libvips' own
/// is used.
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
        let readable = { (path: String) in
            var isFolder: ObjCBool = false
            return FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) && !isFolder.boolValue
                && FileManager.default.isReadableFile(atPath: path)
        }
        if let named = environment["TILER_CMYK_PROFILE"], !named.isEmpty {
            self = named == "builtin" ? .builtin : readable(named) ? .file(named) : .unreadable(named)
        } else {
            self = locations.first(where: readable).map { .file($0) } ?? .builtin
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
