import Foundation
import Testing
import TilerCore
import TilerImaging
import TilerTestSupport

/// Records what a batch tells its progress display.
private final class RecordedProgress: CutProgress {
    var events: [String] = []
    var fractions: [Double] = []

    func begin(_ input: String) { events.append("begin \((input as NSString).lastPathComponent)") }
    func update(_ fraction: Double) { fractions.append(fraction) }
    func end(_ result: CutResult?) { events.append(result.map { "end \($0.id.rawValue) \($0.tiles) tiles" } ?? "end failed") }
}

@Suite struct CutBatchTests {
    /// Each input is begun and ended once, in order (a failed one ends with no result),
    /// and the progress of a cut rises to 1.
    @Test func reportsEachInputsStartProgressAndEnd() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let (width, height, bands) = (300, 200, 3)
        let pixels = (0..<(width * height * bands)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) }
        let good = scratch.path("photo.png")
        try Data(PNGEncoder().encode(pixels, width: width, height: height, bands: bands)).write(to: URL(fileURLWithPath: good))
        let missing = scratch.path("missing.png")

        let recorded = RecordedProgress()
        let cutter = PyramidCutter(root: URL(fileURLWithPath: scratch.path("out")), options: CutOptions(tileSize: 64, format: .png))
        var failures: [String] = []
        let summary = CutBatch(cutter: cutter, name: nil).run(
            [good, missing], progress: recorded, failed: { input, _ in failures.append(input) }, isCancelled: { false })

        let tiles = try PyramidGeometry(width: width, height: height, tileSize: 64).levels.map(\.tileCount).reduce(0, +)
        #expect(recorded.events == ["begin photo.png", "end photo \(tiles) tiles", "begin missing.png", "end failed"])
        #expect(!recorded.fractions.isEmpty)
        #expect(recorded.fractions == recorded.fractions.sorted())
        #expect(recorded.fractions.last == 1)
        #expect(failures == [missing])
        #expect((summary.succeeded, summary.failed, summary.interrupted) == (1, 1, false))
    }
}
