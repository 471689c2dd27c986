import Foundation

/// A bounded set of threads that run work which may block: reading a file that is not in
/// the page cache, drawing an image. Event loops hand such work here (see
/// `HTTPResponse.blocking`) and carry on with other connections; each job reports back
/// to its loop when done.
final class BlockingPool: @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var head = 0
    private var stopping = false
    private let finished = DispatchGroup()
    private let maximumThreads: Int
    private var started = 0
    private var idle = 0

    /// Threads are started as work arrives, up to `threads`; a server whose requests
    /// never block starts none.
    init(threads: Int) {
        maximumThreads = max(1, threads)
    }

    /// Queues `job`; it runs on one of the pool's threads.
    func submit(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        jobs.append(job)
        let spawn = jobs.count - head > idle && started < maximumThreads && !stopping
        if spawn { started += 1 }
        condition.signal()
        condition.unlock()
        if spawn {
            finished.enter()
            let thread = Thread { [self] in
                work()
                finished.leave()
            }
            thread.name = "tiler-blocking"
            thread.stackSize = 4 << 20  // libvips and libpng calls run here
            thread.start()
        }
    }

    /// Lets the threads finish the queued jobs, then exit; waits for them.
    func shutdown() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
        finished.wait()
    }

    private func work() {
        while true {
            condition.lock()
            idle += 1
            while head == jobs.count && !stopping { condition.wait() }
            idle -= 1
            if head == jobs.count {
                condition.unlock()
                return
            }
            let job = jobs[head]
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1024 && head * 2 >= jobs.count {
                // A queue that never empties under load: drop the finished front.
                jobs.removeFirst(head)
                head = 0
            }
            condition.unlock()
            job()
        }
    }
}
