import Dispatch
import Glibc
import Logging
import Synchronization
import TilerImaging

/// The memory that drawn images (IIIF regions, small DeepZoom levels) may hold at once.
///
/// Each drawing's peak is estimated before it starts (`RegionRenderer.estimatedPeakBytes`:
/// source tiles, the canvas, the rotated canvas, the encoder) and admitted against the
/// budget: it starts at once when it fits beside the drawings in flight; otherwise it
/// waits, in arrival order, up to `wait` seconds, and is then refused (503). A drawing
/// larger than the whole budget is refused before it is queued (400: it can never run).
/// A second after the last drawing in flight finishes (if no other has started), the
/// memory they freed is handed back to the system (`RegionRenderer.releaseFreedMemory`),
/// so RSS falls back after a burst.
///
/// Room no drawing is using is lent to the tiles drawings keep decoded for the next one
/// (`PixelCacheLender`); a drawing that needs it takes it back before it waits
/// (`lend(to:)`), so kept tiles never make a drawing wait or refuse it, and drawings and
/// kept tiles together stay within the budget.
final class RenderBudget: PixelCacheLender {
    /// Bytes all drawings in flight may hold together.
    let capacity: Int
    /// Seconds a drawing may wait for room.
    let wait: Double

    /// A drawing waiting for room, woken through its own semaphore once it is granted.
    private struct Waiter {
        let ticket: UInt64
        let bytes: Int
        let wake: DispatchSemaphore
    }

    private struct Ledger {
        /// The budget (the same as `RenderBudget.capacity`).
        let capacity: Int
        var inUse = 0
        /// Lent to kept decoded tiles.
        var lent = 0
        /// The drawings waiting, first come first served.
        var queue: [Waiter] = []
        var nextTicket: UInt64 = 0
        /// Tickets given room while they waited, not yet collected by their drawing.
        var granted: Set<UInt64> = []

        /// Gives room to the waiters at the head of the queue that fit, in order.
        mutating func grant() {
            while let first = queue.first, inUse + lent + first.bytes <= capacity {
                queue.removeFirst()
                inUse += first.bytes
                granted.insert(first.ticket)
                first.wake.signal()
            }
        }
    }

    private let ledger: Mutex<Ledger>
    /// The cache that borrows room (`lend(to:)`), asked to give it back when a drawing
    /// needs it.
    private let borrower = Mutex<PixelCache?>(nil)

    init(capacity: Int, wait: Double) {
        self.capacity = max(0, capacity)
        self.wait = max(0, wait)
        ledger = Mutex(Ledger(capacity: max(0, capacity)))
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
    var bytesInUse: Int { ledger.withLock { $0.inUse } }
    /// Drawings waiting for room.
    var waiting: Int { ledger.withLock { $0.queue.count } }

    /// Bytes lent to kept decoded tiles.
    var bytesLent: Int { ledger.withLock { $0.lent } }

    /// Lends room no drawing is using to `cache`, which gives it back when asked.
    func lend(to cache: PixelCache) { borrower.withLock { $0 = cache } }

    func borrow(_ bytes: Int) -> Bool {
        ledger.withLock { l in
            guard l.queue.isEmpty, l.inUse + l.lent + bytes <= l.capacity else { return false }
            l.lent += bytes
            return true
        }
    }

    func giveBack(_ bytes: Int) {
        ledger.withLock { l in
            l.lent -= bytes
            l.grant()
        }
    }

    /// Takes `bytes` of the budget, waiting for room up to `wait` seconds. Room lent to
    /// kept decoded tiles is taken back first, as much as the drawing lacks (all it needs
    /// when it must wait anyway).
    func admit(_ bytes: Int) -> Admission {
        guard bytes <= capacity else { return .tooLarge }
        // What the drawing lacks, or as much as it takes when it must wait anyway (the
        // room lent must not keep it waiting).
        let wanted = ledger.withLock { l in
            guard l.lent > 0 else { return 0 }
            let mustWait = !l.queue.isEmpty || l.inUse + bytes > capacity
            return mustWait ? min(l.lent, bytes) : l.inUse + l.lent + bytes - capacity
        }
        if wanted > 0, let cache = borrower.withLock({ $0 }) {
            cache.reclaim(wanted)  // outside the ledger's lock: the cache gives back under its own
        }
        let waiter = ledger.withLock { l -> Waiter? in
            if l.queue.isEmpty && l.inUse + l.lent + bytes <= capacity {
                l.inUse += bytes
                return nil
            }
            let waiter = Waiter(ticket: l.nextTicket, bytes: bytes, wake: DispatchSemaphore(value: 0))
            l.nextTicket += 1
            l.queue.append(waiter)
            return waiter
        }
        guard let waiter else { return .admitted }
        let timedOut = waiter.wake.wait(timeout: .now() + .milliseconds(Int(min(wait, 86_400) * 1000))) == .timedOut
        return ledger.withLock { l in
            // Granted just as the wait ended: the room is this drawing's.
            if l.granted.remove(waiter.ticket) != nil { return .admitted }
            precondition(timedOut, "a waiting drawing woke without room")
            l.queue.removeAll { $0.ticket == waiter.ticket }
            // The next in line may fit now that this one gives up.
            l.grant()
            return .busy
        }
    }

    /// Whether the calling thread runs inside `holding` (work admitted already): tiles
    /// made from sources for a drawing are covered by the drawing's own admission and do
    /// not wait for room a second time (which could wait on itself).
    static var isHeldByThisThread: Bool { pthread_getspecific(heldKey) != nil }

    /// Runs `body` marked as admitted (`isHeldByThisThread`).
    static func holding<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        let outer = isHeldByThisThread
        if !outer { pthread_setspecific(heldKey, UnsafeRawPointer(bitPattern: 1)) }
        defer { if !outer { pthread_setspecific(heldKey, nil) } }
        return try body()
    }

    /// A thread-specific flag: non-nil while the thread runs inside `holding`.
    private static let heldKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Gives back what `admit` took. When the last drawing is out, freed memory goes back
    /// to the system a little later (`trimDelay`), if no drawing came meanwhile: drawings
    /// one after another then reuse their memory instead of faulting fresh pages in each
    /// time (a sixth of a small drawing's time went to the kernel), and RSS still falls
    /// after a burst.
    func release(_ bytes: Int) {
        let idle = ledger.withLock { l in
            l.inUse -= bytes
            l.grant()
            return l.inUse == 0
        }
        guard idle, !trimPending.exchange(true, ordering: .acquiringAndReleasing) else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.trimDelay) { [self] in
            trimPending.store(false, ordering: .releasing)
            if ledger.withLock({ $0.inUse == 0 }) { RegionRenderer.releaseFreedMemory() }
        }
    }

    /// Seconds from the last drawing out to handing freed memory back.
    static let trimDelay = 1.0
    private let trimPending = Atomic(false)
}

/// Logs each message once per key (a damaged file per pyramid generation, say), so that
/// a fault clients keep asking for is one log line, not one per request. Remembers at
/// most `capacity` keys, then starts afresh.
final class OnceLog: Sendable {
    private let log: Logger
    private let capacity: Int
    private let seen = Mutex<Set<String>>([])

    init(log: Logger, capacity: Int = 10_000) {
        self.log = log
        self.capacity = capacity
    }

    func once(_ key: String, _ message: @autoclosure () -> String) {
        let first = seen.withLock { seen -> Bool in
            if seen.count >= capacity { seen.removeAll() }
            return seen.insert(key).inserted
        }
        if first { log.error("\(message())") }
    }
}
