import Foundation
import TilerCore

/// One input's line in `tiler cut --json`.
public struct CutReport: Codable, Sendable, Equatable {
    public var path: String
    public var id: String?
    public var ok: Bool
    public var error: String?
    public var width: Int?
    public var height: Int?
    /// Number of levels, `maxLevel + 1`.
    public var levels: Int?
    public var tiles: Int?
    public var bytes: Int?
    public var seconds: Double?
    /// The pyramid folder.
    public var output: String?
}

/// `tiler cut --json`'s whole output.
public struct CutSummary: Codable, Sendable, Equatable {
    public var images: [CutReport]
    public var succeeded: Int
    public var failed: Int
    public var interrupted: Bool
}

/// Cuts several inputs one after the other: the error of one input is reported and the
/// others are still cut.
public struct CutBatch {
    public let cutter: PyramidCutter
    /// The id for the single input, instead of one derived from its file name.
    public let name: PyramidID?

    public init(cutter: PyramidCutter, name: PyramidID?) {
        self.cutter = cutter
        self.name = name
    }

    /// Cuts every input in order and reports each one.
    ///
    /// - Parameters:
    ///   - progress: gets each input as it starts, its progress, and its end.
    ///   - failed: called once per input that could not be cut, with the reason.
    ///   - isCancelled: stops the batch (and the cut under way) when it turns true.
    public func run(_ inputs: [String], progress: CutProgress?, failed: (String, CutError) -> Void,
                    isCancelled: @escaping @Sendable () -> Bool) -> CutSummary {
        var reports: [CutReport] = []
        var usedIDs = Set<PyramidID>()
        var interrupted = false
        for input in inputs {
            if isCancelled() {
                interrupted = true
                break
            }
            var report = CutReport(path: input, ok: false)
            guard let id = name ?? PyramidID(deriving: input) else {
                failed(input, .noUsableName)
                report.error = CutError.noUsableName.description
                reports.append(report)
                continue
            }
            report.id = id.rawValue
            guard usedIDs.insert(id).inserted else {
                let error = CutError.duplicate(id: id)
                failed(input, error)
                report.error = error.description
                reports.append(report)
                continue
            }
            progress?.begin(input)
            do {
                let result = try cutter.cut(input, id: id, progress: { progress?.update($0) }, isCancelled: isCancelled)
                progress?.end(result)
                report.ok = true
                report.width = result.manifest.width
                report.height = result.manifest.height
                report.levels = result.manifest.levels.count
                report.tiles = result.tiles
                report.bytes = result.bytes
                report.seconds = (result.seconds * 1000).rounded() / 1000
                report.output = result.folder.path
            } catch {
                progress?.end(nil)
                if case .interrupted = error { interrupted = true }
                failed(input, error)
                report.error = error.description
            }
            reports.append(report)
            if interrupted { break }
        }
        let succeeded = reports.filter(\.ok).count
        return CutSummary(images: reports, succeeded: succeeded, failed: reports.count - succeeded, interrupted: interrupted)
    }
}

/// A progress line on a terminal: per image, the percentage done and the time left,
/// rewritten in place, then a one-line result.
public final class CutProgress {
    private let write: (String) -> Void
    private var name = ""
    private var started = DispatchTime.now()
    private var lastDrawn: UInt64 = 0

    /// Draws on stderr, or returns nil when stderr is not a terminal.
    public static func onTerminal() -> CutProgress? {
        guard isatty(STDERR_FILENO) == 1 else { return nil }
        return CutProgress { text in FileHandle.standardError.write(Data(text.utf8)) }
    }

    public init(write: @escaping (String) -> Void) { self.write = write }

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
        guard let result else {
            write("\r\u{1B}[K")
            return
        }
        let m = result.manifest
        write("\r\u{1B}[K\(name): \(m.width)×\(m.height), \(m.levels.count) levels, \(result.tiles) tiles, "
            + String(format: "%.1f s", result.seconds) + " → \(result.folder.path)\n")
    }

    private static func clock(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
    }
}

/// SIGINT and SIGTERM turned into a flag that a cut polls, so that it can remove its
/// partial folder before the process exits. A second signal exits at once.
public final class InterruptSignals: @unchecked Sendable {
    private let lock = NSLock()
    private var received: Int32 = 0
    private var sources: [any DispatchSourceSignal] = []

    /// Starts catching SIGINT and SIGTERM.
    public static func install() -> InterruptSignals {
        let signals = InterruptSignals()
        for number in [SIGINT, SIGTERM] {
            Glibc.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [signals] in signals.receive(number) }
            source.resume()
            signals.sources.append(source)
        }
        return signals
    }

    private func receive(_ number: Int32) {
        lock.lock()
        let first = received == 0
        if first { received = number }
        lock.unlock()
        if !first { _exit(128 + number) }
    }

    /// The first signal received, or nil.
    public var signal: Int32? {
        lock.lock()
        defer { lock.unlock() }
        return received == 0 ? nil : received
    }

    public var isInterrupted: Bool { signal != nil }
}
