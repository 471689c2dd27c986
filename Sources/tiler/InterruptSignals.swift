import Dispatch
import Foundation
import Synchronization
import TilerStorage
import TilerSystem

/// SIGINT and SIGTERM turned into a flag that a cut polls, so that it can remove its
/// partial folder and report before the process exits.
///
/// A cut polls between strips of rows; it cannot while libvips is inside one long call
/// (a header read, a progressive JPEG or interlaced PNG decoded whole). So if the work
/// has not acknowledged the signal within ``gracePeriod``, or at a second signal, the
/// signal thread removes the unfinished output itself (``UnfinishedOutput``), prints one
/// line and exits with 128 + the signal number, whatever the cut is doing.
final class InterruptSignals: Sendable {
    /// How long the work has to stop by itself after the first signal.
    static let gracePeriod: Double = 1.0

    private struct State {
        /// The first signal, 0 before any.
        var received: Int32 = 0
        /// The work has acknowledged it and cleaned up by itself.
        var stopped = false
        /// Kept so that the sources live as long as this value.
        var sources: [any DispatchSourceSignal] = []
    }

    private let state = Mutex(State())
    private let program: String

    /// Starts catching SIGINT and SIGTERM. `program` prefixes the line printed when the
    /// signal thread has to stop the process itself (`tiler: cut`).
    static func install(program: String = "tiler") -> InterruptSignals {
        let signals = InterruptSignals(program: program)
        for number in [SIGINT, SIGTERM] {
            Glibc.signal(number, SIG_IGN)
            signals.state.withLock { s in
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler { [signals] in signals.receive(number) }
                source.resume()
                s.sources.append(source)
            }
        }
        return signals
    }

    private init(program: String) { self.program = program }

    private func receive(_ number: Int32) {
        let first = state.withLock { s in
            defer { if s.received == 0 { s.received = number } }
            return s.received == 0
        }
        if !first { stopNow(number) }
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.gracePeriod) { [self] in
            if !state.withLock({ $0.stopped }) { stopNow(number) }
        }
    }

    /// Removes unfinished output and exits; never returns.
    private func stopNow(_ number: Int32) -> Never {
        UnfinishedOutput.shared.removeAllForExit {
            let line = "\(program): interrupted; nothing unfinished was kept\n"
            try? FileDescriptor.standardError.writeAll(Array(line.utf8))  // best effort on the way out
            _exit(128 + number)
        }
    }

    /// Tells the signal thread that the work has stopped and cleaned up by itself, so
    /// the process may finish normally (print its summary, exit 128 + signal).
    func acknowledge() {
        state.withLock { $0.stopped = true }
    }

    /// The first signal received, or nil.
    var signal: Int32? {
        state.withLock { $0.received == 0 ? nil : $0.received }
    }

    var isInterrupted: Bool { signal != nil }
}
