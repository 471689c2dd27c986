import Foundation
import Testing
import TilerCore
import TilerTestSupport

/// `tiler cut` under failure: killed mid-cut, a full disk, a decompression bomb, truncated
/// files and misleading extensions. Each leaves no pyramid that `tiler serve` would list,
/// and says what went wrong in one line naming the file.
@Suite(.serialized) struct CutFailureTests {
    /// A noise image large enough that a debug cut takes a second or two.
    static func noiseImage(_ path: String, side: Int, scratch: Scratch) throws {
        try vips("gaussnoise", scratch.path("noise-f.v"), "\(side)", "\(side)")
        try vips("cast", scratch.path("noise-f.v"), path, "uchar")
    }

    /// The entries of ROOT (hidden ones included).
    static func entries(_ root: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []).sorted()
    }

    /// Waits until the cut has written at least one tile into its partial folder.
    static func waitForTiles(in root: URL, id: String, timeout: Double = 60) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let partial = entries(root).first(where: { $0.hasPrefix(".\(id).partial-") }),
                let files = FileManager.default.subpaths(atPath: root.appendingPathComponent(partial).path),
                files.contains(where: { $0.hasSuffix(".png") })
            {
                return true
            }
            usleep(10_000)
        }
        return false
    }

    @Test(arguments: [SIGINT, SIGKILL])
    func interruptedCutIsNeverServedAndARerunSucceeds(signal: Int32) throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let input = scratch.path("big.v")
        try Self.noiseImage(input, side: 3000, scratch: scratch)
        let root = scratch.url.appendingPathComponent("tiles")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let server = try ServeProcess([root.path, "--port", "0", "--threads", "1"])
        defer { server.stop() }

        let cut = Process()
        cut.executableURL = URL(fileURLWithPath: try tilerBinary())
        cut.arguments = ["cut", input, "--format", "png", "-o", root.path, "--quiet"]
        cut.standardError = FileHandle.nullDevice
        try cut.run()
        #expect(Self.waitForTiles(in: root, id: "big"), "the cut never started writing tiles")
        kill(cut.processIdentifier, signal)
        cut.waitUntilExit()

        if signal == SIGINT {
            // Caught: the cut removes its partial folder and exits 128 + SIGINT.
            #expect(cut.terminationReason == .exit && cut.terminationStatus == 128 + SIGINT)
            #expect(Self.entries(root).isEmpty, "left behind: \(Self.entries(root))")
        } else {
            // Killed outright: the hidden partial folder stays, and is not a pyramid.
            #expect(cut.terminationReason == .uncaughtSignal && cut.terminationStatus == SIGKILL)
            let left = Self.entries(root)
            #expect(left.count == 1 && left[0].hasPrefix(".big.partial-"), "left behind: \(left)")
            #expect(try fetch(server.port, "/images/\(left[0])").status == 404)
        }
        let list = try fetch(server.port, "/images")
        #expect(list.status == 200 && list.json["total"] as? Int == 0, "listed: \(list.text)")
        #expect(try fetch(server.port, "/images/big").status == 404)
        #expect(try fetch(server.port, "/images/big/tiles/0/0/0.png").status == 404)

        // The same command again succeeds, cleans up the dead cut's folder, and is served.
        let again = try run(try tilerBinary(), ["cut", input, "--format", "png", "-o", root.path, "--quiet"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(Self.entries(root) == ["big"], "ROOT holds \(Self.entries(root))")
        let manifest = try fetch(server.port, "/images/big")
        #expect(manifest.status == 200 && manifest.json["width"] as? Int == 3000, "\(manifest.text)")
        #expect(try fetch(server.port, "/images/big/tiles/4/11/11.png").status == 200)
    }

    /// A 2 MiB tmpfs as ROOT when this process may mount (root in a container with
    /// CAP_SYS_ADMIN); otherwise `ulimit -f` makes the first large write fail with EFBIG,
    /// the same failure path (a write error mid-cut). Folders and archives alike (an
    /// archive's tiles fail in its spool file).
    @Test(arguments: [false, true])
    func fullDiskGivesAClearErrorAndNoPyramid(archive: Bool) throws {
        let scratch = try Scratch("full-disk-\(archive)")
        defer { scratch.cleanUp() }
        let input = scratch.path("noise.v")
        try Self.noiseImage(input, side: 2000, scratch: scratch)  // ≈ 5 MB of PNG tiles
        let root = scratch.url.appendingPathComponent("small-disk")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let mounted = getuid() == 0 && (try? run("/bin/mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", root.path]))?.status == 0
        defer { if mounted { _ = try? run("/bin/umount", [root.path]) } }
        let result: ProcessOutput
        if mounted {
            result = try run(
                try tilerBinary(), ["cut", input, "--format", "png", "-o", root.path, "--quiet"] + (archive ? ["--archive"] : []))
            #expect(result.stderr.contains("No space left on device"), "\(result.stderr)")
        } else {
            // dash's `ulimit -f` counts 512-byte blocks: 32 KiB per file, less than one noise tile.
            let script =
                "trap '' XFSZ; ulimit -f 64; exec \"$0\" cut \"$1\" --format png -o \"$2\" --quiet \(archive ? "--archive" : "")"
            result = try run("/bin/sh", ["-c", script, try tilerBinary(), input, root.path])
            #expect(result.stderr.contains("File too large"), "\(result.stderr)")
        }
        #expect(result.status == 1)
        #expect(result.stderr.hasPrefix("tiler: cut: \(input): cannot write the pyramid"), "\(result.stderr)")
        #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
        #expect(Self.entries(root).isEmpty, "left behind: \(Self.entries(root))")
    }

    /// A PNG whose header claims `width × height` pixels, followed by `rows` rows of zeros
    /// (one compressed IDAT) and IEND, with correct CRCs: a decompression bomb in miniature.
    static func bombPNG(width: Int, height: Int, colourType: UInt8, bytesPerPixel: Int, rows: Int) -> Data {
        func chunk(_ type: String, _ data: Data) -> Data {
            var out = Data()
            out.append(contentsOf: withUnsafeBytes(of: UInt32(data.count).bigEndian, Array.init))
            let body = Data(type.utf8) + data
            out.append(body)
            out.append(contentsOf: withUnsafeBytes(of: crc32(body).bigEndian, Array.init))
            return out
        }
        var ihdr = Data()
        ihdr.append(contentsOf: withUnsafeBytes(of: UInt32(width).bigEndian, Array.init))
        ihdr.append(contentsOf: withUnsafeBytes(of: UInt32(height).bigEndian, Array.init))
        ihdr.append(contentsOf: [8, colourType, 0, 0, 0])
        // Each row: filter byte 0, then zero pixels.
        let idat = zlibZeros(count: (1 + width * bytesPerPixel) * rows)
        return Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) + chunk("IHDR", ihdr)
            + chunk("IDAT", idat) + chunk("IEND", Data())
    }

    @Test(arguments: [(rows: 4, colourType: UInt8(2), bytesPerPixel: 3), (rows: 600, colourType: UInt8(0), bytesPerPixel: 1)])
    func decompressionBombIsRefusedInBoundedMemory(rows: Int, colourType: UInt8, bytesPerPixel: Int) throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let bomb = scratch.path("bomb.png")
        let png = Self.bombPNG(width: 100_000, height: 100_000, colourType: colourType, bytesPerPixel: bytesPerPixel, rows: rows)
        try png.write(to: URL(fileURLWithPath: bomb))
        let root = scratch.url.appendingPathComponent("tiles")
        // Past the pixel limit (CutInputTests), to reach the decoder.
        let result = try runMeasured(
            try tilerBinary(), ["cut", bomb, "--format", "png", "-o", root.path, "--quiet", "--max-pixels", "20000000000"])
        #expect(result.status == 1)
        #expect(result.stderr.hasPrefix("tiler: cut: \(bomb): corrupt or truncated image"), "\(result.stderr)")
        // 100000 × 100000 × 3 bytes would be 30 GB; the cutter streams, so memory follows the width.
        #expect(result.maximumResidentKB < 512 * 1024, "peak RSS \(result.maximumResidentKB) KiB")
        #expect(Self.entries(root).isEmpty, "left behind: \(Self.entries(root))")
    }

    @Test func truncatedPNGIsRefused() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let png = scratch.path("whole.png")
        try Self.noiseImage(scratch.path("n.v"), side: 700, scratch: scratch)
        try vips("copy", scratch.path("n.v"), png)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: png))
        let truncated = scratch.path("cut-short.png")
        try bytes.prefix(bytes.count * 2 / 3).write(to: URL(fileURLWithPath: truncated))
        let root = scratch.url.appendingPathComponent("tiles")
        let result = try run(try tilerBinary(), ["cut", truncated, "--format", "png", "-o", root.path, "--quiet"])
        #expect(result.status == 1)
        #expect(result.stderr.hasPrefix("tiler: cut: \(truncated): corrupt or truncated image"), "\(result.stderr)")
        #expect(Self.entries(root).isEmpty)
    }

    /// The rule: libvips sniffs the content, so the extension never decides the decoder;
    /// it only gives the default id (`photo.jpg` → `photo`).
    @Test func extensionDoesNotDecideTheFormat() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        try Self.noiseImage(scratch.path("n.v"), side: 300, scratch: scratch)
        try vips("copy", scratch.path("n.v"), scratch.path("real.png"))
        try vips("copy", scratch.path("n.v"), scratch.path("real.jpg"))
        try FileManager.default.moveItem(atPath: scratch.path("real.png"), toPath: scratch.path("png-named.jpg"))
        try FileManager.default.moveItem(atPath: scratch.path("real.jpg"), toPath: scratch.path("jpeg-named.tif"))
        let root = scratch.url.appendingPathComponent("tiles")
        let result = try run(
            try tilerBinary(),
            [
                "cut", scratch.path("png-named.jpg"), scratch.path("jpeg-named.tif"),
                "-o", root.path, "--format", "png", "--quiet",
            ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(Self.entries(root) == ["jpeg-named", "png-named"])
        for id in ["jpeg-named", "png-named"] {
            let data = try Data(contentsOf: root.appendingPathComponent("\(id)/pyramid.json"))
            let manifest = try JSONDecoder().decode(PyramidManifest.self, from: data)
            #expect(manifest.width == 300 && manifest.height == 300)
        }
    }
}

