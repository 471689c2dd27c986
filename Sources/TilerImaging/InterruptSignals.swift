import Dispatch
import Foundation

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
