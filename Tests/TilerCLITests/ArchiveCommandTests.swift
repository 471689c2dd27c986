import Foundation
import Testing
import TilerCore
import TilerTestSupport

/// `tiler cut --archive`, `tiler pack` and `tiler unpack` end to end: the built binary,
/// and the official PMTiles Python reader (PyPI `pmtiles`, through `scripts/check-pmtiles`)
/// as the independent judge of every archive.
@Suite(.serialized) struct ArchiveCommandTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Runs `scripts/check-pmtiles ARCHIVE FOLDER` (the official reader against the folder).
    static func checkWithPMTilesReader(_ archive: String, against folder: String, ignoring: [String] = []) throws -> ProcessOutput {
        try run(
            "/usr/bin/env",
            ["python3", packageRoot.appendingPathComponent("scripts/check-pmtiles").path, archive, folder]
                + ignoring.flatMap { ["--ignore", $0] })
    }

    /// The entries of a folder, hidden ones included.
    static func entries(_ path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    /// Two RGB images 200 pixels high, 300 and 900 pixels wide.
    static func smallAndLarge(_ scratch: Scratch) throws -> (small: String, large: String) {
        let small = scratch.path("small.png"), large = scratch.path("large.png")
        try CutCommandTests.makeImage(small, width: 300, height: 200, bands: 3, scratch: scratch)
        try CutCommandTests.makeImage(large, width: 900, height: 200, bands: 3, scratch: scratch)
        return (small, large)
    }

    static let formats = ["png", "jpeg", "webp"]
    static let sizes = [(1, 1), (256, 256), (3001, 1999), (2999, 1)]

    /// The same input cut as a folder and as an archive: the official reader opens the
    /// archive, its header says the right tile type and zooms, and every tile it returns
    /// equals the folder's file byte for byte; the archive is clustered.
    @Test(arguments: formats, sizes)
    func officialReaderSeesTheFolderCutsTiles(format: String, size: (Int, Int)) throws {
        let (width, height) = size
        let scratch = try Scratch("archive-\(format)-\(width)x\(height)")
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try CutCommandTests.makeImage(input, width: width, height: height, bands: format == "jpeg" ? 3 : 4, scratch: scratch)
        let folders = scratch.path("folders"), archives = scratch.path("archives")
        let tiler = try tilerBinary()
        let folderCut = try run(tiler, ["cut", input, "-o", folders, "--format", format, "--quiet"])
        #expect(folderCut.status == 0, "\(folderCut.stderr)")
        let archiveCut = try run(tiler, ["cut", input, "-o", archives, "--format", format, "--archive", "--quiet"])
        #expect(archiveCut.status == 0, "\(archiveCut.stderr)")
        #expect(Self.entries(archives) == ["photo.pmtiles"], "ROOT holds \(Self.entries(archives))")

        let check = try Self.checkWithPMTilesReader("\(archives)/photo.pmtiles", against: "\(folders)/photo", ignoring: ["created"])
        #expect(check.status == 0, "\(check.stderr)")
        let figures = try #require(try JSONSerialization.jsonObject(with: Data(check.stdout.utf8)) as? [String: Any], "\(check.stdout)")
        let geometry = try PyramidGeometry(width: width, height: height)
        #expect(figures["tiles"] as? Int == geometry.levels.map(\.tileCount).reduce(0, +))
        #expect(figures["tile_type"] as? String == format && figures["max_zoom"] as? Int == geometry.maxLevel)
        // The contract's "ordered and clustered": the tile data in tile-id order, and the
        // header says so (check-pmtiles checks the flag against the data).
        #expect(figures["clustered"] as? Bool == true)
    }

    /// The check above can fail: one changed byte in one tile, and the reader's tiles no
    /// longer match the folder.
    @Test func theReaderCheckCatchesAChangedTile() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try CutCommandTests.makeImage(input, width: 600, height: 400, bands: 3, scratch: scratch)
        let root = scratch.path("tiles")
        #expect(try run(try tilerBinary(), ["cut", input, "-o", root, "--quiet"]).status == 0)
        #expect(try run(try tilerBinary(), ["pack", "\(root)/photo"]).status == 0)
        #expect(try Self.checkWithPMTilesReader("\(root)/photo.pmtiles", against: "\(root)/photo").status == 0)
        // A clustered flag that does not match the order of the tile data is caught too.
        var unclustered = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(root)/photo.pmtiles")))
        #expect(unclustered[96] == 1)
        unclustered[96] = 0
        let other = scratch.path("other.pmtiles")
        try Data(unclustered).write(to: URL(fileURLWithPath: other))
        let flag = try Self.checkWithPMTilesReader(other, against: "\(root)/photo")
        #expect(flag.status == 1 && flag.stderr.contains("clustered"), "\(flag.stderr)")
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: "\(root)/photo.pmtiles"))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size / 2)
        let byte = try #require(try handle.read(upToCount: 1))
        try handle.seek(toOffset: size / 2)
        try handle.write(contentsOf: Data([byte[0] ^ 0x55]))
        try handle.close()
        let tampered = try Self.checkWithPMTilesReader("\(root)/photo.pmtiles", against: "\(root)/photo")
        #expect(tampered.status == 1 && tampered.stderr.contains("differs"), "\(tampered.stderr)")
    }

    /// folder → pack → unpack gives the folder back, every file byte for byte (the
    /// manifest too), and archive → unpack → pack gives the archive back.
    @Test(arguments: ["png", "webp"])
    func packAndUnpackRoundTrip(format: String) throws {
        let scratch = try Scratch("roundtrip-\(format)")
        defer { scratch.cleanUp() }
        let input = scratch.path("scan.png")
        try CutCommandTests.makeImage(input, width: 1300, height: 900, bands: 3, scratch: scratch)
        let tiler = try tilerBinary()
        let first = scratch.path("first"), second = scratch.path("second")
        #expect(try run(tiler, ["cut", input, "-o", first, "--format", format, "--quiet"]).status == 0)

        let packed = try run(tiler, ["pack", "\(first)/scan", "--json"])
        #expect(packed.status == 0 && packed.stderr.isEmpty, "\(packed.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(packed.stdout.utf8)) as? [String: Any])
        #expect(summary["succeeded"] as? Int == 1 && summary["failed"] as? Int == 0)
        let report = try #require((summary["pyramids"] as? [[String: Any]])?.first)
        #expect(report["output"] as? String == "\(first)/scan.pmtiles" && report["id"] as? String == "scan")
        let archiveSize = try #require(try FileManager.default.attributesOfItem(atPath: "\(first)/scan.pmtiles")[.size] as? Int)
        #expect(report["bytes"] as? Int == archiveSize)
        let check = try Self.checkWithPMTilesReader("\(first)/scan.pmtiles", against: "\(first)/scan")
        #expect(check.status == 0, "\(check.stderr)")
        // pack reads the tiles in tile-id order: the archive is clustered.
        let figures = try #require(try JSONSerialization.jsonObject(with: Data(check.stdout.utf8)) as? [String: Any])
        #expect(figures["clustered"] as? Bool == true)

        try FileManager.default.createDirectory(atPath: second, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: "\(first)/scan.pmtiles", toPath: "\(second)/scan.pmtiles")
        let unpacked = try run(tiler, ["unpack", "\(second)/scan.pmtiles", "--quiet"])
        #expect(unpacked.status == 0 && unpacked.stdout.isEmpty && unpacked.stderr.isEmpty, "\(unpacked.stderr)")
        #expect(try regularFiles(in: "\(second)/scan") == regularFiles(in: "\(first)/scan"))

        // And back: the unpacked folder packs to the same archive, byte for byte.
        try FileManager.default.removeItem(atPath: "\(second)/scan.pmtiles")
        #expect(try run(tiler, ["pack", "\(second)/scan"]).status == 0)
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: "\(second)/scan.pmtiles"))
                == Data(contentsOf: URL(fileURLWithPath: "\(first)/scan.pmtiles")))
        #expect(Self.entries(second) == ["scan", "scan.pmtiles"])
    }

    /// Missing, truncated, corrupt or misnamed archives: one line naming the file and the
    /// reason, exit 1, and nothing new in ROOT.
    @Test func badArchivesAreRefusedWithOneLine() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try CutCommandTests.makeImage(input, width: 900, height: 700, bands: 3, scratch: scratch)
        let tiler = try tilerBinary()
        let source = scratch.path("source")
        #expect(try run(tiler, ["cut", input, "-o", source, "--archive", "--quiet"]).status == 0)
        let good = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(source)/photo.pmtiles")))
        let root = scratch.path("bad")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        func write(_ name: String, _ bytes: [UInt8]) throws -> String {
            let path = "\(root)/\(name).pmtiles"
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return path
        }
        var rootDamaged = good
        rootDamaged[127 + 20] ^= 0xFF
        var tileLengthLie = good
        tileLengthLie.replaceSubrange(64..<72, with: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0])
        let cases: [(path: String, reason: String)] = [
            ("\(root)/gone.pmtiles", "no such file"),
            (try write("empty", []), "truncated archive"),
            (try write("text", Array("not an archive at all".utf8)), "not a PMTiles archive"),
            (try write("header", Array(good.prefix(127))), "truncated archive"),
            (try write("half", Array(good.prefix(good.count / 2))), "truncated archive"),
            (try write("short", Array(good.dropLast())), "truncated archive"),
            (try write("rootdamage", rootDamaged), "corrupt archive"),
            (try write("lengthlie", tileLengthLie), "truncated archive"),
            (try write("misnamed", good).replacingOccurrences(of: ".pmtiles", with: ".bin"), "named ID.pmtiles"),
        ]
        try FileManager.default.moveItem(atPath: "\(root)/misnamed.pmtiles", toPath: "\(root)/misnamed.bin")
        let before = Self.entries(root)
        for (path, reason) in cases {
            let result = try run(tiler, ["unpack", path])
            #expect(result.status == 1, "\(path): exit \(result.status)")
            #expect(result.stderr.hasPrefix("tiler: unpack: \(path): ") && result.stderr.contains(reason), "\(path): \(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
        }
        #expect(Self.entries(root) == before, "left behind: \(Set(Self.entries(root)).subtracting(before))")
    }

    @Test func badFoldersAreRefusedWithOneLine() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try CutCommandTests.makeImage(input, width: 700, height: 500, bands: 3, scratch: scratch)
        let tiler = try tilerBinary()
        let root = scratch.path("tiles")
        for id in ["whole", "notile", "nomanifest"] {
            #expect(try run(tiler, ["cut", input, "-o", root, "--name", id, "--format", "png", "--quiet"]).status == 0)
        }
        try FileManager.default.removeItem(atPath: "\(root)/notile/2/1/1.png")
        try FileManager.default.removeItem(atPath: "\(root)/nomanifest/pyramid.json")
        let result = try run(tiler, ["pack", "\(root)/notile", "\(root)/gone", "\(root)/nomanifest", "\(root)/whole", "--json"])
        #expect(result.status == 1)
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(result.stderr)")
        #expect(lines.contains { $0.hasPrefix("tiler: pack: \(root)/notile/2/1/1.png: missing tile") }, "\(result.stderr)")
        #expect(lines.contains { $0.hasPrefix("tiler: pack: \(root)/gone: no such folder") }, "\(result.stderr)")
        #expect(lines.contains { $0.hasPrefix("tiler: pack: \(root)/nomanifest/pyramid.json: no pyramid.json") }, "\(result.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(summary["succeeded"] as? Int == 1 && summary["failed"] as? Int == 3)
        #expect(Self.entries(root) == ["nomanifest", "notile", "whole", "whole.pmtiles"])
    }

    /// `pack` reads a folder as the server does: a symbolic link where a tile, a row or
    /// level folder, the thumbnail, the manifest or the pyramid folder itself should be
    /// is refused with one line naming it, and no archive is written. Before, pack
    /// followed every link: a tile linked to a file outside the pyramid was packed with
    /// that file's bytes (then served as the tile, unpacked, or uploaded), though
    /// `verify` and the server refuse the same folder.
    @Test func packRefusesSymbolicLinksAsTheServerDoes() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try CutCommandTests.makeImage(input, width: 700, height: 500, bands: 3, scratch: scratch)
        let tiler = try tilerBinary()
        let root = scratch.path("tiles"), elsewhere = scratch.path("elsewhere")
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        let cases: [(id: String, link: String)] = [
            ("tile", "2/1/1.png"), ("row", "2/1"), ("level", "1"), ("thumb", "thumbnail.png"),
            ("manifest", "pyramid.json"), ("folder", ""),
        ]
        for (id, _) in cases {
            #expect(try run(tiler, ["cut", input, "-o", root, "--name", id, "--format", "png", "--quiet"]).status == 0)
        }
        // A secret outside the pyramid, shaped like a tile so that only the link gives it
        // away (a real PNG of the same size).
        let secret = "\(elsewhere)/secret.png"
        try FileManager.default.copyItem(atPath: "\(root)/tile/2/0/0.png", toPath: secret)
        for (id, link) in cases {
            // The real thing moves elsewhere; a link to it takes its place.
            let path = link.isEmpty ? "\(root)/\(id)" : "\(root)/\(id)/\(link)"
            let target = link == "2/1/1.png" || link == "thumbnail.png" ? secret : "\(elsewhere)/\(id)"
            if target == secret {
                try FileManager.default.removeItem(atPath: path)
            } else {
                try FileManager.default.moveItem(atPath: path, toPath: target)
            }
            try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: target)
        }
        for (id, link) in cases {
            let path = link.isEmpty ? "\(root)/\(id)" : "\(root)/\(id)/\(link)"
            let result = try run(tiler, ["pack", "\(root)/\(id)"])
            #expect(result.status == 1, "\(id): exit \(result.status), \(result.stdout)")
            #expect(
                result.stderr == "tiler: pack: \(path): is a symbolic link, which the server never follows; not read\n",
                "\(id): \(result.stderr)")
            #expect(result.stdout.isEmpty, "\(id): \(result.stdout)")
        }
        // Nothing was written: no archive, no staged leftover.
        #expect(Self.entries(root) == cases.map(\.id).sorted(), "ROOT holds \(Self.entries(root))")
        // The same folder with the link replaced by the file packs again.
        try FileManager.default.removeItem(atPath: "\(root)/tile/2/1/1.png")
        try FileManager.default.copyItem(atPath: secret, toPath: "\(root)/tile/2/1/1.png")
        let packed = try run(tiler, ["pack", "\(root)/tile"])
        #expect(packed.status == 0 && packed.stderr.isEmpty, "\(packed.stderr)")
        #expect(FileManager.default.fileExists(atPath: "\(root)/tile.pmtiles"))
    }

    /// An existing archive or folder is kept unless `--force`, which replaces it in one
    /// step: `cut --archive`, `pack` and `unpack` alike.
    @Test func existingOutputsNeedForce() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let (small, large) = try Self.smallAndLarge(scratch)
        let tiler = try tilerBinary()
        let root = scratch.path("tiles")
        #expect(try run(tiler, ["cut", small, "-o", root, "--name", "same", "--archive", "--quiet"]).status == 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: "\(root)/same.pmtiles"))

        let refused = try run(tiler, ["cut", large, "-o", root, "--name", "same", "--archive", "--quiet"])
        #expect(
            refused.status == 1 && refused.stderr.contains("\(root)/same.pmtiles") && refused.stderr.contains("--force"),
            "\(refused.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(root)/same.pmtiles")) == before)
        let forced = try run(tiler, ["cut", large, "-o", root, "--name", "same", "--archive", "--force", "--quiet", "--json"])
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(forced.stdout.contains("\"output\" : \"\(root)/same.pmtiles\""), "\(forced.stdout)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(root)/same.pmtiles")) != before)
        #expect(Self.entries(root) == ["same.pmtiles"])

        #expect(try run(tiler, ["unpack", "\(root)/same.pmtiles"]).status == 0)
        let again = try run(tiler, ["unpack", "\(root)/same.pmtiles"])
        #expect(
            again.status == 1 && again.stderr == "tiler: unpack: \(root)/same already exists; use --force to replace it\n",
            "\(again.stderr)")
        #expect(try run(tiler, ["unpack", "\(root)/same.pmtiles", "--force"]).status == 0)
        let repack = try run(tiler, ["pack", "\(root)/same"])
        #expect(repack.status == 1 && repack.stderr.contains("already exists"), "\(repack.stderr)")
        #expect(try run(tiler, ["pack", "\(root)/same", "--force"]).status == 0)
        #expect(Self.entries(root) == ["same", "same.pmtiles"])
    }

    /// The id in the other layout counts as existing: without `--force` a cut is refused
    /// (an archive beside a folder of its id would never be served: the folder wins), and
    /// with it the other layout goes, so the new pyramid is the one served. A folder that
    /// holds no pyramid is not one, and is left alone.
    @Test func anIDInTheOtherLayoutIsReplacedOnlyWithForce() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let (small, large) = try Self.smallAndLarge(scratch)
        let tiler = try tilerBinary()
        let root = scratch.path("tiles")
        let noGrace = ["TILER_RM_GRACE": "0"]
        func width(_ path: String) throws -> Int? {
            let info = try run(tiler, ["info", path, "--json"])
            let object = try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any]
            return (object?["manifest"] as? [String: Any])?["width"] as? Int
        }
        #expect(try run(tiler, ["cut", small, "-o", root, "--name", "same", "--quiet"]).status == 0)

        let refused = try run(tiler, ["cut", large, "-o", root, "--name", "same", "--archive", "--quiet"])
        #expect(
            refused.status == 1 && refused.stderr.contains("already exists at \(root)/same;") && refused.stderr.contains("--force"),
            "\(refused.stderr)")
        #expect(Self.entries(root) == ["same"])
        let archived = try run(
            tiler, ["cut", large, "-o", root, "--name", "same", "--archive", "--force"], environment: noGrace)
        #expect(archived.status == 0, "\(archived.stderr)")
        #expect(archived.stderr.contains("\(root)/same is replaced by \(root)/same.pmtiles and no longer served"), "\(archived.stderr)")
        #expect(Self.entries(root) == ["same.pmtiles"])
        #expect(try width("\(root)/same.pmtiles") == 900)

        let back = try run(tiler, ["cut", small, "-o", root, "--name", "same", "--quiet"])
        #expect(back.status == 1 && back.stderr.contains("already exists at \(root)/same.pmtiles;"), "\(back.stderr)")
        #expect(Self.entries(root) == ["same.pmtiles"])
        let folder = try run(tiler, ["cut", small, "-o", root, "--name", "same", "--force", "--quiet"], environment: noGrace)
        #expect(folder.status == 0, "\(folder.stderr)")
        #expect(Self.entries(root) == ["same"])
        #expect(try width("\(root)/same") == 300)

        try FileManager.default.createDirectory(atPath: "\(root)/notes", withIntermediateDirectories: true)
        #expect(try run(tiler, ["cut", small, "-o", root, "--name", "notes", "--archive", "--quiet"]).status == 0)
        #expect(try run(tiler, ["cut", large, "-o", root, "--name", "notes", "--archive", "--force", "--quiet"]).status == 0)
        #expect(Self.entries(root) == ["notes", "notes.pmtiles", "same"])
    }

    /// Ctrl-C during the grace wait before a replaced folder is deleted ends the wait: the
    /// folder goes at once, the new archive stays, and the cut exits 130 by itself.
    @Test func anInterruptEndsTheGraceWait() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try CutCommandTests.makeImage(input, width: 300, height: 200, bands: 3, scratch: scratch)
        let tiler = try tilerBinary()
        let root = scratch.path("tiles")
        #expect(try run(tiler, ["cut", input, "-o", root, "--quiet"]).status == 0)
        let cut = Process()
        cut.executableURL = URL(fileURLWithPath: tiler)
        cut.arguments = ["cut", input, "-o", root, "--archive", "--force", "--quiet", "--json"]
        cut.environment = ProcessInfo.processInfo.environment.merging(["TILER_RM_GRACE": "60"]) { $1 }
        cut.standardOutput = FileHandle.nullDevice
        cut.standardError = FileHandle.nullDevice
        let started = Date()
        try cut.run()
        // Retired: the archive in place, the folder's manifest hidden.
        let retired = {
            FileManager.default.fileExists(atPath: "\(root)/photo.pmtiles")
                && !FileManager.default.fileExists(atPath: "\(root)/photo/pyramid.json")
        }
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, !retired() { usleep(20_000) }
        #expect(retired(), "ROOT holds \(Self.entries(root))")
        kill(cut.processIdentifier, SIGINT)
        while cut.isRunning, Date() < deadline { usleep(20_000) }
        #expect(!cut.isRunning && Date().timeIntervalSince(started) < 30, "the 60 s wait was not cut short")
        if cut.isRunning { kill(cut.processIdentifier, SIGKILL) }
        cut.waitUntilExit()
        #expect(cut.terminationReason == .exit && cut.terminationStatus == 128 + SIGINT)
        #expect(Self.entries(root) == ["photo.pmtiles"])
    }

    /// An interrupted `cut --archive` leaves nothing; one killed outright leaves only a
    /// hidden partial file, which the next cut of the same id removes.
    @Test(arguments: [SIGINT, SIGKILL])
    func interruptedArchiveCutLeavesNothingThatLooksComplete(signal: Int32) throws {
        let scratch = try Scratch("interrupted-archive-\(signal)")
        defer { scratch.cleanUp() }
        let input = scratch.path("big.v")
        try vips("gaussnoise", scratch.path("big-f.v"), "5000", "5000")
        try vips("cast", scratch.path("big-f.v"), input, "uchar")
        let root = scratch.path("tiles")
        let cut = Process()
        cut.executableURL = URL(fileURLWithPath: try tilerBinary())
        cut.arguments = ["cut", input, "-o", root, "--archive", "--quiet"]
        cut.standardError = FileHandle.nullDevice
        try cut.run()
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, !Self.entries(root).contains(where: { $0.hasPrefix(".big.pmtiles.partial-") }) {
            usleep(20_000)
        }
        #expect(Self.entries(root).contains { $0.hasPrefix(".big.pmtiles.partial-") }, "ROOT holds \(Self.entries(root))")
        kill(cut.processIdentifier, signal)
        cut.waitUntilExit()
        if signal == SIGINT {
            #expect(cut.terminationReason == .exit && cut.terminationStatus == 128 + SIGINT)
            #expect(Self.entries(root).isEmpty, "left behind: \(Self.entries(root))")
        } else {
            let left = Self.entries(root)
            #expect(left.count == 1 && left[0].hasPrefix(".big.pmtiles.partial-"), "left behind: \(left)")
        }
        let again = try run(try tilerBinary(), ["cut", input, "-o", root, "--archive", "--quiet"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(Self.entries(root) == ["big.pmtiles"], "ROOT holds \(Self.entries(root))")
    }
}

extension ArchiveCommandTests {
    /// Archives, and what pack and unpack write, get the modes the umask gives, as cut
    /// folders do (`CutInputTests.foldersAndFilesFollowTheUmask`).
    @Test(arguments: [
        (mask: "022", folder: 0o755, file: 0o644), (mask: "002", folder: 0o775, file: 0o664),
        (mask: "077", folder: 0o700, file: 0o600),
    ])
    func archivesAndConversionsFollowTheUmask(mask: String, folder: Int, file: Int) throws {
        let scratch = try Scratch("archive-umask\(mask)")
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try CutCommandTests.makeImage(input, width: 300, height: 300, bands: 3, scratch: scratch)
        let root = scratch.path("tiles")
        func tiler(_ arguments: String...) throws {
            let script = "umask \(mask); exec \"$0\" \"$@\""
            let result = try run("/bin/sh", ["-c", script, try tilerBinary()] + arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
        }
        try tiler("cut", input, "-o", root, "--format", "png", "--quiet")
        try tiler("cut", input, "-o", root, "--name", "a", "--archive", "--format", "png", "--quiet")
        try tiler("pack", "\(root)/photo")
        try tiler("unpack", "\(root)/a.pmtiles")
        func mode(_ path: String) -> Int {
            var info = stat()
            return stat(path, &info) == 0 ? Int(info.st_mode & 0o7777) : -1
        }
        for name in ["a.pmtiles", "photo.pmtiles"] {
            #expect(mode("\(root)/\(name)") == file, "\(name) is \(String(mode("\(root)/\(name)"), radix: 8))")
        }
        for sub in ["a", "a/0", "a/0/0"] {
            #expect(mode("\(root)/\(sub)") == folder, "\(sub) is \(String(mode("\(root)/\(sub)"), radix: 8))")
        }
        for name in ["a/pyramid.json", "a/thumbnail.png", "a/0/0/0.png"] {
            #expect(mode("\(root)/\(name)") == file, "\(name) is \(String(mode("\(root)/\(name)"), radix: 8))")
        }
    }
}
