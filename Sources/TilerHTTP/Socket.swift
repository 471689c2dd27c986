import CNetShims
import Glibc

/// A failed system call: which one, on what, and `errno`.
public struct SocketError: Error, Sendable, Hashable, CustomStringConvertible {
    public let call: String
    public let errno: Int32
    public let detail: String

    init(_ call: String, _ detail: String = "", errno: Int32 = Glibc.errno) {
        self.call = call
        self.errno = errno
        self.detail = detail
    }

    public var description: String {
        let reason = String(cString: strerror(errno))
        return detail.isEmpty ? "\(call) failed: \(reason)" : "\(call) \(detail) failed: \(reason)"
    }
}

/// One listening TCP socket: a file descriptor with one throwing method per system call.
struct ListeningSocket {
    let fd: Int32

    /// Creates a non-blocking socket bound to `host:port` with `SO_REUSEADDR` and
    /// `SO_REUSEPORT`, so that every loop can bind the same port, and listens.
    static func bind(host: String, port: Int, backlog: Int) throws(SocketError) -> ListeningSocket {
        try bind(host: host, port: port, backlog: backlog, reusePort: true)
    }

    /// Fails with `EADDRINUSE` when any socket, of this process or another, already
    /// listens on `host:port`: binds once without `SO_REUSEPORT`, then lets go.
    static func checkPortIsFree(host: String, port: Int) throws(SocketError) {
        let probe = try bind(host: host, port: port, backlog: 1, reusePort: false)
        close(probe.fd)
    }

    private static func bind(host: String, port: Int, backlog: Int, reusePort: Bool) throws(SocketError) -> ListeningSocket {
        let literal = host == "localhost" ? "127.0.0.1" : host
        let family: Int32
        switch cns_address_family(literal) {
        case 4: family = AF_INET
        case 6: family = AF_INET6
        default: throw SocketError("bind", "to '\(host)' (use an IPv4 or IPv6 address, e.g. 0.0.0.0)", errno: EINVAL)
        }
        guard (0...65535).contains(port) else { throw SocketError("bind", "to port \(port)", errno: EINVAL) }
        let fd = cns_tcp_socket(family)
        guard fd >= 0 else { throw SocketError("socket") }
        guard cns_set_reuse_address(fd) == 0, !reusePort || cns_set_reuse_port(fd) == 0 else {
            let e = SocketError("setsockopt(SO_REUSEPORT)")
            close(fd)
            throw e
        }
        if family == AF_INET6 { _ = cns_set_v6_only(fd, 0) }
        guard cns_bind(fd, family, literal, UInt16(port)) == 0 else {
            let e = SocketError("bind", "to \(host):\(port)")
            close(fd)
            throw e
        }
        guard Glibc.listen(fd, Int32(backlog)) == 0 else {
            let e = SocketError("listen", "on \(host):\(port)")
            close(fd)
            throw e
        }
        return ListeningSocket(fd: fd)
    }

    /// The port the socket is bound to.
    var port: Int { Int(cns_local_port(fd)) }
}

/// Clocks and file metadata the server needs, without Foundation.
public enum SystemClock {
    /// Milliseconds from a cheap monotonic clock (a few ms of resolution).
    @inline(__always)
    public static func monotonicMilliseconds() -> Int64 { cns_monotonic_ms() }
    /// Wall-clock seconds since 1970.
    public static func wallSeconds() -> Int64 { cns_wall_seconds() }
}

/// What `stat` says about a file: enough to build validators and notice changes.
public struct FileInfo: Sendable, Hashable {
    public let size: Int
    public let modificationSeconds: Int64
    public let modificationNanoseconds: Int64
    public let inode: UInt64
    /// The file system it lives on (`st_dev`).
    public let device: UInt64
    public let isRegularFile: Bool
    public let isDirectory: Bool

    init(_ i: cns_file_info) {
        size = Int(i.size)
        modificationSeconds = i.mtime_sec
        modificationNanoseconds = i.mtime_nsec
        inode = i.inode
        device = i.device
        isRegularFile = i.is_regular != 0
        isDirectory = i.is_directory != 0
    }

    /// A strong entity tag from size, modification time and inode, e.g. `"1000-65f0a1b2.1c-3f2a"`.
    public var entityTag: String {
        "\"\(String(size, radix: 16))-\(String(modificationSeconds, radix: 16)).\(String(modificationNanoseconds, radix: 16))-\(String(inode, radix: 16))\""
    }
}
