import Foundation
import TilerStorage

/// What `tiler serve` says when its ROOT holds no pyramid: where pyramids are if the
/// default folder has them (a ROOT of `.` after `tiler cut` wrote `./tiles`); else that
/// `--sources` serves image files without cutting them, if ROOT holds some (`tiler serve
/// photos/`); else how to make pyramids. Counting reads no manifest and no image.
enum EmptyRootHint {
    /// File name extensions of the images the hint counts (what cameras, scanners and
    /// slide scanners write, that libvips reads).
    static let imageExtensions: Set<String> = [
        "jpg", "jpeg", "jpe", "png", "tif", "tiff", "webp", "gif", "heic", "heif", "avif", "jp2", "j2k", "jxl",
    ]

    static func hint(root: String, defaultRoot: String = DefaultRoot.folder) -> String? {
        guard PyramidListing.count(root: root) == 0 else { return nil }
        let here = URL(fileURLWithPath: root).standardizedFileURL.path
        let other = URL(fileURLWithPath: defaultRoot).standardizedFileURL.path
        if here != other, let count = PyramidListing.count(root: defaultRoot), count > 0 {
            return
                "\(root) holds no pyramids, but ./\(defaultRoot) holds \(count) (where `tiler cut` writes by default): serve them with `tiler serve \(defaultRoot)`"
        }
        let images = imageCount(in: root)
        if images > 0 {
            return
                "\(root) holds no pyramids but \(images) image file\(images == 1 ? "" : "s"): serve them without cutting with `tiler serve --sources \(root)`, or cut them first with `tiler cut \(root)/IMAGE... --output DIR` and serve DIR"
        }
        return
            "\(root) holds no pyramids yet: cut images into it with `tiler cut IMAGE... --output \(root)`; they are served as they appear"
    }

    /// Files in `folder` (not folders, not hidden ones) whose extension is an image's; 0
    /// when it cannot be listed.
    static func imageCount(in folder: String) -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return 0 }
        return names.filter { name in
            guard !name.hasPrefix("."), imageExtensions.contains((name as NSString).pathExtension.lowercased()) else { return false }
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: "\(folder)/\(name)", isDirectory: &isDirectory) && !isDirectory.boolValue
        }.count
    }
}
