import TilerSystem

/// One client connection: its socket, its state machine and its pool job. Owned by
/// exactly one event loop.
final class Connection {
    let socket: Socket
    /// Tells this connection from a later one given the same descriptor number.
    let serial: UInt64
    /// The serial's low half, which epoll gives back with each event.
    var tag: UInt32 { Connection.tag(serial) }
    static func tag(_ serial: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: serial) }
    /// The state machine, in memory of its own. Reached through a pointer rather than a
    /// stored property: every access to a class's stored property is checked at run time
    /// for overlap (about 70 instructions each, a tenth of a cached tile's instructions in
    /// all). Nothing can overlap here: only this connection's loop touches it, one call
    /// at a time, and the handler it calls sees only the request head, never a connection.
    private let state: UnsafeMutablePointer<ConnectionStateMachine>
    var machine: ConnectionStateMachine {
        _read { yield state.pointee }
        _modify { yield &state.pointee }
    }
    /// What epoll watches for now.
    var registered: Interest
    /// The pool job making its answer, to cancel if the connection closes first.
    var job: BlockingPool.Job?
    /// The client's address (`1.2.3.4:5678`, `[::1]:5678`), read only for the access log.
    var peer = ""

    init(socket: Socket, serial: UInt64, machine: ConnectionStateMachine, registered: Interest) {
        self.socket = socket
        self.serial = serial
        state = .allocate(capacity: 1)
        state.initialize(to: machine)
        self.registered = registered
    }

    deinit {
        state.deinitialize(count: 1)
        state.deallocate()
    }
}
