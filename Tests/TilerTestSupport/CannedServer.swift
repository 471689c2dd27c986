import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// Listens on a free port of 127.0.0.1 and answers every connection with `reply`, then
/// closes it; with `reply == nil`, holds it open without a word. Keeps each request head.
///
/// The accepting thread owns the listener: it is closed only when that thread has left
/// `accept`, never while the thread may still call it. (Closing it from outside let a
/// thread that had not yet reached `accept` on a loaded machine accept on the descriptor
/// number reused by the next test's listener, and answer that test's request.) `stop()`,
/// or this going away, only shuts the socket down, which makes a waiting or later
/// `accept` fail.
public final class CannedServer: Sendable {
    private struct Connections {
        var requests: [String] = []
        var held: [Int32] = []
        var stopped = false
    }
    private let listener: LoopbackListener
    private let connections = Locked(Connections())

    public var port: Int { listener.port }

    /// The request heads received so far.
    public var requests: [String] { connections.withLock { $0.requests } }

    public init(reply: String?) throws {
        let listener = try LoopbackListener()
        self.listener = listener
        let connections = connections
        let reply = reply.map { Array($0.utf8) }
        Thread {
            while true {
                let connection = accept(listener.descriptor, nil, nil)
                guard connection >= 0 else { return }
                let request = Self.readRequestHead(connection)
                connections.withLock { $0.requests.append(request) }
                guard let reply else {
                    // A connection accepted just before `stop` is closed, not held forever.
                    connections.withLock { if $0.stopped { close(connection) } else { $0.held.append(connection) } }
                    continue
                }
                reply.withUnsafeBytes { _ = send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(connection)
            }
        }.start()
    }

    deinit { stop() }

    /// Stops accepting, and closes the connections held open.
    public func stop() {
        shutdown(listener.descriptor, Int32(SHUT_RDWR))
        connections.withLock {
            $0.stopped = true
            $0.held.forEach { _ = close($0) }
            $0.held = []
        }
    }

    private static func readRequestHead(_ connection: Int32) -> String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while !String(decoding: bytes, as: UTF8.self).contains("\r\n\r\n") {
            let n = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            bytes += chunk[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
