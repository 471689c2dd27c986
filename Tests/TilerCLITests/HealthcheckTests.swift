import Foundation
import Glibc
import Testing
import TilerTestSupport

/// `tiler healthcheck`, run as the built binary against loopback listeners that answer
/// with canned bytes: the exit status and the one line it prints are the contract the
/// container's HEALTHCHECK relies on.
@Suite struct HealthcheckTests {
    @Test func answers200IsHealthy() throws {
        let server = try CannedServer(reply: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        defer { server.stop() }
        let run = try runTiler(["healthcheck", "--port", "\(server.port)"])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == "healthy: http://127.0.0.1:\(server.port)/healthz answered 200\n")
        let request = try #require(server.requests.first)
        #expect(request.hasPrefix("GET /healthz HTTP/1.1\r\n"))
        #expect(request.contains("\r\nHost: 127.0.0.1:\(server.port)\r\n"))
    }

    @Test(arguments: [204, 301, 404, 500, 503])
    func anyOtherStatusIsUnhealthy(status: Int) throws {
        let server = try CannedServer(reply: "HTTP/1.1 \(status) Whatever\r\nContent-Length: 0\r\n\r\n")
        defer { server.stop() }
        let run = try runTiler(["healthcheck", "--port", "\(server.port)"])
        #expect(run.status == 1, "\(run)")
        #expect(run.stderr == "unhealthy: http://127.0.0.1:\(server.port)/healthz answered \(status), not 200\n")
        #expect(run.stdout.isEmpty)
    }

    @Test func nothingListeningIsUnhealthy() throws {
        let closed = try ClosedPort()
        defer { closed.release() }
        let port = closed.port
        let run = try runTiler(["healthcheck", "--port", "\(port)"])
        #expect(run.status == 1, "\(run)")
        #expect(run.stderr == "unhealthy: cannot connect to http://127.0.0.1:\(port)/healthz: Connection refused\n")
    }

    @Test func silentServerTimesOut() throws {
        let server = try CannedServer(reply: nil)
        defer { server.stop() }
        let run = try runTiler(["healthcheck", "--port", "\(server.port)", "--timeout", "0.5"])
        #expect(run.status == 1, "\(run)")
        #expect(run.stderr.hasSuffix("timed out after 0.5 s while waiting for the answer\n"), "\(run)")
        // The message names the 0.5 s given (the default is 3 s); how much longer the run
        // took than that is the machine's load, not the flag's doing, so only the lower
        // bound is checked.
        #expect(run.seconds >= 0.45, "took \(run.seconds) s")
    }

    @Test(arguments: [
        ("SSH-2.0-OpenSSH_9.2\r\n", "did not answer HTTP: 'SSH-2.0-OpenSSH_9.2'"),
        ("HTTP/1.1 2000 OK\r\n\r\n", "did not answer HTTP: 'HTTP/1.1 2000 OK'"),
        ("", "closed the connection before sending a status line"),
    ])
    func notHTTPIsUnhealthy(reply: String, reason: String) throws {
        let server = try CannedServer(reply: reply)
        defer { server.stop() }
        let run = try runTiler(["healthcheck", "--port", "\(server.port)"])
        #expect(run.status == 1, "\(run)")
        #expect(run.stderr == "unhealthy: http://127.0.0.1:\(server.port)/healthz \(reason)\n")
    }

    @Test func portComesFromTilerPortUnlessGiven() throws {
        let server = try CannedServer(reply: "HTTP/1.0 200 OK\r\n\r\n")
        defer { server.stop() }
        let fromEnvironment = try runTiler(["healthcheck"], environment: ["TILER_PORT": "\(server.port)"])
        #expect(fromEnvironment.status == 0, "\(fromEnvironment)")

        let closed = try ClosedPort()
        defer { closed.release() }
        let flagWins = try runTiler(["healthcheck", "--port", "\(closed.port)"], environment: ["TILER_PORT": "\(server.port)"])
        #expect(flagWins.status == 1, "\(flagWins)")
        #expect(flagWins.stderr.contains(":\(closed.port)/healthz"))
    }

