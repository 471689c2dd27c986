import Dispatch
import Foundation
import Synchronization
import TilerSystem

/// Threads that run work which may block: reading a file that is not in the page cache,
/// drawing an image. Event loops hand such work here (see `HTTPResponse.blocking`) and
/// carry on with other connections; each job reports back to its loop when done.
///
/// Each `BlockingKind` has its own lane: its own threads, up to its own cap, and its own
/// queue with a length limit. A tile read never waits behind a drawing, and a flood of
/// drawings cannot take more threads than `--render-threads`. A queued job can be
/// cancelled (its client left) and is then dropped without running.
final class BlockingPool: Sendable {
    /// The threads and the queue length of one lane.
    struct Limits: Sendable, Hashable {
        /// Most threads running this kind of work at once.
        var threads: Int
        /// Most jobs waiting for a thread; `submit` refuses more.
        var queueLength: Int
    }

    /// One submitted piece of work, held by the connection that waits for it.
    struct Job: Sendable {
        fileprivate let lane: Lane
        /// Jobs are numbered in submission order, so the queue stays sorted by number.
        fileprivate let number: Int

        /// Drops the job if no thread has started it: it will never run. Returns whether
        /// it was dropped (false: it is running or done, and its result will come).
        @discardableResult
        func cancel() -> Bool { lane.cancel(number) }
    }

    /// Counts for one lane, for tests and diagnostics.
    struct Statistics: Sendable, Hashable {
        /// Jobs not yet taken by a thread.
        var queued: Int
        /// Jobs running now.
        var running: Int
        /// Jobs that ran to the end.
        var finished: Int
        /// Jobs cancelled before a thread took them.
        var dropped: Int
        /// Jobs refused because the queue was full.
        var refused: Int
        /// Threads started (they stay until `shutdown`).
        var threads: Int
        /// Jobs the lane still holds: queued ones, and cancelled ones no thread has
        /// passed yet (bounded by compaction).
        var held: Int
    }

