import Synchronization

/// What went wrong on several threads (clients, writers), checked once they are done.
public final class Failures: Sendable {
    private let errors = Mutex<[any Error]>([])

    public init() {}

    public func add(_ error: any Error) { errors.withLock { $0.append(error) } }

    /// A failure said in words (a `ClientError`).
    public func add(_ message: String) { add(ClientError(message)) }

    /// The first failure, to throw.
    public var first: (any Error)? { errors.withLock { $0.first } }

    /// Every failure, in words.
    public var all: [String] { errors.withLock { $0.map { "\($0)" } } }
}
