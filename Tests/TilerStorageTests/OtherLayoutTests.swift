import Foundation
import Testing
import TilerCore
import TilerStorage
import TilerTestSupport

/// `cut --force` of an id in the other layout: the folder it replaces by an archive is
/// retired at once and deleted after the grace period, unless a cut of the id put a
/// pyramid there again meanwhile.
@Suite struct OtherLayoutTests {
    let id = PyramidID("photo")!

    /// A folder that passes for a pyramid (its manifest's bytes are not read here).
    func makeFolder(_ root: String, marker: String) throws {
        try FileManager.default.createDirectory(atPath: "\(root)/photo/0/0", withIntermediateDirectories: true)
        try #require(FileManager.default.createFile(atPath: "\(root)/photo/pyramid.json", contents: Data(marker.utf8)))
        try #require(FileManager.default.createFile(atPath: "\(root)/photo/0/0/0.png", contents: Data(marker.utf8)))
    }

    @Test func aRetiredFolderIsDeletedAfterwards() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let root = scratch.path, output = FolderOutput(root: scratch.path)
        try makeFolder(root, marker: "old")
        #expect(output.existing(id, layout: .archive) == "\(root)/photo")
        try #require(FileManager.default.createFile(atPath: "\(root)/photo.pmtiles", contents: Data("new".utf8)))
        let retired = try #require(try output.removeOtherLayout(of: id, keeping: .archive))
        // Retired: no manifest, so no pyramid (servers drop it), every tile still there.
        #expect(!FileManager.default.fileExists(atPath: "\(root)/photo/pyramid.json"))
        #expect(FileManager.default.fileExists(atPath: "\(root)/photo/0/0/0.png"))
        #expect(try retired.delete())
        #expect(scratch.entries() == ["photo.pmtiles"])
    }

    /// A folder cut of the id during the grace period swaps a new folder in (or puts a
    /// manifest back): the deletion leaves it alone.
    @Test(arguments: [false, true])
    func aFolderCutAgainMeanwhileIsLeftAlone(swapped: Bool) throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let root = scratch.path, output = FolderOutput(root: scratch.path)
        try makeFolder(root, marker: "old")
        try #require(FileManager.default.createFile(atPath: "\(root)/photo.pmtiles", contents: Data("new".utf8)))
        let retired = try #require(try output.removeOtherLayout(of: id, keeping: .archive))
        if swapped {
            try FileManager.default.moveItem(atPath: "\(root)/photo", toPath: "\(root)/aside")
            try makeFolder(root, marker: "newer")
        } else {
            try #require(FileManager.default.createFile(atPath: "\(root)/photo/pyramid.json", contents: Data("back".utf8)))
        }
        #expect(try !retired.delete())
        let manifest = try String(contentsOfFile: "\(root)/photo/pyramid.json", encoding: .utf8)
        #expect(manifest == (swapped ? "newer" : "back"))
    }

    /// Keeping the folder layout unlinks the archive at once; a folder that holds no
    /// pyramid is neither existing nor removed.
    @Test func anArchiveGoesAtOnceAndNonPyramidsStay() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let root = scratch.path, output = FolderOutput(root: scratch.path)
        try #require(FileManager.default.createFile(atPath: "\(root)/photo.pmtiles", contents: Data("old".utf8)))
        #expect(output.existing(id, layout: .folder) == "\(root)/photo.pmtiles")
        try makeFolder(root, marker: "new")
        #expect(try output.removeOtherLayout(of: id, keeping: .folder) == nil)
        #expect(scratch.entries() == ["photo"])

        try FileManager.default.createDirectory(atPath: "\(root)/notes", withIntermediateDirectories: true)
        let notes = PyramidID("notes")!
        #expect(output.existing(notes, layout: .archive) == nil)
        #expect(try output.removeOtherLayout(of: notes, keeping: .archive) == nil)
        #expect(scratch.entries() == ["notes", "photo"])
    }
}
