import Foundation
import Logging
import TilerImaging

/// The memory that drawn images (IIIF regions, small DeepZoom levels) may hold at once.
///
/// Each drawing's peak is estimated before it starts (`RegionRenderer.estimatedPeakBytes`:
/// source tiles, the canvas, the rotated canvas, the encoder) and admitted against the
/// budget: it starts at once when it fits beside the drawings in flight; otherwise it
/// waits, in arrival order, up to `wait` seconds, and is then refused (503). A drawing
/// larger than the whole budget is refused before it is queued (400: it can never run).
/// When the last drawing in flight finishes, the memory they freed is handed back to the
/// system (`RegionRenderer.releaseFreedMemory`), so RSS falls back after a burst.
final class RenderBudget: @unchecked Sendable {
    /// Bytes all drawings in flight may hold together.
    let capacity: Int
    /// Seconds a drawing may wait for room.
    let wait: Double

    private let condition = NSCondition()
    private var inUse = 0
    /// Tickets of the drawings waiting, first come first served.
    private var queue: [UInt64] = []
    private var nextTicket: UInt64 = 0

    init(capacity: Int, wait: Double) {
        self.capacity = max(0, capacity)
        self.wait = max(0, wait)
    }

    enum Admission: Equatable {
        /// Room was taken: call `release` with the same bytes when done.
        case admitted
        /// No room within the wait.
        case busy
        /// More than the whole budget.
        case tooLarge
    }

    /// Bytes held by drawings in flight.
    var bytesInUse: Int { condition.withLock { inUse } }
    /// Drawings waiting for room.
    var waiting: Int { condition.withLock { queue.count } }

    /// Takes `bytes` of the budget, waiting for room up to `wait` seconds.
    func admit(_ bytes: Int) -> Admission {
        guard bytes <= capacity else { return .tooLarge }
        condition.lock()
        defer { condition.unlock() }
        if queue.isEmpty && inUse + bytes <= capacity {
            inUse += bytes
            return .admitted
        }
        let ticket = nextTicket
        nextTicket += 1
        queue.append(ticket)
        let deadline = Date().addingTimeInterval(wait)
        while !(queue.first == ticket && inUse + bytes <= capacity) {
            if !condition.wait(until: deadline) {
                queue.removeAll { $0 == ticket }
                // The next in line may fit now that this one gives up.
                condition.broadcast()
                return .busy
            }
        }
        queue.removeFirst()
        inUse += bytes
        condition.broadcast()
        return .admitted
    }

    /// Gives back what `admit` took; the last drawing out returns freed memory to the
    /// system.
    func release(_ bytes: Int) {
        let idle = condition.withLock {
            inUse -= bytes
            condition.broadcast()
            return inUse == 0
        }
        if idle { RegionRenderer.releaseFreedMemory() }
    }
}

/// Logs each message once per key (a damaged file per pyramid generation, say), so that
/// a fault clients keep asking for is one log line, not one per request. Remembers at
/// most `capacity` keys, then starts afresh.
final class OnceLog: @unchecked Sendable {
    private let log: Logger
    private let capacity: Int
    private let lock = NSLock()
    private var seen: Set<String> = []

    init(log: Logger, capacity: Int = 10_000) {
        self.log = log
        self.capacity = capacity
    }

    func once(_ key: String, _ message: @autoclosure () -> String) {
        let first = lock.withLock { () -> Bool in
            if seen.count >= capacity { seen.removeAll() }
            return seen.insert(key).inserted
        }
        if first { log.error("\(message())") }
    }
}
