/// Told of what a server does, as it does it: each answer and each connection refused at
/// the cap (metrics). Called on the event loops, once per answer: it must be quick and
/// must not block. A class: the connections keep a reference to it, and a reference is
/// what a connection's state can copy for the price of a retain (an existential of any
/// other type makes every connection's state a value only its type's witnesses can copy).
public protocol HTTPObserver: AnyObject, Sendable {
    /// An answer was queued for `head`: its status, its body's bytes, and the milliseconds
    /// from the request's first byte (on the loop's coarse clock, time on the blocking
    /// pool included).
    func answered(_ head: borrowing HTTPRequestHead, status: Int, bytes: Int, milliseconds: Int64)
    /// An answer was queued for a request that never parsed (400, 408, 413, 431, …) or
    /// that the stop cut off (503).
    func answeredUnreadRequest(status: Int, bytes: Int, milliseconds: Int64)
    /// A connection was refused at the connection limit (answered 503 and closed).
    func refusedConnection()
}