    fileprivate final class Lane: Sendable {
        /// A job in the queue; `work` is nil once it was cancelled.
        struct Entry {
            let number: Int
            var work: (@Sendable () -> Void)?
        }

        struct State {
            /// From `head` on: jobs in number order, queued or cancelled.
            var entries: [Entry] = []
            var head = 0
            var nextNumber = 0
            var queued = 0
            var running = 0
            var finished = 0
            var dropped = 0
            var refused = 0
            var stopping = false
            var started = 0
            /// Threads waiting for work (or about to).
            var idle = 0
        }

        let limits: Limits
        let name: String
        private let state = Mutex(State())
        /// One signal per submitted job and one per thread at shutdown: a thread waits
        /// here for work.
        private let work = DispatchSemaphore(value: 0)
        private let exited = DispatchGroup()

        init(limits: Limits, name: String) {
            self.limits = Limits(threads: max(1, limits.threads), queueLength: max(1, limits.queueLength))
            self.name = name
        }

        func submit(_ job: @escaping @Sendable () -> Void) -> Job? {
            let (number, spawn) = state.withLock { s -> (Int?, Bool) in
                // Jobs that a started thread not running one will take at once do not
                // wait; the limit is on the others.
                let waiting = s.queued - (s.started - s.running)
                guard !s.stopping, waiting < limits.queueLength else {
                    s.refused += 1
                    return (nil, false)
                }
                // Cancelled jobs wait in the array until a thread passes them; while every
                // thread is busy, clients that come and go could pile them up: compact.
                if s.entries.count - s.head > 2 * (s.queued + 64) {
                    s.entries = s.entries[s.head...].filter { $0.work != nil }
                    s.head = 0
                }
                let number = s.nextNumber
                s.nextNumber += 1
                s.entries.append(Entry(number: number, work: job))
                s.queued += 1
                let spawn = s.queued > s.idle && s.started < limits.threads
                if spawn { s.started += 1 }
                return (number, spawn)
            }
            guard let number else { return nil }
            work.signal()
            if spawn {
                exited.enter()
                let thread = Thread { [self] in
                    nameThisThread(name)  // shown by top -H, /proc/PID/task/*/comm
                    runJobs()
                    exited.leave()
                }
                thread.name = name
                thread.stackSize = 4 << 20  // libvips and libpng calls run here
                thread.start()
            }
            return Job(lane: self, number: number)
        }

        /// Drops job `number` if it is still queued.
        func cancel(_ number: Int) -> Bool {
            state.withLock { s in
                // Entries from `head` on are sorted by number: find it by bisection.
                var low = s.head, high = s.entries.count
                while low < high {
                    let mid = (low + high) / 2
                    if s.entries[mid].number < number { low = mid + 1 } else { high = mid }
                }
                guard low < s.entries.count, s.entries[low].number == number, s.entries[low].work != nil else {
                    return false
                }
                s.entries[low].work = nil
                s.queued -= 1
                s.dropped += 1
                return true
            }
        }

        var statistics: Statistics {
            state.withLock { s in
                Statistics(
                    queued: s.queued, running: s.running, finished: s.finished, dropped: s.dropped,
                    refused: s.refused, threads: s.started, held: s.entries.count - s.head)
            }
        }

        /// Drops every queued job, lets the threads exit once their current job is done,
        /// and waits for them until `deadline`.
        func shutdown(deadline: DispatchTime) {
            let threads = state.withLock { s in
                s.stopping = true
                s.dropped += s.queued
                s.entries.removeAll()
                s.head = 0
                s.queued = 0
                return s.started
            }
            for _ in 0..<threads { work.signal() }
            // Past the deadline a job still running is left to finish on its own: the
            // process is exiting, and nothing waits for its answer.
            _ = exited.wait(timeout: deadline)
        }

        /// The next job to run, or nil when the lane is stopping. A wake-up whose job was
        /// cancelled meanwhile finds nothing and waits again.
        private func next() -> (@Sendable () -> Void)? {
            while true {
                state.withLock { $0.idle += 1 }
                work.wait()
                let taken = state.withLock { s -> (@Sendable () -> Void)?? in
                    s.idle -= 1
                    guard s.queued > 0 else { return s.stopping ? .some(nil) : nil }
                    // Cancelled jobs stay in the array until a thread passes them.
                    while s.entries[s.head].work == nil { s.head += 1 }
                    let job = s.entries[s.head].work
                    s.head += 1
                    if s.head == s.entries.count {
                        s.entries.removeAll(keepingCapacity: true)
                        s.head = 0
                    } else if s.head >= 1024 && s.head * 2 >= s.entries.count {
                        s.entries.removeFirst(s.head)
                        s.head = 0
                    }
                    s.queued -= 1
                    s.running += 1
                    return .some(job)
                }
                if let taken { return taken }
            }
        }

        private func runJobs() {
            while let job = next() {
                job()
                state.withLock { s in
                    s.running -= 1
                    s.finished += 1
                }
            }
        }
    }

    private let read: Lane
    private let render: Lane
    private let storage: Lane

    /// Threads are started as work arrives, up to each lane's cap; a server whose
    /// requests never block starts none.
    init(read: Limits, render: Limits, storage: Limits = Limits(threads: 16, queueLength: 256)) {
        self.read = Lane(limits: read, name: "tiler-read")
        self.render = Lane(limits: render, name: "tiler-render")
        self.storage = Lane(limits: storage, name: "tiler-storage")
    }

    private func lane(_ kind: BlockingKind) -> Lane {
        switch kind {
        case .read: read
        case .render: render
        case .storage: storage
        }
    }

    /// Queues `work` in `kind`'s lane, or returns nil when that queue is full (or the pool
    /// is shutting down): the caller answers 503.
    func submit(_ kind: BlockingKind, _ work: @escaping @Sendable () -> Void) -> Job? {
        lane(kind).submit(work)
    }

    func statistics(_ kind: BlockingKind) -> Statistics { lane(kind).statistics }

    /// Drops the queued jobs and waits until `deadline` for the running ones to finish.
    func shutdown(deadline: DispatchTime) {
        read.shutdown(deadline: deadline)
        render.shutdown(deadline: deadline)
        storage.shutdown(deadline: deadline)
    }
}