    @Test(arguments: ["abc", "0", "65536", "80a"])
    func badTilerPortIsUnhealthyWithAReason(value: String) throws {
        let run = try runTiler(["healthcheck"], environment: ["TILER_PORT": value])
        #expect(run.status == 1, "\(run)")
        #expect(run.stderr == "unhealthy: TILER_PORT is '\(value)', not a port number between 1 and 65535\n")
    }

    @Test(arguments: [["--port", "0"], ["--port", "70000"], ["--timeout", "0"], ["--timeout", "nan"]])
    func badFlagsAreUsageErrors(flags: [String]) throws {
        let run = try runTiler(["healthcheck"] + flags)
        #expect(run.status == 64, "\(run)")
        #expect(run.stderr.contains("Usage: tiler healthcheck"), "\(run)")
    }
}

// MARK: - Running the built binary

private struct Run: CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String
    var seconds: Double
    var description: String { "exit \(status) after \(seconds) s, stdout \(stdout.debugDescription), stderr \(stderr.debugDescription)" }
}

private func runTiler(_ arguments: [String], environment: [String: String] = [:]) throws -> Run {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: try tilerBinary())
    process.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    env["TILER_PORT"] = nil
    env.merge(environment) { $1 }
    process.environment = env
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    let started = Date()
    try process.run()
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    let stderr = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return Run(
        status: process.terminationStatus,
        stdout: String(decoding: stdout, as: UTF8.self),
        stderr: String(decoding: stderr, as: UTF8.self),
        seconds: Date().timeIntervalSince(started)
    )
}

// MARK: - A listener with a canned answer

/// Listens on 127.0.0.1 on a free port; answers every connection with `reply` and closes
/// it, or with `reply == nil` holds the connection open without a word.
private final class CannedServer: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private let reply: [UInt8]?
    private let lock = NSLock()
    private var received: [String] = []
    private var held: [Int32] = []
    private var stopped = false

    var requests: [String] { lock.withLock { received } }

    init(reply: String?) throws {
        self.reply = reply.map { Array($0.utf8) }
        (listener, port) = try Self.listen()
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Shuts the listener down, which makes the accepting thread's `accept` fail; that
    /// thread closes it. (Closing it here let a thread not yet in `accept` on a loaded
    /// machine accept on the same descriptor number reused by another test's socket.)
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        lock.withLock {
            stopped = true
            held.forEach { _ = close($0) }
            held = []
        }
    }

    private func acceptLoop() {
        defer { close(listener) }
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            let request = readRequestHead(connection)
            lock.withLock { received.append(request) }
            guard let reply else {
                // A connection accepted just before `stop` is closed, not held forever.
                lock.withLock { if stopped { close(connection) } else { held.append(connection) } }
                continue
            }
            reply.withUnsafeBytes { _ = send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            close(connection)
        }
    }

    private func readRequestHead(_ connection: Int32) -> String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while !String(decoding: bytes, as: UTF8.self).contains("\r\n\r\n") {
            let n = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            bytes += chunk[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    fileprivate static func listen(backlog: Int32? = 16) throws -> (Int32, Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && (backlog.map { Glibc.listen(fd, $0) == 0 } ?? true)
                    && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else {
            let code = errno
            close(fd)
            throw POSIXError(.init(rawValue: code) ?? .EIO)
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }
}

/// A loopback port that refuses connections for as long as this is held: a socket bound to
/// it that does not listen. (A port bound and released again, as this test once used, can
/// be taken meanwhile by any socket of the tests running in parallel, and then answers.)
private struct ClosedPort {
    let port: Int
    private let fd: Int32

    init() throws { (fd, port) = try CannedServer.listen(backlog: nil) }

    func release() { close(fd) }
}
