import CNetShims
import Glibc

/// SIGTERM and SIGINT delivered as a readable file instead of an asynchronous handler.
///
/// Create it on the main thread *before* starting the server, so every loop thread
/// inherits the blocked mask and only `wait()` ever sees the signals.
public struct TerminationSignals: Sendable {
    private let fd: Int32

    /// Blocks SIGTERM and SIGINT for this thread and threads it starts later.
    public init() throws(SocketError) {
        let fd = cns_termination_signalfd()
        guard fd >= 0 else { throw SocketError("signalfd") }
        self.fd = fd
    }

    /// Waits for SIGTERM or SIGINT and returns its number.
    public func wait() -> Int32 {
        while true {
            let signal = cns_read_signal(fd)
            if signal > 0 { return signal }
            if errno != EINTR { return -1 }
        }
    }
}
