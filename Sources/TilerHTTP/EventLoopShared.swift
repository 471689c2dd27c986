import Dispatch
import Logging
import Synchronization
import TilerSystem

/// What an event loop is given: what all loops share, the mailbox other threads post
/// completions to, and the resources it is made of before it runs.
extension EventLoop {
    /// What all loops of a server share.
    final class Shared: Sendable {
        let settings: ConnectionSettings
        let accessLog: Logger?
        /// Faults no answer shows (see `HTTPServer.init`).
        let log: Logger
        let maximumConnections: Int
        let connectionCount: Atomic<Int>
        let pool: BlockingPool
        let clock: any ServerClock
        /// Milliseconds a stop gives the requests in flight.
        let gracePeriod: Int64
        /// `SO_SNDBUF` for accepted sockets, or nil for the kernel's.
        let sendBufferBytes: Int?
        /// `HTTPConfiguration.yieldsAfterEachBatch`.
        let yieldsAfterEachBatch: Bool
        /// The observer the connections' settings name without retaining it: held here.
        let observer: (any HTTPObserver)?

        init(
            configuration: HTTPConfiguration, accessLog: Logger?, log: Logger, maximumConnections: Int,
            pool: BlockingPool, clock: any ServerClock, sendBufferBytes: Int? = nil, observer: (any HTTPObserver)? = nil
        ) {
            settings = ConnectionSettings(configuration: configuration, recordsAnswers: accessLog != nil, observer: observer)
            self.accessLog = accessLog
            self.log = log
            self.maximumConnections = maximumConnections
            connectionCount = Atomic(0)
            self.pool = pool
            self.clock = clock
            gracePeriod = HTTPConfiguration.milliseconds(configuration.shutdownGracePeriod)
            self.sendBufferBytes = sendBufferBytes
            yieldsAfterEachBatch = configuration.yieldsAfterEachBatch
            self.observer = observer
        }
    }

    /// A pool job's answer, for the connection `descriptor` had when it was submitted.
    struct Completion: Sendable {
        let descriptor: Int32
        let serial: UInt64
        let response: HTTPResponse
    }

    /// What other threads hand a loop: pool answers and the request to stop, with the
    /// eventfd that wakes it.
    final class Mailbox: Sendable {
        private struct Contents {
            var completions: [Completion] = []
            var stopRequested = false
            /// The loop has exited and closed the eventfd (its number may belong to
            /// another file by now): nothing may write to it.
            var closed = false
        }

        private let wake: EventFD
        private let contents = Mutex(Contents())

        init(wake: EventFD) {
            self.wake = wake
        }

        /// Asks the loop to drain and exit; any thread, any number of times.
        func stop() {
            contents.withLock { c in
                c.stopRequested = true
                if !c.closed { wakeLoop() }
            }
        }

        /// Hands a pool job's answer to the loop; false once the loop has exited.
        func deliver(_ completion: Completion) -> Bool {
            contents.withLock { c in
                guard !c.closed else { return false }
                c.completions.append(completion)
                // Under the lock: the loop closes the eventfd under it too.
                wakeLoop()
                return true
            }
        }

        /// What arrived since the last call.
        func take() -> (stopRequested: Bool, completions: [Completion]) {
            contents.withLock { c in
                defer { c.completions.removeAll(keepingCapacity: true) }
                return (c.stopRequested, c.completions)
            }
        }

        /// Closes the eventfd; later deliveries are refused.
        func close() {
            contents.withLock { c in
                guard !c.closed else { return }
                c.closed = true
                c.completions.removeAll()
                wake.close()
            }
        }

        private func wakeLoop() {
            do {
                try wake.signal()
            } catch {
                // Only EBADF or EINVAL could land here (a bug): the loop still wakes within
                // its sweep interval and reads the mailbox then.
            }
        }
    }

    /// What a loop is made of before it runs: made by `HTTPServer.start()` on its own
    /// thread, so that a failure is reported there, then handed to the loop's thread.
    struct Resources: Sendable {
        let epoll: Epoll
        let wake: EventFD
        let listener: Socket
        let mailbox: Mailbox

        /// An epoll instance watching `listener` and a new eventfd. On failure everything
        /// made is closed, and `listener` is left to the caller.
        static func make(listener: Socket) throws(SystemCallError) -> Resources {
            let epoll = try Epoll.make()
            do throws(SystemCallError) {
                let wake = try EventFD.make()
                do throws(SystemCallError) {
                    try epoll.add(listener.descriptor, .read)
                    try epoll.add(wake.descriptor, .read)
                } catch {
                    wake.close()
                    throw error
                }
                return Resources(epoll: epoll, wake: wake, listener: listener, mailbox: Mailbox(wake: wake))
            } catch {
                epoll.close()
                throw error
            }
        }

        /// Releases everything, for a loop that will never run.
        func discard() {
            mailbox.close()
            listener.close()
            epoll.close()
        }
    }
}
