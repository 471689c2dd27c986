import Foundation
import Synchronization

/// What a child process writes on one pipe, read on a thread of its own (so that a full
/// pipe never blocks the child) and kept for the test: as text, or line by line with a
/// deadline.
public final class PipeReader: Sendable {
    private struct State {
        var bytes: [UInt8] = []
        /// Where the line `nextLine` hands out next starts.
        var lineStart = 0
        var ended = false
    }
    private let state = Mutex(State())

    /// Reads `handle` until every writer has closed it.
    public init(_ handle: FileHandle) {
        Thread { [self] in
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                state.withLock { $0.bytes += chunk }
            }
            state.withLock { $0.ended = true }
        }.start()
    }

    /// Everything read so far, as text.
    public var text: String { state.withLock { String(decoding: $0.bytes, as: UTF8.self) } }

    /// Whether the pipe has closed and everything in it is read.
    public var ended: Bool { state.withLock { $0.ended } }

    /// The next whole line not handed out yet, without its line break, waiting up to
    /// `seconds` for it; nil when none comes in time or the pipe closes first.
    public func nextLine(within seconds: Double) -> String? {
        var line: String?
        _ = eventually(within: seconds) {
            let (found, done) = state.withLock { state -> (String?, Bool) in
                guard let newline = state.bytes[state.lineStart...].firstIndex(of: 10) else { return (nil, state.ended) }
                defer { state.lineStart = newline + 1 }
                return (String(decoding: state.bytes[state.lineStart..<newline], as: UTF8.self), true)
            }
            line = found
            return done
        }
        return line
    }

    /// Waits up to `seconds` for the pipe to close; whether it did.
    public func waitForEnd(within seconds: Double) -> Bool { eventually(within: seconds) { ended } }
}
