import Foundation
import Glibc
import Testing
@testable import TilerSystem

/// `RootedFolder`: the scan's and the drawings' way to read beneath ROOT, with reasons.
@Suite struct RootedFolderTests {
    @Test func readsPlainFilesAndSaysWhyOthersAreRefused() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("rooted-folder-\(UUID().uuidString)").path
        let fm = FileManager.default
        try fm.createDirectory(atPath: root + "/p/0", withIntermediateDirectories: true)
        defer { try? fm.removeItem(atPath: root) }
        try Data("hello".utf8).write(to: URL(fileURLWithPath: root + "/p/0/file"))
        try Data(count: 4096).write(to: URL(fileURLWithPath: root + "/p/big"))
        symlink(root + "/p/0/file", root + "/p/link")
        symlink(root + "/p/0", root + "/linked-folder")
        symlink("/dev/zero", root + "/p/zero")
        #expect(mkfifo(root + "/p/fifo", 0o644) == 0)

        let (bytes, info) = try RootedFolder.read(root: root, ["p", "0", "file"], maximumBytes: 100)
        #expect(bytes == Array("hello".utf8) && info.size == 5 && info.isRegularFile)
        func reason(_ path: [String], maximumBytes: Int = 100) -> RootedFileError.Kind? {
            do {
                _ = try RootedFolder.read(root: root, path, maximumBytes: maximumBytes)
                return nil
            } catch {
                return error.kind
            }
        }
        #expect(reason(["p", "nope"]) == .missing)
        #expect(reason(["p", "link"]) == .link)
        #expect(reason(["p", "zero"]) == .link)
        #expect(reason(["linked-folder", "file"]) == .link)
        #expect(reason(["p", "fifo"]) == .notRegularFile)
        #expect(reason(["p", "0"]) == .notRegularFile)
        #expect(reason(["p", "big"]) == .tooLarge)
        #expect(reason(["p", "big"], maximumBytes: 4096) == nil)
        #expect(reason(["p", ".."]) == .missing)
        #expect(reason([]) == .missing)

        let top = try RootedFolder(root: root)
        #expect(Set(try top.names()) == ["p", "linked-folder"])
        #expect(try top.folder("p").info("link").isRegularFile == false)
        #expect(throws: RootedFileError.self) { try top.folder("linked-folder") }
        if geteuid() != 0 {
            chmod(root + "/p/0", 0)
            defer { chmod(root + "/p/0", 0o755) }
            #expect(reason(["p", "0", "file"]) == .denied)
        }
    }
}
