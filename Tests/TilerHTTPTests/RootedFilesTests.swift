import Foundation
import Glibc
import Testing
@testable import TilerHTTP

@Suite struct RootedFilesTests {
    /// A folder with `a/b/file` (64 KiB), removed afterwards.
    private func withTree(_ body: (String, [UInt8]) throws -> Void) throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("rooted-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root + "/a/b", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let bytes = (0..<65536).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try Data(bytes).write(to: URL(fileURLWithPath: root + "/a/b/file"))
        try body(root, bytes)
    }

    @Test func readIfCachedReadsWhatThePageCacheHolds() throws {
        try withTree { root, bytes in
            _ = RootedFiles.read(root: root, ["a", "b", "file"])  // now cached
            guard case let .read(got, info) = RootedFiles.readIfCached(root: root, ["a", "b", "file"]) else {
                Issue.record("a file just read is not in the page cache")
                return
            }
            #expect(got == bytes && info.size == bytes.count)
            // Missing files and links are unavailable, not "would block".
            guard case .unavailable = RootedFiles.readIfCached(root: root, ["a", "b", "nope"]) else {
                Issue.record("a missing file was not .unavailable")
                return
            }
            symlink(root + "/a/b/file", root + "/a/link")
            guard case .unavailable = RootedFiles.readIfCached(root: root, ["a", "link"]) else {
                Issue.record("a symbolic link was followed")
                return
            }
        }
    }

    /// Whether the temporary folder is on a disk (tmpfs files live in the page cache and
    /// can never be dropped from it).
    static let temporaryFolderIsOnDisk: Bool = {
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

    /// A file whose pages were dropped from the page cache (written back, then
    /// POSIX_FADV_DONTNEED) must not be read on the event loop: `.wouldBlock`.
    @Test(.enabled(if: temporaryFolderIsOnDisk, "needs a disk-backed temporary folder"))
    func readIfCachedRefusesToWaitForTheDisk() throws {
        try withTree { root, bytes in
            let path = root + "/a/b/file"
            let fd = open(path, O_RDONLY)
            #expect(fd >= 0)
            defer { close(fd) }
            fsync(fd)
            #expect(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0)
            switch RootedFiles.readIfCached(root: root, ["a", "b", "file"]) {
            case .wouldBlock: break
            case .read: Issue.record("read a file the page cache had dropped without blocking")
            case .unavailable: Issue.record("an uncached file was reported unavailable")
            }
            // The blocking read still gets it.
            #expect(RootedFiles.read(root: root, ["a", "b", "file"])?.bytes == bytes)
        }
    }
}
