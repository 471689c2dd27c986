import Testing
import TilerImaging
import TilerTestSupport

/// An independent 2×2 area average: each output pixel is the mean of the input pixels
/// inside its block (1, 2 or 4 of them at the edges), rounded half up, in Double.
private func referenceShrink(_ pixels: [UInt8], width: Int, height: Int, bands: Int) -> [UInt8] {
    let outWidth = (width + 1) / 2, outHeight = (height + 1) / 2
    var out: [UInt8] = []
    for y in 0..<outHeight {
        for x in 0..<outWidth {
            for band in 0..<bands {
                var sum = 0.0, n = 0.0
                for sy in (2 * y)..<min(2 * y + 2, height) {
                    for sx in (2 * x)..<min(2 * x + 2, width) {
                        sum += Double(pixels[(sy * width + sx) * bands + band])
                        n += 1
                    }
                }
                out.append(UInt8((sum / n + 0.5).rounded(.down)))
            }
        }
    }
    return out
}

@Suite struct AreaAverageTests {
    @Test(arguments: [1, 2, 3, 4])
    func matchesReferenceOnManySizes(bands: Int) {
        var random = SplitMix(seed: UInt64(bands))
        // Widths past 512 and 1024 cross the shrink's 256-pair passes, whole and not.
        for (width, height) in [
            (1, 1), (1, 2), (2, 1), (2, 2), (3, 3), (5, 2), (2, 7), (17, 9), (64, 33), (101, 1), (1, 99),
            (512, 3), (1025, 2), (1300, 5),
        ] {
            let pixels = (0..<(width * height * bands)).map { _ in UInt8.random(in: 0...255, using: &random) }
            let shrunk = AreaAverage.shrink(pixels, width: width, height: height, bands: bands)
            #expect(shrunk.width == (width + 1) / 2 && shrunk.height == (height + 1) / 2)
            #expect(
                shrunk.pixels == referenceShrink(pixels, width: width, height: height, bands: bands),
                "\(width)×\(height)×\(bands)")
        }
    }

    @Test func roundsHalfUpAndAveragesOnlyExistingEdgePixels() {
        // 3×3 grey: the right column and bottom row are 1×2, 2×1 and 1×1 blocks.
        let pixels: [UInt8] = [
            0, 1, 10,
            1, 1, 11,
            200, 201, 255,
        ]
        let shrunk = AreaAverage.shrink(pixels, width: 3, height: 3, bands: 1)
        // (0+1+1+1+2)/4 = 1 (0.75 → 1), (10+11+1)/2 = 11 (10.5 → 11), (200+201+1)/2 = 201, 255.
        #expect(shrunk.pixels == [1, 11, 201, 255])
    }

    @Test func extremesDoNotOverflow() {
        let pixels = [UInt8](repeating: 255, count: 4 * 4 * 4)
        #expect(AreaAverage.shrink(pixels, width: 4, height: 4, bands: 4).pixels == [UInt8](repeating: 255, count: 2 * 2 * 4))
    }
}
