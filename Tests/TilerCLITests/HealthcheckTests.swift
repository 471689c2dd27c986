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
        let closed = try LoopbackListener(listening: false)
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

        let closed = try LoopbackListener(listening: false)
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
