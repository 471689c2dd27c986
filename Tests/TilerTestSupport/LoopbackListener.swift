import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// A TCP socket bound to a free port of 127.0.0.1, closed when this goes. Listening, it
/// never accepts by itself: connections complete in the kernel's backlog and nothing
/// answers them. Bound only (`listening: false`), its port refuses connections for as long
/// as this is held (a port bound and released again can be taken meanwhile by any socket
/// of the tests running in parallel, and then answers).
public final class LoopbackListener: Sendable {
    public let descriptor: Int32
    public let port: Int

    public init(listening: Bool = true) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw ClientError("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ready = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(descriptor, pointer, length) == 0 && (!listening || listen(descriptor, 16) == 0)
                    && getsockname(descriptor, pointer, &length) == 0
            }
        }
        guard ready else {
            let code = errno
            close(descriptor)
            throw ClientError("cannot \(listening ? "listen" : "bind") on loopback: errno \(code)")
        }
        self.descriptor = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit {
        shutdown(descriptor, Int32(SHUT_RDWR))
        close(descriptor)
    }
}

/// A port of 127.0.0.1 in `ports` that nothing listens on right now, for a process that
/// binds it itself (chromedriver, nginx, Prometheus). Each test target picks a range below
/// the ephemeral one (32768 and up), from which the kernel hands out the ports of every
/// client socket and port-0 server of the tests running in parallel: one of those could
/// otherwise take the port before the process binds it.
public func unusedLoopbackPort(in ports: Range<Int>) throws -> Int {
    for _ in 0..<1000 {
        let port = Int.random(in: ports)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { continue }
        defer { close(fd) }
        var reuse: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port)).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        if bound { return port }
    }
    throw SupportError(description: "no free port in \(ports.lowerBound)..<\(ports.upperBound)")
}
