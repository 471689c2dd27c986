import Foundation
import TilerStorage

/// The one default ROOT of `cut`, `serve` and `ls`: `TILER_ROOT`, else `tiles` (in the
/// current folder), so that `tiler cut IMAGE` then `tiler serve` serves what was cut.
enum DefaultRoot {
    /// The folder `tiler cut` writes and `tiler serve` serves when no ROOT is given.
    static let folder = "tiles"

    /// `TILER_ROOT` if set and not empty, else `tiles`.
    static func resolved(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let root = environment["TILER_ROOT"], !root.isEmpty { return root }
        return folder
    }
}

/// What `tiler serve` says when its ROOT holds no pyramid: where pyramids are if the
/// default folder has them (a ROOT of `.` after `tiler cut` wrote `./tiles`), else how
/// to make some. Counting reads no manifest.
enum EmptyRootHint {
    static func hint(root: String, defaultRoot: String = DefaultRoot.folder) -> String? {
        guard PyramidListing.count(root: root) == 0 else { return nil }
        let here = URL(fileURLWithPath: root).standardizedFileURL.path
        let other = URL(fileURLWithPath: defaultRoot).standardizedFileURL.path
        if here != other, let count = PyramidListing.count(root: defaultRoot), count > 0 {
            return "\(root) holds no pyramids, but ./\(defaultRoot) holds \(count) (where `tiler cut` writes by default): serve them with `tiler serve \(defaultRoot)`"
        }
        return "\(root) holds no pyramids yet: cut images into it with `tiler cut IMAGE... --output \(root)`; they are served as they appear"
    }
}
