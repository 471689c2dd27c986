import Foundation
@testable import TilerHTTP

/// A `ManualClock` whose next reading can be held up: the thread reading it waits until the
/// test releases it, as an event loop the scheduler leaves off the core between
/// `epoll_wait` and its clock would. The wall clock is never held.
// @unchecked: its state is guarded by `condition`, which the held thread waits on, and
// Synchronization has no condition to wait on.
final class HeldClock: ServerClock, @unchecked Sendable {
    private let manual = ManualClock()
    private let condition = NSCondition()
    private var armed = false
    private var held = false

    func monotonicMilliseconds() -> Int64 {
        condition.lock()
        if armed {
            armed = false
            held = true
            condition.broadcast()
            while held { condition.wait() }
        }
        condition.unlock()
        return manual.monotonicMilliseconds()
    }

    func wallSeconds() -> Int64 { manual.wallSeconds() }

    func advance(milliseconds: Int64) { manual.advance(milliseconds: milliseconds) }

    /// The next reading waits for `release()`.
    func holdNextReading() { condition.withLock { armed = true } }

    /// Waits until a reading is held; false after `seconds`.
    func waitUntilHeld(seconds: Double = 20) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date().addingTimeInterval(seconds)
        while !held {
            if !condition.wait(until: deadline) { return held }
        }
        return true
    }

    func release() {
        condition.withLock {
            held = false
            condition.broadcast()
        }
    }
}
