import Foundation
import Testing
import TilerTestSupport

/// One default ROOT for `cut`, `serve` and `ls` (`./tiles`, or `TILER_ROOT`), the hints
/// `serve` gives when its ROOT holds no pyramids, `tiler --help`, and `-o` naming a file.
@Suite struct DefaultRootTests {
    /// `tiler cut IMAGE` then `tiler serve` in the same folder serves what was cut.
    @Test func cutThenServeWithoutARootServesWhatWasCut() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let tiler = try tilerBinary()
        try CutCommandTests.makeImage(scratch.path("photo.png"), width: 300, height: 200, bands: 3, scratch: scratch)
        let cut = try run(tiler, ["cut", "photo.png", "--quiet"], in: scratch.url)
        #expect(cut.status == 0, "\(cut.stderr)")
        #expect(FileManager.default.fileExists(atPath: scratch.path("tiles/photo/pyramid.json")))

        let server = try ServeProcess(["--port", "0"], directory: scratch.path)
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.request("/images")
        let listing = try client.readResponse()
        #expect(listing.status == 200)
        #expect(((listing.json["images"] as? [[String: Any]]) ?? []).map { $0["id"] as? String } == ["photo"], "\(listing.text)")

        let ls = try run(tiler, ["ls"], in: scratch.url)
        #expect(ls.status == 0 && ls.stdout.contains("photo"))
    }

    /// `TILER_ROOT` is the default of both.
    @Test func tilerRootIsTheDefaultOfCutAndServe() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let tiler = try tilerBinary()
        try CutCommandTests.makeImage(scratch.path("photo.png"), width: 300, height: 200, bands: 3, scratch: scratch)
        let environment = ["TILER_ROOT": scratch.path("elsewhere")]
        #expect(try run(tiler, ["cut", "photo.png", "--quiet"], in: scratch.url, environment: environment).status == 0)
        #expect(FileManager.default.fileExists(atPath: scratch.path("elsewhere/photo/pyramid.json")))
        let server = try ServeProcess(["--port", "0"], environment: environment, directory: scratch.path)
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.request("/images/photo")
        #expect(try client.readResponse().status == 200)
    }

    /// Serving `.` after a cut into `./tiles` says where the pyramids are; an empty ROOT
    /// says how to make some; a missing default ROOT is a clear error.
    @Test func serveHintsWhenItsRootHoldsNoPyramids() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let tiler = try tilerBinary()
        let missing = try run(tiler, ["serve", "--port", "0"], in: scratch.url)
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("there is no folder 'tiles' here"), "\(missing.stderr)")

        try CutCommandTests.makeImage(scratch.path("photo.png"), width: 300, height: 200, bands: 3, scratch: scratch)
        #expect(try run(tiler, ["cut", "photo.png", "--quiet"], in: scratch.url).status == 0)
        for (root, expected) in [
            (".", ". holds no pyramids, but ./tiles holds 1 (where `tiler cut` writes by default): serve them with `tiler serve tiles`"),
            ("tiles", nil),
        ] {
            let text = try ServeProcess([root, "--port", "0"], directory: scratch.path).stop()
            if let expected {
                #expect(text.contains("tiler: serve: \(expected)\n"), "\(text)")
            } else {
                #expect(!text.contains("holds no pyramids"), "\(text)")
            }
        }
        try FileManager.default.createDirectory(atPath: scratch.path("empty"), withIntermediateDirectories: true)
        let text = try ServeProcess([scratch.path("empty"), "--port", "0"]).stop()
        #expect(
            text.contains("holds no pyramids yet: cut images into it with `tiler cut IMAGE... --output \(scratch.path("empty"))`"),
            "\(text)")
    }

    /// `tiler --help` lists every subcommand with its one-line abstract.
    @Test func helpListsEverySubcommand() throws {
        let help = try run(try tilerBinary(), ["--help"])
        #expect(help.status == 0)
        for (name, abstract) in [
            ("cut", "Cut images into tile pyramids."), ("serve", "Serve the pyramids"),
            ("info", "Show a pyramid's manifest and totals."),
            ("verify", "Check that every tile of a pyramid exists and decodes."),
            ("ls", "List the pyramids in ROOT, folders and archives."),
            ("rm", "Remove pyramids from ROOT, never half-served."),
            ("pack", "Pack pyramid folders"), ("unpack", "Unpack PMTiles archives"),
            ("healthcheck", "Check that a tiler server answers"),
        ] {
            let line = help.stdout.split(separator: "\n").first { $0.trimmingCharacters(in: .whitespaces).hasPrefix(name + " ") }
            #expect(line?.contains(abstract) == true, "\(name): \(help.stdout)")
        }
    }

    /// `-o` naming an existing file is "not a directory", not "File exists".
    @Test func outputNamingAFileIsNotADirectory() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let tiler = try tilerBinary()
        try CutCommandTests.makeImage(scratch.path("photo.png"), width: 100, height: 100, bands: 3, scratch: scratch)
        try Data("x".utf8).write(to: URL(fileURLWithPath: scratch.path("out")))
        for extra in [[], ["--archive"]] {
            let result = try run(tiler, ["cut", scratch.path("photo.png"), "-o", scratch.path("out"), "--quiet"] + extra)
            #expect(result.status != 0)
            #expect(result.stderr.contains("\(scratch.path("out")): not a directory"), "\(result.stderr)")
            #expect(!result.stderr.contains("File exists"))
        }
        let below = try run(tiler, ["cut", scratch.path("photo.png"), "-o", scratch.path("out/sub"), "--quiet"])
        #expect(below.status != 0 && below.stderr.lowercased().contains("not a directory"), "\(below.stderr)")
    }
}
