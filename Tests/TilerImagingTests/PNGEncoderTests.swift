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
        for filter in PNGSettings.Filter.allCases {
            for strategy in PNGSettings.Strategy.allCases {
                let encoder = PNGEncoder(settings: PNGSettings(zlibLevel: 2, filter: filter, strategy: strategy))
                let path = temporaryFile("\(bands)-\(filter)-\(strategy).png")
                defer { try? FileManager.default.removeItem(atPath: path) }
                try Data(try encoder.encode(pixels, width: width, height: height, bands: bands)).write(to: URL(fileURLWithPath: path))
                let (w, h, b, decoded) = try decodeWithVips(path)
                #expect(w == width && h == height && b == bands)
                #expect(decoded == pixels, "bands \(bands), \(filter), \(strategy)")
            }
        }
    }

    @Test func encodesASubRectangleUsingTheStride() throws {
        // A 10×6 RGB buffer; encode the 4×3 rectangle at (5, 2).
        let fullWidth = 10, bands = 3
        let pixels = (0..<(fullWidth * 6 * bands)).map { UInt8($0 % 251) }
        let path = temporaryFile("stride.png")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try pixels.withUnsafeBufferPointer { buffer in
            try PNGEncoder().withEncoded(pixels: buffer.baseAddress! + (2 * fullWidth + 5) * bands, stride: fullWidth * bands,
                                         width: 4, height: 3, bands: bands) { bytes in
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
    }

    @Test func environmentOverridesTheDefaultSettings() {
        let settings = PNGSettings.tiles(environment: ["TILER_PNG_LEVEL": "7", "TILER_PNG_FILTER": "sub", "TILER_PNG_STRATEGY": "nonsense"])
        #expect(settings.zlibLevel == 7 && settings.filter == .sub && settings.strategy == PNGSettings.tiles.strategy)
    }
}
