import Synchronization

/// A value that several threads share, behind a `Mutex`, in a class: a closure that
/// escapes (a `Thread`'s, a `DispatchQueue`'s) cannot capture a `Mutex` itself.
public final class Locked<Value>: Sendable {
    private let mutex: Mutex<Value>

    public init(_ value: sending Value) { mutex = Mutex(value) }

    /// Runs `body` with the value, no other thread touching it meanwhile.
    public func withLock<Result, Failure: Error>(
        _ body: (inout sending Value) throws(Failure) -> sending Result
    ) throws(Failure) -> sending Result {
        try mutex.withLock(body)
    }
}
