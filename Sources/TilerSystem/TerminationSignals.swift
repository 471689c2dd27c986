import CSystemShims
import Glibc

/// SIGTERM and SIGINT delivered as a readable file instead of an asynchronous handler.
///
/// Create it on the main thread *before* starting the server, so every loop thread
/// inherits the blocked mask and only `wait()` ever sees the signals.
public struct TerminationSignals: Sendable {
    private let descriptor: FileDescriptor

    /// Blocks SIGTERM and SIGINT for this thread and threads it starts later.
    public init() throws(SocketError) {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        // pthread_sigmask returns the error number instead of setting errno.
        let failure = pthread_sigmask(SIG_BLOCK, &set, nil)
        guard failure == 0 else { throw SystemCallError("pthread_sigmask", errno: failure) }
        descriptor = FileDescriptor(rawValue: try systemCall("signalfd") { signalfd(-1, &set, Int32(SFD_CLOEXEC)) })
    }

    /// Waits for SIGTERM or SIGINT and returns its number (-1 if the descriptor fails,
    /// which only a bug can cause).
    public func wait() -> Int32 {
        var info = signalfd_siginfo()
        let size = MemoryLayout<signalfd_siginfo>.size
        do {
            let n = try systemCall("read") { Glibc.read(descriptor.rawValue, &info, size) }
            return n == size ? Int32(info.ssi_signo) : -1
        } catch {
            return -1
        }
    }
}
