// An overlayfs mount for tests, as every Docker or podman container has.
import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// An overlayfs mount in a temporary folder: `lower`, `upper`, `work` and `merged`.
public struct OverlayMount: Sendable {
    public let base: String
    public var merged: String { base + "/merged" }
    /// Whether `upper` (where new files go) is on a disk, so pages can be dropped.
    public let upperIsOnDisk: Bool

    /// Tries once per process: root, the overlay module, and permission to mount.
    public static let isPossible: Bool = {
        guard geteuid() == 0, let overlay = try? OverlayMount() else { return false }
        overlay.remove()
        return true
    }()

    public init() throws {
        base = FileManager.default.temporaryDirectory.appendingPathComponent("tiler-overlay-\(UUID().uuidString)").path
        for part in ["lower", "upper", "work", "merged"] {
            try FileManager.default.createDirectory(atPath: base + "/" + part, withIntermediateDirectories: true)
        }
        let options = "lowerdir=\(base)/lower,upperdir=\(base)/upper,workdir=\(base)/work"
        guard mount("overlay", base + "/merged", "overlay", 0, options) == 0 else {
            let e = errno
            try? FileManager.default.removeItem(atPath: base)
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSLocalizedDescriptionKey: "mount overlay: errno \(e)"])
        }
        upperIsOnDisk = temporaryFolderIsOnDisk
    }

    public func remove() {
        umount2(merged, Int32(MNT_DETACH))
        try? FileManager.default.removeItem(atPath: base)
    }
}

/// Whether the temporary folder is on a disk (tmpfs files live in the page cache and can
/// never be dropped from it; overlayfs passes the question down, so it is looked up too).
public let temporaryFolderIsOnDisk: Bool = {
    // The type of the mount that holds it: the longest mount point that prefixes it.
    let folder = FileManager.default.temporaryDirectory.resolvingSymlinksInPath().path
    guard let mounts = try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8) else { return false }
    var best = (point: "", type: "")
    for line in mounts.split(separator: "\n") {
        let f = line.split(separator: " ")
        guard f.count > 2 else { continue }
        let point = String(f[1]), type = String(f[2])
        let covers = point == "/" || folder == point || folder.hasPrefix(point + "/")
        if covers && point.count >= best.point.count { best = (point, type) }
    }
    return !["tmpfs", "ramfs", "overlay", ""].contains(best.type)
}()
