import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// `tiler serve` (the built binary) as a child process, on the port it announces in its
/// start line: "tiler: serving ROOT at http://HOST:PORT/ …", or with `--log-format json`
/// `{…"url":"http://HOST:PORT/"…}`. Its standard error is collected for the test. A server
/// still running when this goes is killed.
public final class ServeProcess: Sendable {
    public let process: Process
    /// The port the server chose (the arguments give `--port 0` or `TILER_PORT=0`).
    public let port: Int
    /// The port of its metrics listener, when it has one (`--metrics-port`).
    public let metricsPort: Int?
    /// The start line, without its line break.
    public let startLine: String
    private let errors: PipeReader

    /// Starts `tiler serve ARGUMENTS` and waits up to `seconds` for its start line.
    /// - `environment`: added to this process's variables, less every `TILER_` and `AWS_`
    ///   one, so that nothing but the test configures the server.
    /// - `directory`: the server's working folder (default: this process's).
    /// - `launcher`: a command that runs the binary (`taskset -c 0`, `setpriv --reuid=…`).
    public init(
        _ arguments: [String], environment: [String: String] = [:], directory: String? = nil,
        launcher: [String] = [], seconds: Double = 20
    ) throws {
        let binary = try tilerBinary()
        process = Process()
        process.executableURL = URL(fileURLWithPath: launcher.first ?? binary)
        process.arguments = (launcher.isEmpty ? [] : Array(launcher.dropFirst()) + [binary]) + ["serve"] + arguments
        process.environment = ProcessInfo.processInfo.environment
            .filter { !$0.key.hasPrefix("TILER_") && !$0.key.hasPrefix("AWS_") }
            .merging(environment) { $1 }
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let output = Pipe(), errorPipe = Pipe()
        process.standardOutput = output
        process.standardError = errorPipe
        try process.run()
        // The readers hold the only read ends: their threads end when the server does.
        let lines = PipeReader(output.fileHandleForReading)
        errors = PipeReader(errorPipe.fileHandleForReading)
        let line = lines.nextLine(within: seconds) ?? lines.text
        startLine = line.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let port = Self.port(in: line, after: ["\"url\":\"http://", " at http://"]) else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            _ = errors.waitForEnd(within: 10)
            throw SupportError(
                description: "tiler serve did not announce its port within \(seconds) s: '\(line)'; stderr: \(errors.text)")
        }
        self.port = port
        metricsPort = Self.port(in: line, after: ["\"metrics_url\":\"http://", "metrics at http://"])
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// What the server has written on standard error so far.
    public var errorOutput: String { errors.text }

    /// Stops the server (SIGTERM) and returns all it wrote on standard error.
    @discardableResult
    public func stop() -> String {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        _ = errors.waitForEnd(within: 10)
        return errors.text
    }

    /// The port of the first address after one of `markers` (`HOST:PORT/`) in `line`.
    static func port(in line: String, after markers: [String]) -> Int? {
        for marker in markers {
            guard let start = line.range(of: marker)?.upperBound else { continue }
            let authority = line[start...].prefix { $0 != "/" }
            guard let colon = authority.lastIndex(of: ":") else { continue }
            return Int(authority[authority.index(after: colon)...])
        }
        return nil
    }
}
