import TilerHTTP
import TilerServer
import TilerSettings

extension Tiler.Healthcheck {
    /// `tiler healthcheck`'s settings, declared once; the values are the probe's
    /// (`HealthProbe`, whose defaults they are).
    ///
    /// The port is one a server listens on (`HTTPConfiguration.Range.port`) except 0,
    /// which `tiler serve` takes as "any free port" and which names no server to ask:
    /// `HTTPConfiguration.Range.connectablePort`. A `TILER_PORT` that cannot be used is
    /// no usage error but a failed check (exit 1, `unhealthy: …`), as for a server that
    /// does not answer: the variable is the server's, set for the container.
    enum Setting: String, SettingTable {
        case host
        case port
        case timeout

        /// `TILER_PORT`, the variable `tiler serve` listens by; the server's address is
        /// given by flag alone (`TILER_HOST` is the address it listens on, often 0.0.0.0).
        var variable: String? { self == .port ? "TILER_PORT" : nil }

        static var defaults: HealthProbe { HealthProbe() }

        var declaration: SettingDeclaration<HealthProbe> {
            switch self {
            case .host:
                return SettingDeclaration(
                    summary: "The server's address (an IP address or a host name)",
                    value: .other(emptyIsValue: false) { probe, text, _ in probe.host = text }, valueName: "host",
                    defaultText: Self.defaults.host)
            case .port:
                let range = HTTPConfiguration.Range.connectablePort
                return SettingDeclaration(
                    summary: "The server's port, \(range.lowerBound)-\(range.upperBound)", value: .integer(\.port, range),
                    valueName: "port")
            case .timeout:
                return SettingDeclaration(
                    summary: "Seconds to wait for the whole exchange before giving up, above 0 and at most 3600",
                    value: .other(emptyIsValue: false) { probe, text, source throws(SettingError) in
                        guard let seconds = Double(text), seconds > 0, seconds <= 3600 else {
                            throw SettingError("\(source) must be a number of seconds above 0 and at most 3600, not \(text)")
                        }
                        probe.timeout = seconds
                    },
                    valueName: "seconds", defaultText: SettingText.decimal(Self.defaults.timeout))
            }
        }
    }
}
