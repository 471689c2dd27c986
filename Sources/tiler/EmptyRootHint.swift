import Foundation
import TilerStorage

/// What `tiler serve` says when its ROOT holds no pyramid: where pyramids are if the
/// default folder has them (a ROOT of `.` after `tiler cut` wrote `./tiles`), else how
/// to make some. Counting reads no manifest.
enum EmptyRootHint {
    static func hint(root: String, defaultRoot: String = DefaultRoot.folder) -> String? {
        guard PyramidListing.count(root: root) == 0 else { return nil }
        let here = URL(fileURLWithPath: root).standardizedFileURL.path
        let other = URL(fileURLWithPath: defaultRoot).standardizedFileURL.path
        if here != other, let count = PyramidListing.count(root: defaultRoot), count > 0 {
            return
                "\(root) holds no pyramids, but ./\(defaultRoot) holds \(count) (where `tiler cut` writes by default): serve them with `tiler serve \(defaultRoot)`"
        }
        return
            "\(root) holds no pyramids yet: cut images into it with `tiler cut IMAGE... --output \(root)`; they are served as they appear"
    }
}
