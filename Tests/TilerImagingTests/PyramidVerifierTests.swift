import Dispatch
import Foundation
import Synchronization
import Testing
import TilerCore
@testable import TilerImaging

/// `PyramidVerifier.check`, the decode behind `tiler verify`, on tiles damaged near their end.
@Suite struct PyramidVerifierCheckTests {
    /// Noise from a fixed seed: every run encodes the same tile.
    private static func noise(width: Int, height: Int, bands: Int) -> [UInt8] {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        return (0..<width * height * bands).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state >> 24)
        }
    }

    /// A flipped byte in the last tenth of a PNG tile (the rows libvips decodes last) is
    /// found every time, also with many checks at once. The check used to decode through
    /// `vips_avg`, whose threadpool in libvips 8.14 reads its error flag before the last
    /// workers finish (libvips#4116, fixed in 8.15.4): a few percent of these checks passed
    /// the damaged tile, more on a loaded machine, and `tiler verify` missed it.
    @Test func damageInTheLastRowsIsFoundEveryTime() throws {
        try Vips.start(for: .verifying)
        let tile = try PNGEncoder().encode(Self.noise(width: 256, height: 256, bands: 3), width: 256, height: 256, bands: 3)
        #expect(PyramidVerifier.check(tile, format: .png, width: 256, height: 256) == nil)
        let positions = [0.90, 0.93, 0.95, 0.97, 0.99].map { Int(Double(tile.count) * $0) }
        let rounds = 300
        let passed = Mutex([Int](repeating: 0, count: positions.count))
        for (index, position) in positions.enumerated() {
            var damaged = tile
            damaged[position] ^= 0xFF
            let bytes = damaged
            guard PyramidVerifier.check(bytes, format: .png, width: 256, height: 256) != nil else {
                Issue.record("the byte at \(position) of \(tile.count) is not damage libpng can see")
                continue
            }
            DispatchQueue.concurrentPerform(iterations: rounds) { _ in
                if PyramidVerifier.check(bytes, format: .png, width: 256, height: 256) == nil {
                    passed.withLock { $0[index] += 1 }
                }
            }
        }
        let misses = passed.withLock { $0 }
        #expect(misses.allSatisfy { $0 == 0 }, "damaged tiles passed \(misses) times in \(rounds) checks at bytes \(positions)")
    }
}
