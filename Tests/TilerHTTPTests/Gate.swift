import Foundation
import Synchronization

/// A gate that blocking work waits at until the test opens it, so that a test can hold
/// pool threads busy for exactly as long as it needs, and count what ran.
// @unchecked: its state is guarded by `condition`, which the work waits on, and
// Synchronization has no condition to wait on.
final class Gate: @unchecked Sendable {
    private let condition = NSCondition()
    private var isOpen: Bool
    private var arrivals = 0
    private var passes = 0

    init(open: Bool) { isOpen = open }

    /// Called by the work: waits until the gate is open.
    func pass() {
        condition.lock()
        arrivals += 1
        condition.broadcast()
        while !isOpen { condition.wait() }
        passes += 1
        condition.unlock()
    }

    func open() {
        condition.lock()
        isOpen = true
        condition.broadcast()
        condition.unlock()
    }

    /// How many pieces of work reached the gate (started running).
    var arrived: Int { condition.withLock { arrivals } }
    /// How many went through it (ran to the end).
    var passed: Int { condition.withLock { passes } }

    /// Waits until `count` pieces of work have reached the gate; false after `seconds`.
    func waitForArrivals(_ count: Int, seconds: Double = 20) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date().addingTimeInterval(seconds)
        while arrivals < count {
            if !condition.wait(until: deadline) { return arrivals >= count }
        }
        return true
    }
}

/// Gates by name: names starting with `open-` are open from the start, the others closed.
final class Gates: Sendable {
    static let shared = Gates()
    private let gates = Mutex<[String: Gate]>([:])
    subscript(name: String) -> Gate {
        gates.withLock { gates in
            if let g = gates[name] { return g }
            let g = Gate(open: name.hasPrefix("open-"))
            gates[name] = g
            return g
        }
    }
    /// A name no other test uses.
    static func unique(_ prefix: String = "") -> String { prefix + UUID().uuidString }
}
