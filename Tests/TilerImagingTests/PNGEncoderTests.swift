import Foundation
import Testing
@testable import TilerImaging

/// Decodes a PNG file with libvips: (width, height, bands, pixels).
private func decodeWithVips(_ path: String) throws -> (Int, Int, Int, [UInt8]) {
    let image = try VipsImageHandle.openSequential(path: path)
    return (image.width, image.height, image.bands, try image.pixels())
}

private func temporaryFile(_ name: String) -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("tiler-png-\(getpid())-\(name)").path
}

@Suite struct PNGEncoderTests {
    @Test(arguments: [1, 2, 3, 4])
    func roundTripsThroughLibvips(bands: Int) throws {
        let width = 37, height = 23
        let pixels = (0..<(width * height * bands)).map { UInt8(truncatingIfNeeded: $0 &* 2654435761 >> 7) }
        var settings: [PNGSettings] = []
        for filter in PNGSettings.Filter.allCases {
            for strategy in PNGSettings.Strategy.allCases {
                settings.append(PNGSettings(zlibLevel: 2, filter: filter, strategy: strategy, library: .libpng))
            }
            for level in [0, 1, 6, 9] {
                settings.append(PNGSettings(zlibLevel: level, filter: filter, strategy: .default, library: .libdeflate))
            }
        }
        for setting in settings {
            let encoder = PNGEncoder(settings: setting)
            let path = temporaryFile("\(bands)-\(setting.description.filter { $0.isLetter || $0.isNumber }).png")
            defer { try? FileManager.default.removeItem(atPath: path) }
            try Data(try encoder.encode(pixels, width: width, height: height, bands: bands)).write(to: URL(fileURLWithPath: path))
            let (w, h, b, decoded) = try decodeWithVips(path)
            #expect(w == width && h == height && b == bands)
            #expect(decoded == pixels, "bands \(bands), \(setting)")
        }
    }

    @Test func encodesASubRectangleUsingTheStride() throws {
        // A 10×6 RGB buffer; encode the 4×3 rectangle at (5, 2).
        let fullWidth = 10, bands = 3
        let pixels = (0..<(fullWidth * 6 * bands)).map { UInt8($0 % 251) }
        let path = temporaryFile("stride.png")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try pixels.withUnsafeBufferPointer { buffer in
            try PNGEncoder().withEncoded(
                pixels: buffer.baseAddress! + (2 * fullWidth + 5) * bands, stride: fullWidth * bands,
                width: 4, height: 3, bands: bands
            ) { bytes in
                try Data(bytes).write(to: URL(fileURLWithPath: path))
            }
        }
        var expected: [UInt8] = []
        for y in 2..<5 { expected += pixels[((y * fullWidth + 5) * bands)..<((y * fullWidth + 9) * bands)] }
        let (w, h, b, decoded) = try decodeWithVips(path)
        #expect((w, h, b) == (4, 3, 3))
        #expect(decoded == expected)
    }

    @Test func refusesUnsupportedBandCounts() {
        let pixels = [UInt8](repeating: 0, count: 5 * 2 * 2)
        #expect(throws: ImagingError.self) { try PNGEncoder().encode(pixels, width: 2, height: 2, bands: 5) }
        let libpng = PNGSettings(zlibLevel: 1, filter: .up, strategy: .default, library: .libpng)
        #expect(throws: ImagingError.self) { try PNGEncoder(settings: libpng).encode(pixels, width: 2, height: 2, bands: 5) }
    }

    /// Tiles are PNG files any reader takes: libdeflate's are one IDAT chunk with valid
    /// CRCs (libvips' loader, libspng underneath, checks them) and decode to the pixels of
    /// a large noisy tile and of a 1-pixel one, every filter.
    @Test func libdeflateTilesAreValidPNGFiles() throws {
        #expect(PNGSettings.tiles.library == .libdeflate && PNGSettings.tiles.filter == .up)
        for (width, height) in [(256, 256), (1, 1), (255, 3)] {
            let pixels = (0..<(width * height * 3)).map { UInt8(truncatingIfNeeded: ($0 &* 2654435761) >> 11) }
            for filter in PNGSettings.Filter.allCases where filter != .adaptive {
                let encoder = PNGEncoder(settings: PNGSettings(zlibLevel: 1, filter: filter, strategy: .default, library: .libdeflate))
                let bytes = try encoder.encode(pixels, width: width, height: height, bands: 3)
                #expect(Array(bytes.prefix(8)) == [137, 80, 78, 71, 13, 10, 26, 10])
                #expect(Array(bytes.suffix(8)) == Array("IEND".utf8) + [0xAE, 0x42, 0x60, 0x82])
                let path = temporaryFile("deflate-\(width)x\(height)-\(filter).png")
                defer { try? FileManager.default.removeItem(atPath: path) }
                try Data(bytes).write(to: URL(fileURLWithPath: path))
                let (w, h, b, decoded) = try decodeWithVips(path)
                #expect((w, h, b) == (width, height, 3))
                #expect(decoded == pixels, "\(width)x\(height), \(filter)")
            }
        }
    }

    @Test func environmentOverridesTheDefaultSettings() {
        let settings = PNGSettings.tiles(environment: ["TILER_PNG_LEVEL": "7", "TILER_PNG_FILTER": "sub", "TILER_PNG_STRATEGY": "nonsense"])
        #expect(settings.zlibLevel == 7 && settings.filter == .sub && settings.strategy == PNGSettings.tiles.strategy)
        #expect(settings.library == .libdeflate)
        let libpng = PNGSettings.tiles(environment: ["TILER_PNG_LIBRARY": "libpng", "TILER_PNG_STRATEGY": "rle"])
        #expect(libpng.library == .libpng && libpng.strategy == .rle)
        #expect(PNGSettings.tiles(environment: ["TILER_PNG_LIBRARY": "zopfli"]).library == .libdeflate)
    }
}
