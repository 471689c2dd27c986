import Foundation
import Testing
import TilerCore
import TilerTestSupport

/// `tiler info`, `verify`, `ls` and `rm` on folders and archives, driven through the
/// built binary.
@Suite struct ManagePyramidsTests {
    /// A scratch ROOT with `photo` cut as a folder (1000 × 700: levels 0-2, 17 tiles) and
    /// `arch` as an archive of the same image.
    struct Fixture {
        let scratch: Scratch
        let root: String
        let tiler: String

        init(_ name: String = #function, format: String = "png", pad: Bool = false) throws {
            scratch = try Scratch(name)
            root = scratch.path("tiles")
            tiler = try tilerBinary()
            let input = scratch.path("photo.png")
            try CutCommandTests.makeImage(input, width: 1000, height: 700, bands: 3, scratch: scratch)
            let extra = ["--format", format, "--quiet", "-o", root] + (pad ? ["--pad"] : [])
            let folder = try run(tiler, ["cut", input] + extra)
            guard folder.status == 0 else { throw SupportError(description: folder.stderr) }
            let archive = try run(tiler, ["cut", input, "--archive", "--name", "arch"] + extra)
            guard archive.status == 0 else { throw SupportError(description: archive.stderr) }
        }

        func tiler(_ arguments: String...) throws -> ProcessOutput { try run(tiler, arguments) }
        func json(_ arguments: String...) throws -> [String: Any] {
            let result = try run(tiler, arguments + ["--json"])
            return try #require(
                try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
                "\(arguments): \(result.stdout) \(result.stderr)")
        }
    }

    static let expectedTiles = 1 + 4 + 12

    // MARK: info

    @Test func infoGivesTheManifestAndTotalsOfAFolder() throws {
        let f = try Fixture()
        defer { f.scratch.cleanUp() }
        let info = try f.json("info", "\(f.root)/photo")
        #expect(info["layout"] as? String == "folder")
        let manifest = try #require(info["manifest"] as? [String: Any])
        #expect(manifest["id"] as? String == "photo" && manifest["width"] as? Int == 1000)
        #expect((manifest["source"] as? [String: Any])?["file"] as? String == "photo.png")
        let totals = try #require(info["totals"] as? [String: Any])
        #expect(totals["levels"] as? Int == 3 && totals["tiles"] as? Int == Self.expectedTiles)
        #expect(totals["expectedTiles"] as? Int == Self.expectedTiles)
        // Every byte of the folder: tiles, thumbnail and manifest.
        var bytes = 0
        let enumerator = FileManager.default.enumerator(atPath: "\(f.root)/photo")!
        while let name = enumerator.nextObject() as? String {
            let attributes = try FileManager.default.attributesOfItem(atPath: "\(f.root)/photo/\(name)")
            if attributes[.type] as? FileAttributeType == .typeRegular { bytes += (attributes[.size] as? Int) ?? 0 }
        }
        #expect(totals["bytes"] as? Int == bytes)

        let text = try f.tiler("info", "\(f.root)/photo")
        #expect(text.status == 0)
        #expect(text.stdout.contains("17 of 17 tiles") && text.stdout.contains("edge tiles clipped"))
        #expect(text.stdout.contains("photo.png") && text.stdout.contains("\"tileSize\""))
    }

    @Test func infoReadsArchivesByEitherName() throws {
        let f = try Fixture()
        defer { f.scratch.cleanUp() }
        for path in ["\(f.root)/arch.pmtiles", "\(f.root)/arch"] {
            let info = try f.json("info", path)
            #expect(info["layout"] as? String == "archive" && info["path"] as? String == "\(f.root)/arch.pmtiles")
            let totals = try #require(info["totals"] as? [String: Any])
            let size = try FileManager.default.attributesOfItem(atPath: "\(f.root)/arch.pmtiles")[.size] as? Int
            #expect(totals["bytes"] as? Int == size && totals["tiles"] as? Int == Self.expectedTiles)
            #expect((info["manifest"] as? [String: Any])?["id"] as? String == "arch")
        }
        let missing = try f.tiler("info", "\(f.root)/nothing")
        #expect(
            missing.status == 1
                && missing.stderr == "tiler: info: \(f.root)/nothing: no such pyramid (neither a folder nor nothing.pmtiles)\n")
    }

    // MARK: verify

    @Test(arguments: ["png", "jpeg", "webp"])
    func verifyPassesOnSoundPyramids(format: String) throws {
        let f = try Fixture("verify-\(format)", format: format)
        defer { f.scratch.cleanUp() }
        for path in ["\(f.root)/photo", "\(f.root)/arch.pmtiles"] {
            let result = try f.tiler("verify", path)
            #expect(result.status == 0, "\(path): \(result.stderr)")
            #expect(result.stderr.isEmpty && result.stdout.contains("17 tiles and the thumbnail checked: ok"))
        }
    }

    @Test func verifyChecksPaddedTilesAtTheFullSize() throws {
        let f = try Fixture(pad: true)
        defer { f.scratch.cleanUp() }
        #expect(try f.tiler("verify", "\(f.root)/photo", "\(f.root)/arch.pmtiles").status == 0)
        // A clipped edge tile (the size an unpadded cut writes) is wrong in a padded pyramid.
        try vips("black", "\(f.root)/photo/2/2/3.png", "232", "188", "--bands", "3")
        let result = try f.tiler("verify", "\(f.root)/photo")
        #expect(result.status == 1)
        #expect(result.stderr == "tiler: verify: \(f.root)/photo/2/2/3.png: tile 2/2/3: 232×188 pixels, expected 256×256\n")
    }

    /// Each kind of damage gets its own line naming the tile, and the exit status is 1.
    @Test func verifyFailsOnMissingCorruptAndWrongTiles() throws {
        let f = try Fixture()
        defer { f.scratch.cleanUp() }
        let p = "\(f.root)/photo"
        try FileManager.default.removeItem(atPath: "\(p)/2/1/3.png")  // missing
        var middle = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(p)/2/0/1.png")))
        middle[middle.count / 2] ^= 0xFF  // corrupt inside, ends whole
        try Data(middle).write(to: URL(fileURLWithPath: "\(p)/2/0/1.png"))
        let cut = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(p)/1/1/1.png")))
        try Data(cut.prefix(cut.count / 2)).write(to: URL(fileURLWithPath: "\(p)/1/1/1.png"))  // truncated
        try FileManager.default.removeItem(atPath: "\(p)/2/2/0.png")
        try vips("black", "\(p)/2/2/0.png", "100", "100")  // another size
        try FileManager.default.removeItem(atPath: "\(p)/2/0/0.png")
        try FileManager.default.createSymbolicLink(atPath: "\(p)/2/0/0.png", withDestinationPath: "../0/1.png")  // a link
        try Data("not an image".utf8).write(to: URL(fileURLWithPath: "\(p)/0/0/0.png"))  // another format

        let result = try f.tiler("verify", p)
        #expect(result.status == 1)
        let lines = result.stderr.split(separator: "\n").map(String.init)
        let expected: [(String, String)] = [
            ("0/0/0.png", "not a complete png file"),
            ("1/1/1.png", "not a complete png file"),
            ("2/0/0.png", "is a link"),
            ("2/0/1.png", "does not decode"),
            ("2/1/3.png", "missing"),
            ("2/2/0.png", "100×100 pixels, expected 256×188"),
        ]
        #expect(lines.count == expected.count, "\(result.stderr)")
        for ((file, reason), line) in zip(expected, lines) {
            let tile = String(file.dropLast(4))
            #expect(line.hasPrefix("tiler: verify: \(p)/\(file): tile \(tile): \(reason)"), "\(line)")
        }
        #expect(result.stdout.contains("6 problems"))

        let json = try f.json("verify", p)
        #expect(json["ok"] as? Bool == false)
        let problems = try #require((json["pyramids"] as? [[String: Any]])?.first?["problems"] as? [[String: Any]])
        #expect(problems.map { $0["tile"] as? String } == expected.map { String($0.0.dropLast(4)) })
        // The sound archive beside it still passes, in the same invocation.
        let both = try f.tiler("verify", "\(f.root)/arch.pmtiles", p)
        #expect(both.status == 1 && both.stdout.contains("arch.pmtiles: 17 tiles and the thumbnail checked: ok"))
    }

    /// Damage inside an archive's tile data, a truncated archive and a missing thumbnail.
    @Test func verifyFailsOnDamagedArchives() throws {
        let f = try Fixture()
        defer { f.scratch.cleanUp() }
        let original = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(f.root)/arch.pmtiles")))
        func tileDataOffset(_ bytes: [UInt8]) -> Int {
            (0..<8).reduce(0) { $0 | Int(bytes[56 + $1]) << (8 * $1) }
        }
        let damaged = f.scratch.path("damaged")
        try FileManager.default.createDirectory(atPath: damaged, withIntermediateDirectories: true)
        // Inside tile 0/0/0: the folder cut's bytes of it, found in the archive (a cut's
        // tile data is in the order the tiles were made, not tile-id order).
        let level0 = try Data(contentsOf: URL(fileURLWithPath: "\(f.root)/photo/0/0/0.png"))
        let start = try #require(Data(original).range(of: level0)).lowerBound
        #expect(start >= tileDataOffset(original))
        var flipped = original
        flipped[start + 200] ^= 0xFF
        try Data(flipped).write(to: URL(fileURLWithPath: "\(damaged)/arch.pmtiles"))
        let result = try f.tiler("verify", "\(damaged)/arch.pmtiles")
        #expect(result.status == 1)
        #expect(result.stderr.hasPrefix("tiler: verify: \(damaged)/arch.pmtiles: tile 0/0/0: does not decode"), "\(result.stderr)")
        #expect(result.stderr.split(separator: "\n").count == 1)

        let truncated = f.scratch.path("truncated")
        try FileManager.default.createDirectory(atPath: truncated, withIntermediateDirectories: true)
        try Data(original.prefix(original.count - 100)).write(to: URL(fileURLWithPath: "\(truncated)/arch.pmtiles"))
        let short = try f.tiler("verify", "\(truncated)/arch.pmtiles")
        #expect(short.status == 1)
        #expect(short.stderr.contains("\(truncated)/arch.pmtiles") && short.stderr.contains("truncated"), "\(short.stderr)")
        #expect(short.stderr.split(separator: "\n").count == 1)

        try FileManager.default.removeItem(atPath: "\(f.root)/photo/thumbnail.png")
        let noThumbnail = try f.tiler("verify", "\(f.root)/photo")
        #expect(noThumbnail.status == 1 && noThumbnail.stderr == "tiler: verify: \(f.root)/photo/thumbnail.png: tile thumbnail: missing\n")
    }

    // MARK: ls

    @Test func lsListsFoldersAndArchivesAndTheFolderWins() throws {
        let f = try Fixture()
        defer { f.scratch.cleanUp() }
        // photo as an archive too: the folder wins, as in the server.
        #expect(try f.tiler("pack", "\(f.root)/photo").status == 0)
        // Not pyramids: a hidden partial, a folder without manifest, a link, a stray file.
        try FileManager.default.createDirectory(atPath: "\(f.root)/.photo.partial-1-abc", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "\(f.root)/empty", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: "\(f.root)/linked", withDestinationPath: "photo")
        try Data("x".utf8).write(to: URL(fileURLWithPath: "\(f.root)/notes.txt"))

        let listing = try f.json("ls", f.root)
        let rows = try #require(listing["pyramids"] as? [[String: Any]])
        #expect(rows.map { $0["id"] as? String } == ["arch", "photo"])
        #expect(rows.map { $0["layout"] as? String } == ["archive", "folder"])
        #expect(rows[1]["shadowsArchive"] as? Bool == true && rows[0]["shadowsArchive"] as? Bool == false)
        #expect(rows[0]["width"] as? Int == 1000 && rows[0]["tiles"] as? Int == Self.expectedTiles)
        let text = try f.tiler("ls", f.root)
        #expect(text.status == 0)
        let lines = text.stdout.split(separator: "\n")
        #expect(lines.count == 3 && lines[2].contains("folder (+archive, not served)") && lines[1].contains("1000×700"))
    }

    @Test func lsReportsUnusablePyramidsAndBadRoots() throws {
        let f = try Fixture()
        defer { f.scratch.cleanUp() }
        try FileManager.default.createDirectory(atPath: "\(f.root)/broken", withIntermediateDirectories: true)
        try Data("{".utf8).write(to: URL(fileURLWithPath: "\(f.root)/broken/pyramid.json"))
        let result = try f.tiler("ls", f.root)
        #expect(result.status == 1)
        let line = result.stdout.split(separator: "\n").first { $0.hasPrefix("broken ") }
        #expect(
            line?.split(separator: " ", maxSplits: 2).map(String.init).last?.trimmingCharacters(in: .whitespaces)
                .hasPrefix("unreadable: \(f.root)/broken/pyramid.json: unreadable manifest") == true, "\(result.stdout)")
        let missing = try f.tiler("ls", f.scratch.path("nowhere"))
        #expect(missing.status == 1 && missing.stderr.hasPrefix("tiler: ls: \(f.scratch.path("nowhere")): "))
        let file = try f.tiler("ls", f.scratch.path("photo.png"))
        #expect(file.status == 1 && file.stderr == "tiler: ls: \(f.scratch.path("photo.png")): is not a directory\n")
    }

    // MARK: rm

    @Test func rmRemovesFoldersArchivesAndBoth() throws {
        let f = try Fixture()
        defer { f.scratch.cleanUp() }
        #expect(try f.tiler("pack", "\(f.root)/photo").status == 0)
        let result = try f.json("rm", f.root, "photo", "arch", "--grace", "0")
        let removed = try #require(result["removed"] as? [[String: Any]])
        #expect(removed.map { $0["id"] as? String } == ["photo", "arch"])
        let photoTargets = (removed[0]["targets"] as? [[String: Any]])?.map { $0["layout"] as? String }
        #expect(photoTargets == ["archive", "folder"])
        // Nothing left, not even a hidden name.
        #expect(try FileManager.default.contentsOfDirectory(atPath: f.root) == [])
    }

    @Test func rmLeavesWhatIsNotAPyramidAlone() throws {
        let f = try Fixture()
        defer { f.scratch.cleanUp() }
        try FileManager.default.createDirectory(atPath: "\(f.root)/mine", withIntermediateDirectories: true)
        try Data("keep".utf8).write(to: URL(fileURLWithPath: "\(f.root)/mine/notes.txt"))
        let notPyramid = try f.tiler("rm", f.root, "mine", "--grace", "0")
        #expect(notPyramid.status == 1)
        #expect(notPyramid.stderr == "tiler: rm: \(f.root)/mine: has no pyramid.json, so it is not a pyramid; left alone\n")
        #expect(FileManager.default.fileExists(atPath: "\(f.root)/mine/notes.txt"))
        let absent = try f.tiler("rm", f.root, "ghost", "--grace", "0")
        #expect(absent.status == 1 && absent.stderr.contains("no such pyramid"))
        let path = try f.tiler("rm", f.root, "../photo")
        #expect(path.status == 64 && path.stderr.contains("not a pyramid id"))
        let bucket = try f.tiler("rm", "s3://bucket/prefix", "photo")
        #expect(bucket.status == 64)
        // One failure does not stop the others.
        let mixed = try f.tiler("rm", f.root, "ghost", "photo", "--grace", "0")
        #expect(mixed.status == 1 && !FileManager.default.fileExists(atPath: "\(f.root)/photo"))
    }

    /// A folder whose removal was interrupted after its manifest was hidden is finished by
    /// the next `tiler rm`; SIGINT during the grace period puts the folder back.
    @Test func rmFinishesAnInterruptedRemovalAndCanBeInterrupted() throws {
        let f = try Fixture()
        defer { f.scratch.cleanUp() }
        let photo = "\(f.root)/photo"
        try FileManager.default.moveItem(atPath: "\(photo)/pyramid.json", toPath: "\(photo)/.pyramid.json.removed")
        #expect(try f.tiler("rm", f.root, "photo", "--grace", "0").status == 0)
        #expect(!FileManager.default.fileExists(atPath: photo))

        let process = Process()
        process.executableURL = URL(fileURLWithPath: f.tiler)
        process.arguments = ["rm", f.root, "arch", "photo2", "--grace", "60"]
        // A folder to interrupt: cut again under another id.
        #expect(try f.tiler("cut", f.scratch.path("photo.png"), "-o", f.root, "--name", "photo2", "--quiet").status == 0)
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while FileManager.default.fileExists(atPath: "\(f.root)/photo2/pyramid.json"), Date() < deadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        #expect(!FileManager.default.fileExists(atPath: "\(f.root)/photo2/pyramid.json"), "rm retired the folder")
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        #expect(process.terminationStatus == 130)
        #expect(FileManager.default.fileExists(atPath: "\(f.root)/photo2/pyramid.json"), "the folder was put back")
        #expect(try f.tiler("verify", "\(f.root)/photo2").status == 0)
        #expect(!FileManager.default.fileExists(atPath: "\(f.root)/arch.pmtiles"), "an unlinked archive stays gone")
    }

    /// `--layout folder` or `--layout archive` removes that layout of an id and leaves the
    /// other whole (the default still removes both); rm says on stderr why it waits,
    /// naming TILER_RM_GRACE, and does not wait (nor say so) when only an archive goes.
    /// Before, rm had no way to keep one layout, and waited its grace period in silence.
    @Test func rmChoosesALayoutAndSaysWhyItWaits() throws {
        let f = try Fixture()
        defer { f.scratch.cleanUp() }
        #expect(try f.tiler("pack", "\(f.root)/photo", "--quiet").status == 0)
        let archive = try f.tiler("rm", f.root, "photo", "--layout", "archive", "--grace", "30")
        #expect(archive.status == 0 && archive.stderr.isEmpty, "\(archive.stderr)")
        #expect(archive.stdout == "removed \(f.root)/photo.pmtiles (archive)\n", "\(archive.stdout)")
        #expect(try f.tiler("verify", "\(f.root)/photo").status == 0, "the folder is left whole")

        #expect(try f.tiler("pack", "\(f.root)/photo", "--quiet").status == 0)
        let folder = try run(f.tiler, ["rm", f.root, "photo", "--layout", "folder"], environment: ["TILER_RM_GRACE": "0.2"])
        #expect(folder.status == 0, "\(folder.stderr)")
        #expect(
            folder.stderr
                == "tiler: rm: \(f.root)/photo retired; deleting in 0.2 s, once servers reading \(f.root) have dropped it (--grace or TILER_RM_GRACE; 0 when no server runs)\n",
            "\(folder.stderr)")
        #expect(folder.stdout == "removed \(f.root)/photo (folder)\n", "\(folder.stdout)")
        #expect(try f.tiler("verify", "\(f.root)/photo.pmtiles").status == 0, "the archive is left whole")
        #expect(try FileManager.default.contentsOfDirectory(atPath: f.root).sorted() == ["arch.pmtiles", "photo.pmtiles"])

        let none = try f.tiler("rm", f.root, "photo", "--layout", "folder", "--grace", "0")
        #expect(none.status == 1 && none.stderr == "tiler: rm: \(f.root)/photo: no such pyramid folder\n", "\(none.stderr)")
        let silent = try f.tiler("rm", f.root, "photo", "arch", "--grace", "0")
        #expect(silent.status == 0 && silent.stderr.isEmpty, "no wait, no word: \(silent.stderr)")
        let bad = try f.tiler("rm", f.root, "photo", "--layout", "pmtiles")
        #expect(bad.status == 64, "\(bad.stderr)")
    }
}
