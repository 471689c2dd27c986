import Glibc
import Testing
import TilerSystem
import TilerTestSupport
@testable import TilerHTTP

/// The system-call layer: failures are thrown with their errno, never dropped, and a
/// call that would block says so instead of failing.
@Suite struct SystemCallTests {
    /// A pair of connected loopback sockets, non-blocking.
    private func connectedPair() throws -> (client: Socket, server: Socket, listener: Socket) {
        let listener = try ListeningSocket.bind(host: "127.0.0.1", port: 0, backlog: 4)
        let client = try Socket.tcp(family: AF_INET)
        _ = try client.connect(to: SocketAddress(literal: "127.0.0.1", port: listener.port)!)
        var accepted: Socket?
        _ = try eventually {
            if case .done(let s) = try listener.socket.accept() { accepted = s }
            return accepted != nil
        }
        return (client, try #require(accepted), listener.socket)
    }

    @Test func anEpollControlFailureIsThrownWithItsErrno() throws {
        let epoll = try Epoll.make()
        defer { epoll.close() }
        let wake = try EventFD.make()
        defer { wake.close() }
        #expect(throws: SystemCallError("epoll_ctl(MOD)", errno: ENOENT)) { try epoll.modify(wake.descriptor, .read) }
        try epoll.add(wake.descriptor, .read)
        #expect(throws: SystemCallError("epoll_ctl(ADD)", errno: EEXIST)) { try epoll.add(wake.descriptor, .read) }
        do {
            try epoll.add(FileDescriptor(rawValue: 1_000_000), .read)
            Issue.record("adding a descriptor that does not exist succeeded")
        } catch {
            #expect(error.errno == EBADF && error.description.contains("epoll_ctl(ADD)"))
        }
    }

    @Test func readingAnEmptyNonBlockingSocketWouldBlock() throws {
        let (client, server, listener) = try connectedPair()
        defer { client.close(); server.close(); listener.close() }
        var buffer = [UInt8](repeating: 0, count: 16)
        let empty = try buffer.withUnsafeMutableBytes { try server.receive(into: $0) }
        #expect(empty == .wouldBlock)
        let sent = try Array("hello".utf8).withUnsafeBytes { try client.send($0) }
        #expect(sent == .done(5))
        var got: IOResult<Int> = .wouldBlock
        _ = try eventually {
            got = try buffer.withUnsafeMutableBytes { try server.receive(into: $0) }
            return got != .wouldBlock
        }
        #expect(got == .done(5))
        try client.shutdown(.write)
        var end: IOResult<Int> = .wouldBlock
        _ = try eventually {
            end = try buffer.withUnsafeMutableBytes { try server.receive(into: $0) }
            return end != .wouldBlock
        }
        #expect(end == .done(0), "the end of the stream is a read of 0 bytes")
    }

    @Test func aFullSocketBufferWouldBlockInsteadOfFailing() throws {
        let (client, server, listener) = try connectedPair()
        defer { client.close(); server.close(); listener.close() }
        try server.setSendBufferSize(4096)
        let chunk = [UInt8](repeating: 1, count: 65536)
        var total = 0
        var blocked = false
        for _ in 0..<10_000 {
            switch try chunk.withUnsafeBytes({ try server.send($0) }) {
            case .done(let n): total += n
            case .wouldBlock: blocked = true
            }
            if blocked { break }
        }
        #expect(blocked && total > 0)
    }

    @Test func sendingToAClosedPeerThrowsInsteadOfRaisingSIGPIPE() throws {
        let (client, server, listener) = try connectedPair()
        defer { server.close(); listener.close() }
        client.close()
        let chunk = [UInt8](repeating: 1, count: 65536)
        var failure: SystemCallError?
        _ = eventually {
            let attempt = chunk.withUnsafeBytes { b in Result { () throws(SystemCallError) in try server.send(b) } }
            if case .failure(let error) = attempt { failure = error }
            return failure != nil
        }
        #expect(failure?.errno == EPIPE || failure?.errno == ECONNRESET)
    }

    @Test func fileCallsCarryTheirErrno() {
        do {
            _ = try FileDescriptor.open("/nonexistent-\(getpid())/file", O_RDONLY)
            Issue.record("opened a file that does not exist")
        } catch {
            #expect(error.errno == ENOENT && error.call == "open")
            #expect(error.description.contains("/nonexistent-"))
        }
    }
}
