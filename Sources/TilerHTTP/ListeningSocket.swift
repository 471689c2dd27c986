import Glibc
import TilerSystem

/// One listening TCP socket of the server, bound and listening.
struct ListeningSocket {
    let socket: Socket
    /// The port it is bound to (the one the kernel picked when 0 was asked).
    let port: Int

    /// Creates a non-blocking socket bound to `host:port` with `SO_REUSEADDR` and
    /// `SO_REUSEPORT`, so that every loop can bind the same port, and listens.
    static func bind(host: String, port: Int, backlog: Int) throws(SystemCallError) -> ListeningSocket {
        try bind(host: host, port: port, backlog: backlog, reusePort: true)
    }

    /// Fails with `EADDRINUSE` when any socket, of this process or another, already
    /// listens on `host:port`: binds once without `SO_REUSEPORT`, then lets go.
    static func checkPortIsFree(host: String, port: Int) throws(SystemCallError) {
        try bind(host: host, port: port, backlog: 1, reusePort: false).socket.close()
    }

    private static func bind(host: String, port: Int, backlog: Int, reusePort: Bool) throws(SystemCallError)
        -> ListeningSocket
    {
        let literal = host == "localhost" ? "127.0.0.1" : host
        guard HTTPConfiguration.Range.port.contains(port) else { throw SystemCallError("bind", "to port \(port)", errno: EINVAL) }
        guard let address = SocketAddress(literal: literal, port: port) else {
            throw SystemCallError("bind", "to '\(host)' (use an IPv4 or IPv6 address, e.g. 0.0.0.0)", errno: EINVAL)
        }
        let socket = try Socket.tcp(family: address.family)
        do throws(SystemCallError) {
            try socket.setOption(level: SOL_SOCKET, SO_REUSEADDR, 1, "setsockopt(SO_REUSEADDR)")
            if reusePort { try socket.setOption(level: SOL_SOCKET, SO_REUSEPORT, 1, "setsockopt(SO_REUSEPORT)") }
            if address.family == AF_INET6 {
                // Dual stack: `::` also takes IPv4 clients.
                try socket.setOption(level: Int32(IPPROTO_IPV6), IPV6_V6ONLY, 0, "setsockopt(IPV6_V6ONLY)")
            }
            do throws(SystemCallError) {
                try socket.bind(to: address)
                try socket.listen(backlog: backlog)
            } catch {
                throw error.on(error.call == "bind" ? "to \(host):\(port)" : "on \(host):\(port)")
            }
            return ListeningSocket(socket: socket, port: try socket.localPort())
        } catch {
            socket.close()
            throw error
        }
    }
}
