// What a test can see of loopback sockets from this process: bytes unsent or unread,
// descriptors, ports.
import Foundation
import TilerTestSupport
@testable import TilerHTTP
#if canImport(Glibc)
    import Glibc
#endif

/// Whether everything `c` sent has been taken by the peer (acknowledged: on loopback, in
/// its socket's receive queue); polled, false after `seconds`.
func waitUntilSent(_ c: RawHTTPClient, seconds: Double = 20) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        var unsent: Int32 = 0
        if ioctl(c.fd, UInt(TIOCOUTQ), &unsent) == 0 && unsent == 0 { return true }
        usleep(1000)
    }
    return false
}

func isOpenAndSilent(_ c: RawHTTPClient) -> Bool {
    var byte: UInt8 = 0
    let n = recv(c.fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
}

/// Bytes received by a client and not read yet.
func bytesWaiting(_ c: RawHTTPClient) -> Int {
    var n: Int32 = 0
    return ioctl(c.fd, UInt(FIONREAD), &n) == 0 ? Int(n) : 0
}

/// Open descriptors of this process.
func openDescriptors() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
}

/// A TCP port nothing listens on right now, below the ephemeral range, so that no other
/// test's server (asking for port 0) is given it while this test binds and frees it.
func freePort() throws -> Int {
    for _ in 0..<1000 {
        let port = Int.random(in: 20_000..<30_000)
        if (try? ListeningSocket.checkPortIsFree(host: "127.0.0.1", port: port)) != nil { return port }
    }
    throw ClientError("no free port in 20000..<30000")
}

/// The server's end of loopback connection `client` to `port`: the descriptor in this
/// process whose socket is bound to `port` with `client`'s address as its peer.
func acceptedSocket(port: Int, client: Int32) -> Int32? {
    func portOf(_ fd: Int32, peer: Bool) -> UInt16? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let rc = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { peer ? getpeername(fd, $0, &length) : getsockname(fd, $0, &length) }
        }
        guard rc == 0, address.sin_family == sa_family_t(AF_INET) else { return nil }
        return UInt16(bigEndian: address.sin_port)
    }
    guard let clientPort = portOf(client, peer: false) else { return nil }
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    for fd in entries.compactMap(Int32.init) where fd != client {
        if portOf(fd, peer: false) == UInt16(port) && portOf(fd, peer: true) == clientPort { return fd }
    }
    return nil
}

/// Whether descriptors `a` and `b` are the same open socket (same inode of the socket
/// file system).
func sameSocket(_ a: Int32, _ b: Int32) -> Bool {
    var x = stat(), y = stat()
    return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino
}
