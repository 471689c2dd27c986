import ArgumentParser
import Glibc
import TilerHTTP
import TilerSystem

extension Tiler {
    /// `tiler healthcheck`: asks a running `tiler serve` for `GET /healthz` (`HealthProbe`)
    /// and exits 0 on 200, else 1 with one line saying why. It is the container image's
    /// `HEALTHCHECK`.
    struct Healthcheck: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check that a tiler server answers GET /healthz with 200.",
            discussion: """
                Exits 0 when the server answers 200 and 1 otherwise (refused, timed out, \
                another status, not HTTP), with a one-line reason on stderr. Made for \
                container health checks: HEALTHCHECK CMD ["tiler", "healthcheck"].
                """
        )

        @Option(help: "The server's address (an IP address or a host name).")
        var host = "127.0.0.1"

        @Option(
            help: ArgumentHelp(
                "The server's port.",
                discussion: "Default: the TILER_PORT environment variable, else \(HTTPConfiguration().port)."
            ))
        var port: Int?

        @Option(help: "Seconds to wait for the whole exchange before giving up.")
        var timeout: Double = 3

        func validate() throws {
            if let port, !(1...65535).contains(port) {
                throw ValidationError("--port must be between 1 and 65535, not \(port).")
            }
            guard timeout.isFinite, timeout > 0, timeout <= 3600 else {
                throw ValidationError("--timeout must be a number of seconds above 0 and at most 3600.")
            }
        }

        func run() throws {
            do {
                let probe = HealthProbe(host: host, port: try resolvedPort(), timeout: timeout)
                let status = try probe.status()
                guard status == 200 else {
                    throw HealthcheckError.notOK(url: probe.url, status: status)
                }
                print("healthy: \(probe.url) answered 200")
            } catch let error as HealthcheckError {
                printToStandardError("unhealthy: \(error.description)")
                throw ExitCode.failure
            }
        }

        /// `--port`, else `TILER_PORT` (the variable `tiler serve` reads), else `tiler serve`'s default port.
        private func resolvedPort() throws(HealthcheckError) -> Int {
            if let port { return port }
            guard let raw = getenv("TILER_PORT").map({ String(cString: $0) }), !raw.isEmpty else {
                return HTTPConfiguration().port
            }
            guard let port = Int(raw), (1...65535).contains(port) else {
                throw .badEnvironmentPort(raw)
            }
            return port
        }
    }
}

private func printToStandardError(_ line: String) {
    try? FileDescriptor.standardError.writeAll(Array((line + "\n").utf8))
}
