import Foundation
import Glibc
import Testing
import TilerTestSupport
@testable import TilerSystem

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

    /// Whatever the file system (one with `RWF_NOWAIT`, or overlayfs and tmpfs without
    /// it), a file just read is read again without the pool.
    @Test func readIfCachedReadsWhatThePageCacheHolds() throws {
        try withTree { root, bytes in
            let first = RootedFiles.read(root: root, ["a", "b", "file"])  // now cached
            let device = try #require(first).info.device
            guard case let .read(got, info) = RootedFiles.readIfCached(root: root, ["a", "b", "file"]) else {
                Issue.record("a file just read was not read from the page cache (probe \(RootedFiles.pageCacheProbe(device: device)))")
                return
            }
            #expect(got == bytes && info.size == bytes.count)
            #expect(RootedFiles.pageCacheProbe(device: device) != .none)
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

    /// A regular file past the limit is there but too large (damage, which the server
    /// answers 500), not missing; at the limit it is read.
    @Test func aFileLargerThanAllowedIsTooLargeNotMissing() throws {
        try withTree { root, bytes in
            _ = RootedFiles.read(root: root, ["a", "b", "file"])  // cached
            guard case let .tooLarge(info) = RootedFiles.readIfCached(root: root, ["a", "b", "file"], maximumBytes: bytes.count - 1) else {
                Issue.record("a file one byte over the limit was not .tooLarge")
                return
            }
            #expect(info.size == bytes.count)
            guard case .tooLarge = RootedFiles.open(root: root, ["a", "b", "file"], maximumBytes: bytes.count - 1) else {
                Issue.record("open: a file one byte over the limit was not .tooLarge")
                return
            }
            guard case let .file(fd, _, folder) = RootedFiles.open(root: root, ["a", "b", "file"], maximumBytes: bytes.count) else {
                Issue.record("open: a file at the limit was not opened")
                return
            }
            fd.close()
            #expect(folder == nil, "the folder is described only when asked")
        }
    }

    /// Asked to, `open` says which folder it found the file in: the one `folderInfo`
    /// finds at that path (the root itself for none), and another one once it is replaced.
    @Test func openDescribesTheFolderItFoundTheFileIn() throws {
        try withTree { root, bytes in
            guard
                case let .file(fd, _, folder?) = RootedFiles.open(
                    root: root, ["a", "b", "file"], maximumBytes: bytes.count, describingFolder: true)
            else {
                Issue.record("open did not describe the folder")
                return
            }
            fd.close()
            let found = try #require(RootedFiles.folderInfo(root: root, ["a", "b"]))
            #expect(found.isDirectory && found.inode == folder.inode && found.device == folder.device)
            #expect(RootedFiles.folderInfo(root: root, [])?.isDirectory == true)
            #expect(RootedFiles.folderInfo(root: root, ["a", "b", "file"]) == nil, "a file is no folder")
            #expect(rename(root + "/a/b", root + "/a/b.old") == 0)
            try FileManager.default.createDirectory(atPath: root + "/a/b", withIntermediateDirectories: false)
            #expect(RootedFiles.folderInfo(root: root, ["a", "b"])?.inode != folder.inode)
            #expect(rename(root + "/a/b.old", root + "/a/c") == 0)
            #expect(symlink(root + "/a/c", root + "/a/d") == 0)
            #expect(RootedFiles.folderInfo(root: root, ["a", "d"]) == nil, "a link is not followed")
        }
    }

    /// tmpfs has no `RWF_NOWAIT` (EOPNOTSUPP) but its files are always in memory: read at
    /// once, with the probe switched to `.residency` for that file system.
    @Test(.enabled(if: FileManager.default.isWritableFile(atPath: "/dev/shm"), "needs /dev/shm"))
    func tmpfsFilesAreReadWithoutThePool() throws {
        let root = "/dev/shm/tiler-rooted-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root + "/a", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let bytes = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        try Data(bytes).write(to: URL(fileURLWithPath: root + "/a/tile"))
        guard case let .read(got, info) = RootedFiles.readIfCached(root: root, ["a", "tile"]) else {
            Issue.record("a tmpfs file was sent to the pool")
            return
        }
        #expect(got == bytes)
        #expect(RootedFiles.pageCacheProbe(device: info.device) != .none)
    }

    /// The container case: an overlayfs mount (made here, as root, in a temporary
    /// folder; skipped where mounting is not allowed). `RWF_NOWAIT` answers EOPNOTSUPP
    /// there; the first read notices, switches that file system to `mincore`, and cached
    /// files are read at once, while dropped ones still go to the pool.
    @Test(.enabled(if: OverlayMount.isPossible, "needs permission to mount overlayfs"))
    func overlayfsFallsBackToMincoreOncePerFileSystem() throws {
        let overlay = try OverlayMount()
        defer { overlay.remove() }
        let root = overlay.merged
        try FileManager.default.createDirectory(atPath: root + "/a/b", withIntermediateDirectories: true)
        let bytes = (0..<65_536).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try Data(bytes).write(to: URL(fileURLWithPath: root + "/a/b/file"))
        let device = try #require(RootedFiles.read(root: root, ["a", "b", "file"])).info.device
        guard case let .read(got, _) = RootedFiles.readIfCached(root: root, ["a", "b", "file"]) else {
            Issue.record("a cached file on overlayfs was sent to the pool")
            return
        }
        #expect(got == bytes)
        #expect(RootedFiles.pageCacheProbe(device: device) == .residency)
        // Dropped from the page cache (through the overlay, which passes fadvise down).
        if overlay.upperIsOnDisk {
            guard dropFromPageCache(root + "/a/b/file") else {
                Issue.record("the kernel kept the file's pages through every POSIX_FADV_DONTNEED")
                return
            }
            guard case .wouldBlock = RootedFiles.readIfCached(root: root, ["a", "b", "file"]) else {
                Issue.record("a file dropped from the page cache was read on the event loop")
                return
            }
        }
        #expect(RootedFiles.read(root: root, ["a", "b", "file"])?.bytes == bytes)
        // Missing files and links are still unavailable.
        guard case .unavailable = RootedFiles.readIfCached(root: root, ["a", "b", "nope"]) else {
            Issue.record("a missing file was not .unavailable")
            return
        }
    }

    /// A file whose pages were dropped from the page cache (written back, then
    /// POSIX_FADV_DONTNEED) must not be read on the event loop: `.wouldBlock`.
    @Test(.enabled(if: temporaryFolderIsOnDisk, "needs a disk-backed temporary folder"))
    func readIfCachedRefusesToWaitForTheDisk() throws {
        try withTree { root, bytes in
            guard dropFromPageCache(root + "/a/b/file") else {
                Issue.record("the kernel kept the file's pages through every POSIX_FADV_DONTNEED")
                return
            }
            switch RootedFiles.readIfCached(root: root, ["a", "b", "file"]) {
            case .wouldBlock: break
            case .read: Issue.record("read a file the page cache had dropped without blocking")
            case .unavailable, .tooLarge: Issue.record("an uncached file was reported unavailable")
            }
            // The blocking read still gets it.
            #expect(RootedFiles.read(root: root, ["a", "b", "file"])?.bytes == bytes)
        }
    }
}
