import Foundation
import Testing
import TilerTestSupport
#if canImport(Glibc)
    import Glibc
#endif

/// How `tiler serve` starts, as users start it: `--sources DIR` without any folder of
/// pyramids, the start line naming what is served, `auto` tiles for sources, and the hint
/// that `tiler serve DIR` gives for a folder of images.
@Suite struct ServeStartTests {
    /// `tiler serve ARGUMENTS --port 0` run in `directory`.
    func launch(_ arguments: [String], in directory: String) throws -> ServeProcess {
        try ServeProcess(arguments + ["--port", "0", "--threads", "1"], directory: directory)
    }

    /// An RGB JPEG and an RGBA PNG in `folder`.
    func writeImages(in folder: String, scratch: Scratch) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try CutCommandTests.makeImage("\(folder)/photo.jpg", width: 600, height: 400, bands: 3, scratch: scratch)
        try CutCommandTests.makeImage("\(folder)/logo.png", width: 300, height: 200, bands: 4, scratch: scratch)
        for name in try FileManager.default.contentsOfDirectory(atPath: scratch.path) where name.hasSuffix(".v") {
            try FileManager.default.removeItem(atPath: scratch.path(name))
        }
    }

    /// `tiler serve --sources DIR` in a folder without `./tiles` (and no ROOT named)
    /// serves DIR's images, says so on its start line, and logs no complaint about the
    /// missing ROOT; the images' tiles are `auto`: JPEG for the RGB photo, PNG for the RGBA
    /// logo. A pyramid cut into `./tiles` afterwards is served too. Before, the command
    /// refused to start without `./tiles`, its hint said to cut first, and sources were
    /// PNG whatever they held.
    @Test func sourcesNeedNoFolderOfPyramids() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let work = scratch.path("work"), photos = scratch.path("work/photos")
        try writeImages(in: photos, scratch: scratch)
        let server = try launch(["--sources", "photos"], in: work)
        defer { server.stop() }
        let port = server.port
        #expect(server.startLine == "tiler: serving the images in photos at http://127.0.0.1:\(port)/")
        let photo = try fetch(port, "/images/photo")
        #expect(photo.status == 200, "\(photo.text)")
        #expect(photo.json["format"] as? String == "jpeg")
        let tile = try fetch(port, "/images/photo/tiles/0/0/0.jpg")
        #expect(tile.status == 200 && tile.header("Content-Type") == "image/jpeg" && tile.body.starts(with: [0xFF, 0xD8, 0xFF]))
        let logo = try fetch(port, "/images/logo")
        #expect(logo.json["format"] as? String == "png", "\(logo.text)")
        #expect(try fetch(port, "/images/logo/tiles/0/0/0.png").body.starts(with: [0x89, 0x50, 0x4E, 0x47]))

        // Pyramids cut into the default ROOT later are served as they appear.
        let cut = try run(try tilerBinary(), ["cut", "\(photos)/photo.jpg", "--name", "cut", "--quiet"], in: URL(fileURLWithPath: work))
        #expect(cut.status == 0, "\(cut.stderr)")
        #expect(eventually { (try? fetch(port, "/images/cut").status) == 200 })
        let said = server.errorOutput
        #expect(!said.contains("ROOT"), "a missing ROOT is no fault with --sources: \(said)")
    }

    /// With a ROOT, the start line names it and the sources folder; a named ROOT that does
    /// not exist is still an error, with --sources or without.
    @Test func theStartLineNamesRootAndSources() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let photos = scratch.path("photos"), root = scratch.path("pyramids")
        try writeImages(in: photos, scratch: scratch)
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let server = try launch([root, "--sources", photos], in: scratch.path)
        defer { server.stop() }
        #expect(server.startLine == "tiler: serving \(root) and the images in \(photos) at http://127.0.0.1:\(server.port)/")

        let missing = try run(try tilerBinary(), ["serve", scratch.path("nowhere"), "--sources", photos, "--port", "0"])
        #expect(missing.status == 64 && missing.stderr.contains("is not a folder"), "\(missing.stderr)")
        let noDefault = try run(try tilerBinary(), ["serve", "--port", "0"], in: URL(fileURLWithPath: photos))
        #expect(noDefault.status == 64 && noDefault.stderr.contains("tiler serve --sources DIR"), "\(noDefault.stderr)")
    }

    /// `tiler serve DIR` where DIR holds images but no pyramid hints at `tiler serve
    /// --sources DIR`. Before, the hint only said to cut images into DIR.
    @Test func aFolderOfImagesHintsAtSources() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let photos = scratch.path("photos")
        try writeImages(in: photos, scratch: scratch)
        let server = try launch([photos], in: scratch.path)
        defer { server.stop() }
        #expect(server.startLine == "tiler: serving \(photos) at http://127.0.0.1:\(server.port)/")
        #expect(eventually { server.errorOutput.contains("`tiler serve --sources \(photos)`") })
        let said = server.errorOutput
        #expect(said.hasPrefix("tiler: serve: \(photos) holds no pyramids but 2 image files: "), "\(said)")
    }
}
