import ArgumentParser
import Foundation
import TilerHTTP
import TilerServer
import TilerSettings
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

        @Option(name: .setting(Setting.host), help: .setting(Setting.host)) var host: String?
        @Option(name: .setting(Setting.port), help: .setting(Setting.port)) var port: String?
        @Option(name: .setting(Setting.timeout), help: .setting(Setting.timeout)) var timeout: String?

        /// The flags given, as typed.
        var flags: [Setting: String] {
            let given: [Setting: String?] = [.host: host, .port: port, .timeout: timeout]
            return given.compactMapValues { $0 }
        }

        /// Flags that cannot be used are usage errors; `TILER_PORT` is read when the check runs.
        func validate() throws {
            _ = try Setting.values(flags: flags, environment: [:])
        }

        func run() throws {
            do {
                let probe = try self.probe(environment: ProcessInfo.processInfo.environment)
                let status = try probe.status()
                guard status == 200 else {
                    throw HealthcheckError.notOK(url: probe.url, status: status)
                }
                print("healthy: \(probe.url) answered 200")
            } catch let error as HealthcheckError {
                FileHandle.standardError.write(Data("unhealthy: \(error.description)\n".utf8))
                throw ExitCode.failure
            }
        }

        /// The probe the flags, else `TILER_PORT` in `environment`, else the defaults
        /// describe. The flags were checked (`validate()`): what cannot be used here is the
        /// variable's, and fails the check.
        func probe(environment: [String: String]) throws(HealthcheckError) -> HealthProbe {
            var probe = Setting.defaults
            do {
                try Setting.read(flags: flags, environment: environment, into: &probe)
            } catch {
                let variable = Setting.port.variable!
                throw .badEnvironmentPort(variable: variable, value: environment[variable] ?? "")
            }
            return probe
        }
    }
}
