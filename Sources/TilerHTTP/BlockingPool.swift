import CNetShims
import Foundation

/// Threads that run work which may block: reading a file that is not in the page cache,
/// drawing an image. Event loops hand such work here (see `HTTPResponse.blocking`) and
/// carry on with other connections; each job reports back to its loop when done.
///
/// Each `BlockingKind` has its own lane: its own threads, up to its own cap, and its own
/// queue with a length limit. A tile read never waits behind a drawing, and a flood of
/// drawings cannot take more threads than `--render-threads`. A queued job can be
/// cancelled (its client left) and is then dropped without running.
final class BlockingPool: @unchecked Sendable {
    /// The threads and the queue length of one lane.
    struct Limits: Sendable, Hashable {
        /// Most threads running this kind of work at once.
        var threads: Int
        /// Most jobs waiting for a thread; `submit` refuses more.
        var queueLength: Int
    }

    /// One submitted piece of work, held by the connection that waits for it.
    final class Job: @unchecked Sendable {
        fileprivate enum State { case queued, running, finished, dropped }
        /// Guarded by the lane's condition.
        fileprivate var state = State.queued
        fileprivate var work: (@Sendable () -> Void)?
        fileprivate let lane: Lane

        fileprivate init(lane: Lane, work: @escaping @Sendable () -> Void) {
            self.lane = lane
            self.work = work
        }

        /// Drops the job if no thread has started it: it will never run. Returns whether
        /// it was dropped (false: it is running or done, and its result will come).
        @discardableResult
        func cancel() -> Bool {
            lane.condition.lock()
            defer { lane.condition.unlock() }
            guard state == .queued else { return false }
            state = .dropped
            work = nil
            lane.queued -= 1
            lane.dropped += 1
            return true
        }
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

    fileprivate final class Lane: @unchecked Sendable {
        let condition = NSCondition()
        let limits: Limits
        let name: String
        private var jobs: [Job] = []
        private var head = 0
        var queued = 0
        var running = 0
        var finished = 0
        var dropped = 0
        var refused = 0
        private var stopping = false
        private var started = 0
        private var idle = 0
        private let exited = DispatchGroup()

        init(limits: Limits, name: String) {
            self.limits = Limits(threads: max(1, limits.threads), queueLength: max(1, limits.queueLength))
            self.name = name
        }

        func submit(_ work: @escaping @Sendable () -> Void) -> Job? {
            condition.lock()
            // Jobs that a started thread not running one will take at once do not wait;
            // the limit is on the others.
            let waiting = queued - (started - running)
            guard !stopping, waiting < limits.queueLength else {
                refused += 1
                condition.unlock()
                return nil
            }
            // Cancelled jobs wait in the array until a thread passes them; while every
            // thread is busy, clients that come and go could pile them up: compact.
            if jobs.count - head > 2 * (queued + 64) {
                jobs = jobs[head...].filter { $0.state == .queued }
                head = 0
            }
            let job = Job(lane: self, work: work)
            jobs.append(job)
            queued += 1
            let spawn = queued > idle && started < limits.threads
            if spawn { started += 1 }
            condition.signal()
            condition.unlock()
            if spawn {
                exited.enter()
                let thread = Thread { [self] in
                    cns_name_thread(name)  // shown by top -H, /proc/PID/task/*/comm
                    runJobs()
                    exited.leave()
                }
                thread.name = name
                thread.stackSize = 4 << 20  // libvips and libpng calls run here
                thread.start()
            }
            return job
        }

        var statistics: Statistics {
            condition.lock()
            defer { condition.unlock() }
            return Statistics(queued: queued, running: running, finished: finished, dropped: dropped, refused: refused,
                              threads: started, held: jobs.count - head)
        }

        /// Drops every queued job, lets the threads exit once their current job is done,
        /// and waits for them until `deadline`.
        func shutdown(deadline: DispatchTime) {
            condition.lock()
            stopping = true
            for job in jobs[head...] where job.state == .queued {
                job.state = .dropped
                job.work = nil
                dropped += 1
            }
            jobs.removeAll()
            head = 0
            queued = 0
            condition.broadcast()
            condition.unlock()
            _ = exited.wait(timeout: deadline)
        }

        private func runJobs() {
            condition.lock()
            while true {
                idle += 1
                while queued == 0 && !stopping { condition.wait() }
                idle -= 1
                guard queued > 0 else { break }
                // Cancelled jobs stay in the array until a thread passes them.
                var job = jobs[head]
                while job.state != .queued {
                    head += 1
                    job = jobs[head]
                }
                head += 1
                if head == jobs.count {
                    jobs.removeAll(keepingCapacity: true)
                    head = 0
                } else if head >= 1024 && head * 2 >= jobs.count {
                    jobs.removeFirst(head)
                    head = 0
                }
                job.state = .running
                queued -= 1
                running += 1
                let work = job.work
                job.work = nil
                condition.unlock()
                work?()
                condition.lock()
                job.state = .finished
                running -= 1
                finished += 1
            }
            condition.unlock()
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
