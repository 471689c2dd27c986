import Foundation
import TilerImaging

/// `tiler cut`'s progress line on a terminal: per image, the percentage done and the time
/// left, rewritten in place, and cleared when the image is done (its result line goes
/// to stdout, ``resultLine(input:_:)``, terminal or not).
final class TerminalProgress: CutProgress {
    private let write: (String) -> Void
    private var name = ""
    private var started = DispatchTime.now()
    private var lastDrawn: UInt64 = 0

    /// Draws on stderr, or returns nil when stderr is not a terminal.
    static func onTerminal() -> TerminalProgress? {
        guard isatty(STDERR_FILENO) == 1 else { return nil }
        return TerminalProgress { text in FileHandle.standardError.write(Data(text.utf8)) }
    }

    init(write: @escaping (String) -> Void) { self.write = write }

    func begin(_ input: String) {
        name = (input as NSString).lastPathComponent
        started = .now()
        lastDrawn = 0
        write("\r\u{1B}[K\(name)  0%")
    }

    func update(_ fraction: Double) {
        let now = DispatchTime.now().uptimeNanoseconds
        guard now - lastDrawn >= 100_000_000 || fraction >= 1 else { return }
        lastDrawn = now
        let elapsed = Double(now - started.uptimeNanoseconds) / 1e9
        var line = "\r\u{1B}[K\(name)  \(Int(fraction * 100))%"
        if fraction > 0.02, elapsed > 0.5 {
            let left = elapsed * (1 - fraction) / fraction
            line += "  \(Self.clock(left)) left"
        }
        write(line)
    }

    func end(_ result: CutResult?) {
        write("\r\u{1B}[K")
    }

    /// What `tiler cut` prints on stdout for each image it cut (unless `--quiet` or
    /// `--json`): `photo.jpg → tiles/photo: 600×300, jpeg, 3 levels, 9 tiles, 1.2 MB, 1.3 s`.
    static func resultLine(input: String, _ result: CutResult) -> String {
        let m = result.manifest
        return "\((input as NSString).lastPathComponent) → \(result.destination): \(m.width)×\(m.height), \(m.format.rawValue), "
            + "\(m.levels.count) levels, \(result.tiles) tiles, \(humanBytes(result.bytes)), "
            + String(format: "%.1f s", result.seconds)
    }

    private static func clock(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
    }
}
