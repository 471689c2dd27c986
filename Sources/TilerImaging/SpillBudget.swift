import Dispatch
import Foundation
import Synchronization

/// The temporary disk that sources served on the fly may take at once
/// (`--sources-spill-mb`). libvips reads a region of a file without random access (PNG,
/// JPEG, a strip TIFF, WebP...) only after decoding the whole file to a temporary file in
/// `TMPDIR`, deleted at once and held open while the image is: a 748 KB PNG of 16000²
/// pixels takes 768 MB there. Each such level of a source, while open, holds its decoded
/// size here; opening one that does not fit first closes the least recently used open
/// levels of any source (their disk is freed once no tile is being made from them), and
/// waits at most `wait` seconds for room, else the request is refused as busy (503).
/// A level larger than the whole budget is refused when its source is opened
/// (`SourcePyramid.init`), so its image answers 500, logged once.
public final class SpillBudget: Sendable {
    /// Bytes of temporary disk at most.
    public let capacity: Int
    /// Seconds a request may wait for room.
    public let wait: Double

    private struct Held {
        var bytes: Int
        var used: UInt64
        /// Closes the level (drops it from its source); its disk is freed when the last
        /// request making a tile from it ends. Nil once called.
        var close: (@Sendable () -> Void)?
    }

    private struct State {
        var used = 0
        var clock: UInt64 = 0
        var nextID = 0
        var held: [Int: Held] = [:]
    }

    private let state = Mutex(State())
    /// Signalled when disk is given back, for one waiter (who passes it on).
    private let freed = DispatchSemaphore(value: 0)

    public init(capacity: Int, wait: Double) {
        self.capacity = max(0, capacity)
        self.wait = wait
    }

    /// Bytes held right now (by open levels, and levels closed but still in use).
    public var bytesInUse: Int { state.withLock { $0.used } }

    /// One open level's share of the budget, given back when it goes.
    final class Reservation: Sendable {
        let budget: SpillBudget
        let id: Int
        let bytes: Int

        fileprivate init(budget: SpillBudget, id: Int, bytes: Int) {
            self.budget = budget
            self.id = id
            self.bytes = bytes
        }

        /// Marks the level used now (it is closed last).
        func touch() { budget.touch(id) }

        /// How to close the level when room is needed.
        func whenRoomIsNeeded(_ close: @escaping @Sendable () -> Void) { budget.setClose(id, close) }

        deinit { budget.release(id) }
    }

    /// Why room could not be had.
    enum Refusal: Error {
        /// More than the whole budget.
        case tooLarge
        /// No room within `wait` seconds (every open level in use).
        case busy
    }

    /// Reserves `bytes`, closing the least recently used open levels for room, waiting at
    /// most `wait` seconds for levels still in use to be given back.
    func reserve(_ bytes: Int) throws(Refusal) -> Reservation {
        guard bytes <= capacity else { throw .tooLarge }
        let deadline = DispatchTime.now() + .milliseconds(Int(max(0, min(wait, 86_400)) * 1000))
        while true {
            var toClose: [@Sendable () -> Void] = []
            let id = state.withLock { s -> Int? in
                if s.used + bytes <= capacity {
                    s.nextID += 1
                    s.clock += 1
                    s.used += bytes
                    s.held[s.nextID] = Held(bytes: bytes, used: s.clock, close: nil)
                    return s.nextID
                }
                // Close open levels, least recently used first, until enough would be freed.
                var freeing = 0
                for (key, held) in s.held.sorted(by: { $0.value.used < $1.value.used }) where held.close != nil {
                    guard s.used - freeing + bytes > capacity else { break }
                    toClose.append(held.close!)
                    s.held[key]?.close = nil
                    freeing += held.bytes
                }
                return nil
            }
            if let id { return Reservation(budget: self, id: id, bytes: bytes) }
            // Outside the lock: closing takes the source's own lock, and may free at once.
            for close in toClose { close() }
            if !toClose.isEmpty { continue }
            guard freed.wait(timeout: deadline) == .success else { throw .busy }
        }
    }

    private func touch(_ id: Int) {
        state.withLock { s in
            s.clock += 1
            s.held[id]?.used = s.clock
        }
    }

    private func setClose(_ id: Int, _ close: @escaping @Sendable () -> Void) {
        state.withLock { $0.held[id]?.close = close }
    }

    private func release(_ id: Int) {
        let released = state.withLock { s -> Bool in
            guard let held = s.held.removeValue(forKey: id) else { return false }
            s.used -= held.bytes
            return true
        }
        if released { freed.signal() }
    }
}
