import Foundation
import Synchronization
import Testing
import TilerCore
import TilerImaging
@testable import tiler

/// Collects what a `TerminalProgress` draws.
private final class Screen: Sendable {
    private let drawn = Mutex("")
    var text: String { drawn.withLock { $0 } }
    func draw(_ text: String) { drawn.withLock { $0 += text } }
}

@Suite struct TerminalProgressTests {
    /// The progress line is drawn in place and cleared at the end; the result line is
    /// `resultLine`, which `tiler cut` prints on stdout, terminal or not.
    @Test func drawsPercentageInPlaceThenClearsItForTheResultLine() throws {
        let screen = Screen()
        let progress = TerminalProgress { screen.draw($0) }
        progress.begin("/some/where/photo.jpg")
        progress.update(1)
        #expect(screen.text.hasPrefix("\r\u{1B}[Kphoto.jpg  0%"))
        #expect(screen.text.hasSuffix("\r\u{1B}[Kphoto.jpg  100%"))
        #expect(!screen.text.contains("\n"))

        let geometry = try PyramidGeometry(width: 600, height: 300)
        let manifest = PyramidManifest(
            id: PyramidID("photo")!, geometry: geometry, format: .png,
            thumbnail: .init(file: "thumbnail.png", width: 256, height: 128))
        let result = CutResult(
            id: manifest.id, output: URL(fileURLWithPath: "/tiles/photo"), manifest: manifest,
            tiles: 9, bytes: 1000, seconds: 1.26)
        progress.end(result)
        #expect(screen.text.hasSuffix("100%\r\u{1B}[K"))
        // One decimal, rounded (1.26 is no tie, so there is one right answer).
        #expect(
            TerminalProgress.resultLine(input: "/some/where/photo.jpg", result)
                == "photo.jpg → /tiles/photo: 600×300, png, 3 levels, 9 tiles, 1.0 kB, 1.3 s")
    }

    @Test func failedCutClearsTheLine() {
        let screen = Screen()
        let progress = TerminalProgress { screen.draw($0) }
        progress.begin("photo.jpg")
        progress.end(nil)
        #expect(screen.text.hasSuffix("\r\u{1B}[K"))
    }
}
