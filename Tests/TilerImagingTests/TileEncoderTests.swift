import Foundation
import Testing
import TilerCore
import TilerTestSupport
@testable import TilerImaging

/// A photo-like test picture: smooth gradients, edges and fine texture, so that the
/// lossy encoders have real work (chroma, high frequencies) and flat areas alike.
private func picture(width: Int, height: Int, bands: Int, seed: Int = 1) -> [UInt8] {
    var pixels = [UInt8](repeating: 0, count: width * height * bands)
    var state = UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15 | 1
    for y in 0..<height {
        for x in 0..<width {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            let noise = Int(state % 24)
            for band in 0..<bands {
                let wave = 128 + Int(100 * sin(Double(x * (band + 1)) / 11 + Double(y) / 17))
                let edge = (x / 37 + y / 29 + band) % 3 == 0 ? 60 : 0
                let value = band == 3 ? 255 - (x * 255 / max(1, width - 1)) : wave + edge + noise - 40
                pixels[(y * width + x) * bands + band] = UInt8(clamping: value)
            }
        }
    }
    return pixels
}

/// The bytes `vips jpegsave`/`vips webpsave` write for these pixels with `--Q quality
/// --strip` (the source handed over losslessly as a PNG).
private func libvipsBytes(
    _ format: TileFormat, quality: Int, pixels: [UInt8], width: Int, height: Int, bands: Int,
    in scratch: Scratch
) throws -> [UInt8] {
    let source = scratch.path("source-\(width)x\(height)x\(bands).png")
    try Data(try PNGEncoder().encode(pixels, width: width, height: height, bands: bands)).write(to: URL(fileURLWithPath: source))
    let output = scratch.path("vips-\(quality).\(format.fileExtension)")
    try runVips([format == .jpeg ? "jpegsave" : "webpsave", source, output, "--Q", "\(quality)", "--strip"])
    return Array(try Data(contentsOf: URL(fileURLWithPath: output)))
}

private func tilerBytes(_ encoder: TileEncoder, pixels: [UInt8], width: Int, height: Int, bands: Int) throws -> [UInt8] {
    try pixels.withUnsafeBufferPointer { buffer in
        try encoder.withEncoded(
            pixels: buffer.baseAddress!, stride: width * bands, width: width, height: height,
            bands: bands
        ) { Array($0.bindMemory(to: UInt8.self)) }
    }
}

/// The chunks of a RIFF WebP file, in order: four-character name and payload.
private struct RIFFChunk: Equatable {
    let name: String
    let payload: [UInt8]
}

private func riffChunks(_ bytes: [UInt8]) throws -> [RIFFChunk] {
    func le32(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24 }
    guard bytes.count >= 12, bytes[0..<4].elementsEqual("RIFF".utf8), bytes[8..<12].elementsEqual("WEBP".utf8),
        le32(4) == bytes.count - 8
    else { throw ImagingError.encoding("not a RIFF WebP file of \(bytes.count) bytes") }
    var chunks: [RIFFChunk] = []
    var at = 12
    while at + 8 <= bytes.count {
        let size = le32(at + 4)
        guard at + 8 + size <= bytes.count else { throw ImagingError.encoding("chunk at \(at) runs past the end") }
        chunks.append(
            RIFFChunk(
                name: String(decoding: bytes[at..<(at + 4)], as: UTF8.self),
                payload: Array(bytes[(at + 8)..<(at + 8 + size)])))
        at += 8 + size + size % 2
    }
    guard at == bytes.count else { throw ImagingError.encoding("\(bytes.count - at) bytes after the last chunk") }
    return chunks
}

