import Foundation
import Testing
import TilerCore
import TilerTestSupport

/// One bound on a tile's size (`PyramidManifest.maximumTileBytes`) for everything that
/// reads tiles: a valid tile of exactly that many bytes is served (from the folder and
/// from its archive), verified and packed; one byte more is refused by each of them.
@Suite struct TileBoundTests {
    @Test func serveVerifyAndPackShareOneBound() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let tiler = try tilerBinary()
        // One band, so that the bound (2 × 256² × 1 + 64 KiB) is well below what any four-band
        // formula would allow.
        try CutCommandTests.makeImage(scratch.path("gray.png"), width: 300, height: 200, bands: 1, scratch: scratch)
        let root = scratch.path("root")
        let cut = try run(tiler, ["cut", scratch.path("gray.png"), "--format", "png", "--output", root, "--quiet"])
        try #require(cut.status == 0, "\(cut.stderr)")
        let manifest = try JSONDecoder().decode(
            PyramidManifest.self,
            from: Data(contentsOf: URL(fileURLWithPath: "\(root)/gray/pyramid.json")))
        #expect(manifest.bands == 1)
        let bound = manifest.maximumTileBytes
        let tilePath = "\(root)/gray/1/0/0.png"
        let original = try [UInt8](Data(contentsOf: URL(fileURLWithPath: tilePath)))

        // Exactly the bound: a whole PNG (padded with a private ancillary chunk that every
        // decoder skips) that everything accepts.
        let largest = try Self.padded(original, to: bound)
        try Data(largest).write(to: URL(fileURLWithPath: tilePath))
        let verified = try run(tiler, ["verify", "\(root)/gray"])
        #expect(verified.status == 0, "a tile of \(bound) bytes: \(verified.stdout) \(verified.stderr)")
        #expect(try Self.served(root, "/images/gray/tiles/1/0/0.png") == (200, largest))
        let packed = try run(tiler, ["pack", "\(root)/gray", "--output", scratch.path("packed")])
        #expect(packed.status == 0, "a tile of \(bound) bytes: \(packed.stderr)")
        #expect(try Self.served(scratch.path("packed"), "/images/gray/tiles/1/0/0.png") == (200, largest))
        let verifiedArchive = try run(tiler, ["verify", scratch.path("packed/gray.pmtiles")])
        #expect(verifiedArchive.status == 0, "\(verifiedArchive.stdout) \(verifiedArchive.stderr)")

        // One byte more: refused by each.
        try Data(try Self.padded(original, to: bound + 1)).write(to: URL(fileURLWithPath: tilePath))
        let refused = try run(tiler, ["verify", "\(root)/gray"])
        #expect(refused.status != 0)
        #expect((refused.stdout + refused.stderr).contains("1/0/0.png"), "\(refused.stdout) \(refused.stderr)")
        let tooLarge = try Self.served(root, "/images/gray/tiles/1/0/0.png")
        #expect(tooLarge.status == 500, "\(tooLarge.status) \(String(decoding: tooLarge.body.prefix(200), as: UTF8.self))")
        let notPacked = try run(tiler, ["pack", "\(root)/gray", "--output", scratch.path("refused")])
        #expect(notPacked.status != 0)
        #expect(notPacked.stderr.contains("1/0/0.png"), "\(notPacked.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scratch.path("refused/gray.pmtiles")))
    }

    /// The status and body of `path` from a server started on `root` for this request
    /// alone (nothing cached from an earlier state of the files).
    static func served(_ root: String, _ path: String) throws -> (status: Int, body: [UInt8]) {
        let server = try ServeProcess([root, "--port", "0", "--threads", "1"])
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.request(path)
        let response = try client.readResponse()
        return (response.status, response.body)
    }

    /// `png` with a private ancillary chunk (`prVt`) inserted before `IEND`, so that the
    /// file is exactly `size` bytes.
    static func padded(_ png: [UInt8], to size: Int) throws -> [UInt8] {
        let iend = png.count - 12  // length, "IEND", CRC
        guard png.count + 12 <= size, Array(png[(iend + 4)..<(iend + 8)]) == Array("IEND".utf8) else {
            throw SupportError(description: "cannot pad a \(png.count)-byte PNG to \(size) bytes")
        }
        let data = [UInt8](repeating: 0, count: size - png.count - 12)
        let typeAndData = Array("prVt".utf8) + data
        var chunk = withUnsafeBytes(of: UInt32(data.count).bigEndian, Array.init)
        chunk += typeAndData
        chunk += withUnsafeBytes(of: crc32(typeAndData).bigEndian, Array.init)
        return Array(png[..<iend]) + chunk + Array(png[iend...])
    }

    /// The CRC-32 of PNG chunks (ISO 3309, reflected, polynomial 0xEDB88320).
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