// MARK: - Helpers

/// CRC-32 (IEEE), as PNG chunks need.
func crc32(_ data: Data) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in data {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = (crc >> 1) ^ (0xEDB8_8320 & (0 &- (crc & 1))) }
    }
    return ~crc
}

/// A zlib stream of `count` zero bytes: one fixed-Huffman deflate block of a literal 0
/// and then matches of length 258 at distance 1, so a few hundred MB of zeros take a few
/// hundred KB.
func zlibZeros(count: Int) -> Data {
    var out: [UInt8] = [0x78, 0x01]
    var bitBuffer: UInt32 = 0, bitCount = 0
    func put(_ value: UInt32, _ n: Int) {  // LSB first
        bitBuffer |= value << UInt32(bitCount)
        bitCount += n
        while bitCount >= 8 {
            out.append(UInt8(bitBuffer & 0xFF))
            bitBuffer >>= 8
            bitCount -= 8
        }
    }
    func code(_ value: UInt32, _ n: Int) {  // Huffman codes go most significant bit first
        var reversed: UInt32 = 0
        for i in 0..<n where value & (1 << UInt32(i)) != 0 { reversed |= 1 << UInt32(n - 1 - i) }
        put(reversed, n)
    }
    put(1, 1)  // BFINAL
    put(1, 2)  // BTYPE = 01, fixed Huffman
    var left = count
    if left > 0 {
        code(0x30, 8)  // literal 0
        left -= 1
    }
    while left >= 258 {
        code(0xC5, 8)  // length symbol 285 = 258
        code(0, 5)  // distance code 0 = 1
        left -= 258
    }
    for _ in 0..<left { code(0x30, 8) }
    code(0, 7)  // end of block (256)
    if bitCount > 0 { out.append(UInt8(bitBuffer & 0xFF)) }
    let adler = UInt32(count % 65521) << 16 | 1
    out += withUnsafeBytes(of: adler.bigEndian, Array.init)
    return Data(out)
}