@Suite struct TileEncoderTests {
    /// JPEG tiles are what `vips jpegsave --Q Q --strip` writes, byte for byte: the same
    /// quantisation, the same chroma subsampling (4:2:0 below Q 90, none from 90), no
    /// JFIF header, so tile pixels are those of the libvips encoder.
    @Test(arguments: [1, 3])
    func jpegTilesAreTheBytesOfLibvipsJpegsave(bands: Int) throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        for (width, height) in [(256, 256), (37, 23), (1, 1), (256, 9)] {
            let pixels = picture(width: width, height: height, bands: bands)
            for quality in [1, 50, 85, 89, 90, 100] {
                let ours = try tilerBytes(
                    TileEncoder(format: .jpeg, quality: quality), pixels: pixels, width: width,
                    height: height, bands: bands)
                let theirs = try libvipsBytes(
                    .jpeg, quality: quality, pixels: pixels, width: width, height: height,
                    bands: bands, in: scratch)
                let same = ours == theirs
                #expect(same, "JPEG \(width)×\(height)×\(bands) Q\(quality): \(ours.count) vs \(theirs.count) bytes")
            }
        }
    }

    /// WebP tiles hold the image chunks `vips webpsave --Q Q --strip` writes (the VP8
    /// bitstream and the ALPH alpha chunk), byte for byte, with and without alpha and for
    /// grey (written as RGB by both); and nothing else: libvips 8.14 adds an EXIF chunk
    /// (and the VP8X header that allows it) to every file even with strip.
    @Test(arguments: [1, 2, 3, 4])
    func webpTilesAreTheImageOfLibvipsWebpsave(bands: Int) throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        for (width, height) in [(256, 256), (37, 23), (1, 1)] {
            let pixels = picture(width: width, height: height, bands: bands)
            for quality in [0, 50, 80, 100] {
                let ours = try tilerBytes(
                    TileEncoder(format: .webp, quality: quality), pixels: pixels, width: width,
                    height: height, bands: bands)
                let theirs = try libvipsBytes(
                    .webp, quality: quality, pixels: pixels, width: width, height: height,
                    bands: bands, in: scratch)
                let what = "WebP \(width)×\(height)×\(bands) Q\(quality)"
                let ourChunks = try riffChunks(ours), theirChunks = try riffChunks(theirs)
                let image = ourChunks.filter { $0.name != "VP8X" }
                let same = image == theirChunks.filter { !["VP8X", "EXIF"].contains($0.name) }
                #expect(same, "\(what): \(ourChunks.map(\.name)) vs \(theirChunks.map(\.name))")
                #expect(Set(ourChunks.map(\.name)).isSubset(of: ["VP8X", "ALPH", "VP8 "]), "\(what): \(ourChunks.map(\.name))")
            }
        }
    }

    /// A tile inside a wider strip is encoded through the stride, as if it had been cut out.
    @Test(arguments: [TileFormat.jpeg, .webp, .png])
    func encodesATileInsideAWiderStrip(format: TileFormat) throws {
        let stripWidth = 700, height = 256, bands = 3
        let strip = picture(width: stripWidth, height: height, bands: bands, seed: 7)
        let x = 512, width = 188
        var cut: [UInt8] = []
        for y in 0..<height { cut += strip[((y * stripWidth + x) * bands)..<((y * stripWidth + x + width) * bands)] }
        let encoder = TileEncoder(format: format)
        let inPlace = try strip.withUnsafeBufferPointer { buffer in
            try encoder.withEncoded(
                pixels: buffer.baseAddress! + x * bands, stride: stripWidth * bands, width: width,
                height: height, bands: bands
            ) { Array($0.bindMemory(to: UInt8.self)) }
        }
        #expect(inPlace == (try tilerBytes(encoder, pixels: cut, width: width, height: height, bands: bands)))
    }

    @Test func refusesWhatTheFormatCannotHold() {
        let pixels = [UInt8](repeating: 0, count: 4 * 4 * 4)
        // JPEG tiles never carry alpha: the cutter flattens it first.
        #expect(throws: ImagingError.self) { try tilerBytes(TileEncoder(format: .jpeg), pixels: pixels, width: 4, height: 4, bands: 4) }
        #expect(throws: ImagingError.self) { try tilerBytes(TileEncoder(format: .webp), pixels: pixels, width: 2, height: 2, bands: 5) }
    }
}
