import Foundation

/// The time by which the storage requests a thread makes must end: a server answering a
/// client sets it around the reads that answer needs (`StorageDeadline.$current.withValue`),
/// and every request made meanwhile, retries included, is cut to the time left (a
/// request started after it fails at once as timed out). Unset, each request has only
/// its own bounds (``S3Configuration``).
public struct StorageDeadline: Sendable {
    /// When the time is up.
    public let instant: ContinuousClock.Instant
    /// The whole allowance in seconds, for messages.
    public let seconds: Double

    /// `seconds` from now.
    public init(seconds: Double) {
        self.seconds = seconds
        instant = ContinuousClock.now.advanced(by: .milliseconds(Int64(max(0, min(seconds, 86_400)) * 1000)))
    }

    /// The deadline in force on this thread (or task), if any.
    @TaskLocal public static var current: StorageDeadline?

    /// Seconds until the deadline; negative once past.
    public var secondsLeft: Double {
        let d = ContinuousClock.now.duration(to: instant).components
        return Double(d.seconds) + Double(d.attoseconds) / 1e18
    }

    /// Whether the deadline has passed.
    public var hasPassed: Bool { ContinuousClock.now >= instant }

    var text: String { String(format: "%g", seconds) }

    /// Runs `body` with this deadline in force for the storage requests it makes.
    public func run<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        let result: Result<T, E> = Self.$current.withValue(self) { Result { () throws(E) -> T in try body() } }
        return try result.get()
    }
}
