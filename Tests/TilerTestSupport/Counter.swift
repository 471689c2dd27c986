import Synchronization

/// A count that closures on several threads add to.
public final class Counter: Sendable {
    private let count = Atomic<Int>(0)

    public init() {}

    /// The count now.
    public var value: Int { count.load(ordering: .sequentiallyConsistent) }

    /// Adds one and returns the new count.
    @discardableResult
    public func increment() -> Int { count.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue }
}
