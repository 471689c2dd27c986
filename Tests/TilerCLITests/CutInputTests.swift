import Foundation
import Testing
import TilerCore
import TilerTestSupport

/// What `tiler cut` accepts as input and how it opens it: a pixel limit, truncated and
/// corrupt data, vector formats, files that are not regular files, names that look like
/// libvips options, signals while libvips is busy, and the modes of what it writes.
/// Each is a defect found by a hostile-input campaign (issue 11, items 6, 7, 8 and 13).
@Suite(.serialized) struct CutInputTests {
    /// A small real JPEG whose frame header is patched to claim `side × side`: a few
    /// hundred bytes that decode into gigapixels of grey filler if nothing stops them.
    static func bombJPEG(_ path: String, side: Int, scratch: Scratch) throws {
        try vips("black", scratch.path("bomb-small.v"), "16", "16")
        try vips("jpegsave", scratch.path("bomb-small.v"), scratch.path("bomb-small.jpg"), "--strip")
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: scratch.path("bomb-small.jpg"))))
        let sof = try #require((0..<(bytes.count - 1)).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xC0 })
        // SOF0: FF C0, length (2), precision (1), height (2), width (2).
        for offset in [sof + 5, sof + 7] {
            bytes[offset] = UInt8(side >> 8)
            bytes[offset + 1] = UInt8(side & 0xFF)
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// Runs `tiler` and waits at most `deadline` seconds for it (a guard against a hang,
    /// not a timing assertion); a process still running then is killed and reported.
    static func runGuarded(
        _ arguments: [String], deadline: Double = 60,
        whileRunning: (pid_t) -> Void = { _ in }
    ) throws -> (status: Int32?, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try tilerBinary())
        process.arguments = arguments
        let errPath = FileManager.default.temporaryDirectory.appendingPathComponent("tiler-guarded-\(UUID().uuidString)")
        try #require(FileManager.default.createFile(atPath: errPath.path, contents: nil))
        defer { try? FileManager.default.removeItem(at: errPath) }
        process.standardError = try FileHandle(forWritingTo: errPath)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        whileRunning(process.processIdentifier)
        let end = Date().addingTimeInterval(deadline)
        while process.isRunning, Date() < end { usleep(20_000) }
        let stderr = (try? String(contentsOf: errPath, encoding: .utf8)) ?? ""
        guard !process.isRunning else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return (nil, stderr)
        }
        return (process.terminationStatus, stderr)
    }

    // MARK: item 6: pixel limit, truncated data, vector inputs

    @Test func aBombHeaderIsRefusedByThePixelLimitBeforeDecoding() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let bomb = scratch.path("bomb.jpg")
        try Self.bombJPEG(bomb, side: 65500, scratch: scratch)
        let root = scratch.url.appendingPathComponent("tiles")
        let result = try runMeasured(try tilerBinary(), ["cut", bomb, "--format", "png", "-o", root.path, "--quiet"])
        #expect(result.status == 1)
        #expect(
            result.stderr
                == "tiler: cut: \(bomb): is 65500×65500 = 4290250000 pixels, more than --max-pixels 2000000000 (a decompression bomb, or a real image that needs a larger --max-pixels)\n",
            "\(result.stderr)")
        #expect(result.maximumResidentKB < 256 * 1024, "peak RSS \(result.maximumResidentKB) KiB")
        #expect(CutFailureTests.entries(root).isEmpty, "left behind: \(CutFailureTests.entries(root))")
    }

    /// Past the limit, the same file is still refused: its scan data ends long before the
    /// frame does, which libjpeg only warns about (and pads with grey).
    @Test func aJPEGWhoseScanDataEndsEarlyIsRefused() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let bomb = scratch.path("bomb.jpg")
        try Self.bombJPEG(bomb, side: 65500, scratch: scratch)
        let root = scratch.url.appendingPathComponent("tiles")
        let result = try runMeasured(
            try tilerBinary(), ["cut", bomb, "--format", "png", "-o", root.path, "--quiet", "--max-pixels", "5000000000"])
        #expect(result.status == 1)
        #expect(
            result.stderr.hasPrefix(
                "tiler: cut: \(bomb): corrupt or truncated image (VipsJpeg: Corrupt JPEG data: premature end of data segment"),
            "\(result.stderr)")
        #expect(result.maximumResidentKB < 512 * 1024, "peak RSS \(result.maximumResidentKB) KiB")
        #expect(CutFailureTests.entries(root).isEmpty, "left behind: \(CutFailureTests.entries(root))")

        // A real photo whose entropy-coded data is cut in the middle, with the end marker
        // kept (so the file is not short, its scan is).
        let whole = scratch.path("whole.jpg")
        try CutCommandTests.makeImage(whole, width: 900, height: 700, bands: 3, scratch: scratch)
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: whole)))
        let cut = scratch.path("short-scan.jpg")
        try Data(bytes.prefix(bytes.count / 2) + [0xFF, 0xD9]).write(to: URL(fileURLWithPath: cut))
        let short = try run(try tilerBinary(), ["cut", cut, "--format", "png", "-o", root.path, "--quiet"])
        #expect(short.status == 1)
        #expect(short.stderr.hasPrefix("tiler: cut: \(cut): corrupt or truncated image"), "\(short.stderr)")
        #expect(CutFailureTests.entries(root).isEmpty, "left behind: \(CutFailureTests.entries(root))")
    }

    @Test func maxPixelsComesFromTheFlagThenTheEnvironment() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try CutCommandTests.makeImage(input, width: 300, height: 200, bands: 3, scratch: scratch)
        let root = scratch.url.appendingPathComponent("tiles")
        let tiler = try tilerBinary()
        let limited = try run(
            "/usr/bin/env", ["TILER_MAX_PIXELS=59999", tiler, "cut", input, "--format", "png", "-o", root.path, "--quiet"])
        #expect(limited.status == 1 && limited.stderr.contains("more than --max-pixels 59999"), "\(limited.stderr)")
        let flag = try run(
            "/usr/bin/env",
            [
                "TILER_MAX_PIXELS=59999", tiler, "cut", input, "--format", "png", "-o", root.path, "--quiet",
                "--max-pixels", "60000",
            ])
        #expect(flag.status == 0, "\(flag.stderr)")
        #expect(try run(tiler, ["cut", input, "--format", "png", "-o", root.path, "--max-pixels", "0", "--force"]).status == 64)
        #expect(
            try run("/usr/bin/env", ["TILER_MAX_PIXELS=lots", tiler, "cut", input, "--format", "png", "-o", root.path, "--force"]).status
                == 64)
    }

    /// An SVG that references a picture next to it, a PDF-sized claim, and the opt-in.
    @Test func vectorInputsAreRefusedUnlessAllowedAndSVGNeverReadsOtherFiles() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        // A white "secret" beside the SVG, which draws it over its whole canvas.
        try vips("black", scratch.path("s.v"), "64", "64")
        try vips("linear", scratch.path("s.v"), scratch.path("s2.v"), "1", "255")
        try vips("cast", scratch.path("s2.v"), scratch.path("secret.png"), "uchar")
        let svg = scratch.path("drawing.svg")
        try Data(
            """
            <svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="64" height="64">\
            <image href="secret.png" xlink:href="secret.png" width="64" height="64"/></svg>
            """.utf8
        ).write(to: URL(fileURLWithPath: svg))
        // libvips opening the SVG by name does embed the secret: the check below can fail.
        let embedded = scratch.path("embedded.v")
        try vips("copy", svg, embedded)
        let embeds = try Raster(vFile: embedded).pixels.contains(255)
        #expect(embeds, "the reference render did not embed the sibling file")

        let root = scratch.url.appendingPathComponent("tiles")
        let refused = try run(try tilerBinary(), ["cut", svg, "--format", "png", "-o", root.path, "--quiet"])
        #expect(refused.status == 1)
        #expect(
            refused.stderr.hasPrefix(
                "tiler: cut: \(svg): is a vector image (svgload_source); vector inputs are refused unless --allow-vector"),
            "\(refused.stderr)")
        #expect(CutFailureTests.entries(root).isEmpty)

        let allowed = try run(try tilerBinary(), ["cut", svg, "--format", "png", "-o", root.path, "--quiet", "--allow-vector"])
        #expect(allowed.status == 0, "\(allowed.stderr)")
        let tile = try Raster.read(root.appendingPathComponent("drawing/0/0/0.png").path, scratch: scratch)
        #expect((tile.width, tile.height, tile.bands) == (64, 64, 4))
        let blank = tile.pixels.allSatisfy { $0 == 0 }
        #expect(blank, "the SVG's external image was read into the tiles")

        // A 120-byte SVG claiming 100000 × 100000: refused by the pixel limit, even allowed.
        let huge = scratch.path("huge.svg")
        try Data(
            #"<svg xmlns="http://www.w3.org/2000/svg" width="100000" height="100000"><rect width="100000" height="100000" fill="red"/></svg>"#
                .utf8
        )
        .write(to: URL(fileURLWithPath: huge))
        let bomb = try runMeasured(try tilerBinary(), ["cut", huge, "--format", "png", "-o", root.path, "--quiet", "--allow-vector"])
        #expect(bomb.status == 1 && bomb.stderr.contains("is 100000×100000 = 10000000000 pixels, more than --max-pixels"), "\(bomb.stderr)")
        #expect(bomb.maximumResidentKB < 256 * 1024, "peak RSS \(bomb.maximumResidentKB) KiB")
        #expect(CutFailureTests.entries(root) == ["drawing"])
    }

    // MARK: item 7: regular files only; signals at any stage

    @Test func onlyRegularFilesAreCut() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let fifo = scratch.path("pipe.png")
        #expect(mkfifo(fifo, 0o600) == 0)
        let good = scratch.path("good.png")
        try CutCommandTests.makeImage(good, width: 300, height: 200, bands: 3, scratch: scratch)
        let root = scratch.url.appendingPathComponent("tiles")
        let result = try Self.runGuarded(["cut", "/dev/zero", "--format", "png", fifo, "/dev/null", good, "-o", root.path, "--quiet"])
        let status = try #require(result.status, "tiler cut never finished with /dev/zero and a FIFO among its inputs")
        #expect(status == 1)
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(
            lines == [
                "tiler: cut: /dev/zero: is a character device, not a regular file; tiler cuts image files only",
                "tiler: cut: \(fifo): is a FIFO (named pipe), not a regular file; tiler cuts image files only",
                "tiler: cut: /dev/null: is a character device, not a regular file; tiler cuts image files only",
            ], "\(result.stderr)")
        #expect(CutFailureTests.entries(root) == ["good"])
    }

    /// Stuck inside one libvips call, where the cut cannot poll for the signal: a PGM
    /// header whose comment runs on through a terabyte of (sparse) zeros, and a
    /// progressive JPEG that libjpeg reads whole before its first row, with a terabyte
    /// of zeros between two scans. SIGTERM still ends the process, with nothing left.
    @Test(arguments: ["header", "decode"])
    func sigtermStopsACutStuckInsideLibvips(stage: String) throws {
        let scratch = try Scratch("stuck-\(stage)")
        defer { scratch.cleanUp() }
        let input: String
        var bytes: [UInt8], tail: [UInt8] = []
        if stage == "header" {
            input = scratch.path("stuck.pgm")
            bytes = Array("P5\n#".utf8)
        } else {
            input = scratch.path("stuck.jpg")
            try vips("gaussnoise", scratch.path("g.v"), "64", "64")
            try vips("cast", scratch.path("g.v"), scratch.path("g8.v"), "uchar")
            try vips("jpegsave", scratch.path("g8.v"), scratch.path("p.jpg"), "--interlace", "--strip")
            let jpeg = [UInt8](try Data(contentsOf: URL(fileURLWithPath: scratch.path("p.jpg"))))
            let scans = (0..<(jpeg.count - 1)).filter { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDA }
            try #require(scans.count >= 2, "not a progressive JPEG")
            bytes = Array(jpeg[..<scans[1]])
            tail = Array(jpeg[scans[1]...])
        }
        // A sparse file: the hole reads as zeros and takes no disk.
        let fd = open(input, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        #expect(write(fd, bytes, bytes.count) == bytes.count)
        #expect(lseek(fd, 1 << 40, SEEK_CUR) > 0)
        #expect(ftruncate(fd, off_t(bytes.count + (1 << 40))) == 0)
        if !tail.isEmpty { #expect(pwrite(fd, tail, tail.count, off_t(bytes.count + (1 << 40))) == tail.count) }
        close(fd)

        let root = scratch.url.appendingPathComponent("tiles")
        let result = try Self.runGuarded(["cut", input, "--format", "png", "-o", root.path, "--quiet"], deadline: 60) { pid in
            if stage == "decode" {
                // The header is read and the partial folder made: decoding has begun.
                #expect(
                    eventually(within: 60) { CutFailureTests.entries(root).contains { $0.hasPrefix(".stuck.partial-") } },
                    "the cut never reached the decode stage")
            } else {
                // Wait until the process has opened the input (it is reading the header).
                #expect(
                    eventually(within: 60) {
                        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).contains {
                            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")) == input
                        }
                    }, "the cut never opened its input")
            }
            kill(pid, SIGTERM)
        }
        let status = try #require(
            result.status, "tiler cut ignored SIGTERM while libvips was \(stage == "header" ? "reading the header" : "decoding")")
        #expect(status == 128 + SIGTERM, "\(result.stderr)")
        #expect(result.stderr.contains("interrupted"), "\(result.stderr)")
        #expect(CutFailureTests.entries(root).isEmpty, "left behind: \(CutFailureTests.entries(root))")
    }

    // MARK: item 8: names are names

    @Test func fileNamesAreNeverParsedAsLibvipsOptions() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let real = scratch.path("t.jpg")
        try CutCommandTests.makeImage(real, width: 600, height: 400, bands: 3, scratch: scratch)
        // The odd name holds another image; the plain name (what option parsing would
        // open) holds this one.
        let odd = scratch.path("t.jpg[shrink=8]")
        try CutCommandTests.makeImage(scratch.path("other.jpg"), width: 520, height: 300, bands: 3, scratch: scratch)
        try FileManager.default.moveItem(atPath: scratch.path("other.jpg"), toPath: odd)
        let root = scratch.url.appendingPathComponent("tiles")
        let result = try run(try tilerBinary(), ["cut", odd, "--format", "png", "-o", root.path, "--quiet", "--name", "odd"])
        #expect(result.status == 0, "\(result.stderr)")
        let manifest = try JSONDecoder().decode(
            PyramidManifest.self, from: Data(contentsOf: root.appendingPathComponent("odd/pyramid.json")))
        #expect((manifest.width, manifest.height) == (520, 300), "cut as \(manifest.width)×\(manifest.height)")
        #expect(manifest.source?.file == "t.jpg[shrink=8]")
        // A name with options and no such file is simply missing.
        let missing = try run(try tilerBinary(), ["cut", scratch.path("photo.png[page=1]"), "-o", root.path, "--quiet"])
        #expect(missing.status == 1 && missing.stderr.hasSuffix("photo.png[page=1]: no such file\n"), "\(missing.stderr)")
    }

    // MARK: item 13: the umask decides the modes

    @Test(arguments: [
        (mask: "022", folder: 0o755, file: 0o644), (mask: "002", folder: 0o775, file: 0o664),
        (mask: "077", folder: 0o700, file: 0o600),
    ])
    func foldersAndFilesFollowTheUmask(mask: String, folder: Int, file: Int) throws {
        let scratch = try Scratch("umask\(mask)")
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try CutCommandTests.makeImage(input, width: 600, height: 300, bands: 3, scratch: scratch)
        let root = scratch.url.appendingPathComponent("tiles")
        let script = "umask \(mask); exec \"$0\" cut \"$1\" -o \"$2\" --format png --quiet"
        let result = try run("/bin/sh", ["-c", script, try tilerBinary(), input, root.path])
        #expect(result.status == 0, "\(result.stderr)")
        let pyramid = root.appendingPathComponent("photo").path
        func mode(_ path: String) -> Int {
            var info = stat()
            return stat(path, &info) == 0 ? Int(info.st_mode & 0o7777) : -1
        }
        #expect(mode(pyramid) == folder, "pyramid folder is \(String(mode(pyramid), radix: 8))")
        for sub in ["0", "0/0", "2/0"] {
            #expect(mode(pyramid + "/" + sub) == folder, "\(sub) is \(String(mode(pyramid + "/" + sub), radix: 8))")
        }
        for name in ["pyramid.json", "thumbnail.png", "0/0/0.png", "2/1/2.png"] {
            #expect(mode(pyramid + "/" + name) == file, "\(name) is \(String(mode(pyramid + "/" + name), radix: 8))")
        }
    }
}
