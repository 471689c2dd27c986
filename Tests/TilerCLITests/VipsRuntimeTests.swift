import Foundation
import Testing
import TilerCore
import TilerTestSupport

/// The libvips runtime (`Vips.start(for:)` in TilerImaging): every use of libvips in a
/// process (cutting, verifying, sources, drawing) starts it the same way, whichever comes
/// first.
@Suite struct VipsRuntimeTests {
    /// A server that only draws (IIIF regions from a cut pyramid: no `--sources`, nothing
    /// cut in the process) keeps libvips' warnings off stderr, as `tiler cut` does, and
    /// `TILER_VIPS_WARNINGS=1` shows them. Before, the region renderer started libvips on a
    /// path of its own without the cutter's settings, and a drawing over a damaged tile
    /// wrote libvips' warnings (one per damaged row) to the server's stderr. The region is
    /// turned by 45°, which libvips draws (PNG tiles turned by quarter turns are decoded by
    /// libpng, without libvips: `TileDrawing`).
    @Test func drawingServerKeepsLibvipsWarningsOffStderr() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let tiler = try tilerBinary()
        let input = scratch.path("photo.v")
        try vips("gaussnoise", scratch.path("noise.v"), "600", "400")
        try vips("cast", scratch.path("noise.v"), input, "uchar")
        let root = scratch.url.appendingPathComponent("tiles")
        let cut = try run(tiler, ["cut", input, "--format", "png", "-o", root.path, "--quiet"])
        try #require(cut.status == 0, "\(cut.stderr)")
        // A tile of the finest level with its first and last 100 bytes kept and garbage
        // between: it passes the server's cheap completeness check, and libpng warns
        // about its rows as libvips decodes it.
        let geometry = try PyramidGeometry(width: 600, height: 400, tileSize: 256)
        let tile = root.appendingPathComponent("photo/\(geometry.maxLevel)/0/0.png")
        var bytes = [UInt8](try Data(contentsOf: tile))
        for i in 100..<(bytes.count - 100) { bytes[i] = UInt8(truncatingIfNeeded: i &* 31) }
        try Data(bytes).write(to: tile)

        /// What the server wrote to stderr while drawing a region over that tile.
        func stderrOfADrawing(_ environment: [String: String]) throws -> String {
            let server = try ServeProcess([root.path, "--port", "0"], environment: environment)
            let drawn = Result { try fetch(server.port, "/iiif/3/photo/0,0,300,300/max/45/default.png") }
            let text = server.stop()
            _ = try drawn.get()
            return text
        }
        let quiet = try stderrOfADrawing([:])
        #expect(!quiet.contains("VIPS-WARNING"), "\(quiet.prefix(400))")
        // The damaged tile does make libvips warn: the check above can fail.
        let shown = try stderrOfADrawing(["TILER_VIPS_WARNINGS": "1"])
        #expect(shown.contains("VIPS-WARNING"), "\(shown.prefix(400))")
    }
}
