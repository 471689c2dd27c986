import Glibc

/// A failed system call: which one, on what, and the `errno` it set.
///
/// Every call in the system-call layer (`FileDescriptor`, `Socket`, `Epoll`, `EventFD`)
/// throws this when it fails; nothing returns a bare -1 for the caller to forget.
public struct SystemCallError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The system call, e.g. `bind`.
    public let call: String
    /// The error number it set, e.g. `EADDRINUSE`.
    public let errno: Int32
    /// What it was called on, e.g. `to 127.0.0.1:8080`; may be empty.
    public let detail: String

    public init(_ call: String, _ detail: String = "", errno: Int32) {
        self.call = call
        self.errno = errno
        self.detail = detail
    }

    /// The same failure, saying what it was called on.
    public func on(_ detail: String) -> SystemCallError { SystemCallError(call, detail, errno: errno) }

    public var description: String {
        detail.isEmpty ? "\(call) failed: \(reason)" : "\(call) \(detail) failed: \(reason)"
    }

    /// What `errno` says, e.g. "No such file or directory".
    public var reason: String { Self.reason(errno) }

    /// What an error number says: the one place an `errno` becomes text.
    public static func reason(_ code: Int32) -> String { String(cString: strerror(code)) }
}

/// The name `HTTPServer.start()` has always thrown under: the same type.
public typealias SocketError = SystemCallError

/// What a non-blocking call did: its result, or nothing because it would have had to wait
/// (`EAGAIN`/`EWOULDBLOCK`).
public enum IOResult<Value: Sendable>: Sendable {
    case done(Value)
    case wouldBlock
}

extension IOResult: Equatable where Value: Equatable {}

/// Makes a system call that returns -1 and sets `errno` on failure: retried on `EINTR`,
/// any other failure thrown with its `errno` (read at once, before anything can change it).
@inlinable @inline(__always)
public func systemCall<T: FixedWidthInteger>(_ name: StaticString, _ body: () -> T) throws(SystemCallError) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = Glibc.errno
        if code == EINTR { continue }
        throw SystemCallError(name.description, errno: code)
    }
}

/// `systemCall` for a call on a non-blocking descriptor: `EAGAIN` is `.wouldBlock`, not an
/// error.
@inlinable @inline(__always)
public func nonBlockingCall<T: FixedWidthInteger & Sendable>(_ name: StaticString, _ body: () -> T)
    throws(SystemCallError) -> IOResult<T>
{
    while true {
        let result = body()
        if result != -1 { return .done(result) }
        let code = Glibc.errno
        if code == EINTR { continue }
        if code == EAGAIN || code == EWOULDBLOCK { return .wouldBlock }
        throw SystemCallError(name.description, errno: code)
    }
}
