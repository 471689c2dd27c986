import Foundation
import TilerSettings

extension S3Configuration {
    /// The `TILER_S3_*` variables, declared once: how long a request to a bucket may take,
    /// how often it is retried, how long a listing may run and how large an upload's parts
    /// are. They have no flags; every command that reaches a bucket reads them
    /// (`init(environment:endpoint:)`). A value is trimmed of spaces, an empty one is
    /// unset, and one outside its range throws, naming its variable.
    public enum Setting: String, SettingTable {
        case connectTimeout
        case requestTimeout
        case minimumUploadRate
        case retries
        case listPages
        case listSeconds
        case partSize

        public var variable: String? {
            switch self {
            case .connectTimeout: "TILER_S3_CONNECT_TIMEOUT"
            case .requestTimeout: "TILER_S3_TIMEOUT"
            case .minimumUploadRate: "TILER_S3_MIN_RATE"
            case .retries: "TILER_S3_RETRIES"
            case .listPages: "TILER_S3_LIST_PAGES"
            case .listSeconds: "TILER_S3_LIST_SECONDS"
            case .partSize: "TILER_S3_PART_SIZE"
            }
        }

        public static var takesFlags: Bool { false }

        /// The bounds' defaults (no credentials: those are read apart, from `AWS_*`).
        public static var defaults: S3Configuration {
            S3Configuration(credentials: S3Credentials(accessKeyID: "", secretAccessKey: ""))
        }

        public var declaration: SettingDeclaration<S3Configuration> {
            let d = Self.defaults
            switch self {
            case .connectTimeout:
                return number("Seconds to establish a connection", 0.001...600, default: d.connectTimeout) { $0.connectTimeout = $1 }
            case .requestTimeout:
                return number(
                    "Seconds for one whole request without a large body (a range read, HEAD, a list page, DELETE, starting or completing an upload)",
                    0.001...3600, default: d.requestTimeout
                ) { $0.requestTimeout = $1 }
            case .minimumUploadRate:
                return number(
                    "Bytes a second an upload is given time for (on top of the request's seconds), and below which it is dropped",
                    1...1e12, default: Double(d.minimumUploadRate), defaultText: "\(d.minimumUploadRate >> 10) KiB/s"
                ) { $0.minimumUploadRate = Int($1) }
            case .retries:
                return number("Extra attempts for a request that may be repeated", 0...20, default: Double(d.retries)) {
                    $0.retries = Int($1)
                }
            case .listPages:
                return number("The most pages one listing of a prefix may take", 1...1_000_000, default: Double(d.listPages)) {
                    $0.listPages = Int($1)
                }
            case .listSeconds:
                return number("The most seconds one listing of a prefix may take in all", 0.001...86_400, default: d.listSeconds) {
                    $0.listSeconds = $1
                }
            case .partSize:
                let bounds = S3Configuration.partSizeRange
                return SettingDeclaration(
                    summary:
                        "The size of an upload's parts (bytes, or with a K, M or G suffix), grown so that none needs more than \(S3Configuration.maximumParts) parts",
                    value: .other(emptyIsValue: false) { configuration, text, source throws(SettingError) in
                        let text = text.trimmingCharacters(in: .whitespaces)
                        guard !text.isEmpty else { return }
                        guard let bytes = S3Configuration.bytes(text), bounds.contains(bytes) else {
                            throw SettingError(
                                "\(source) must be \(bounds.lowerBound >> 20)MiB...\(bounds.upperBound >> 30)GiB (bytes, or with a K, M or G suffix), not '\(text)'"
                            )
                        }
                        configuration.partSize = bytes
                    },
                    defaultText: "\(d.partSize >> 20)M", rangeText: "\(bounds.lowerBound >> 20)M–\(bounds.upperBound >> 30)G")
            }
        }

        /// A number in `range`, applied by `apply`.
        private func number(
            _ summary: String, _ range: ClosedRange<Double>, default value: Double, defaultText: String? = nil,
            _ apply: @escaping (inout S3Configuration, Double) -> Void
        ) -> SettingDeclaration<S3Configuration> {
            SettingDeclaration(
                summary: summary,
                value: .other(emptyIsValue: false) { configuration, text, source throws(SettingError) in
                    let text = text.trimmingCharacters(in: .whitespaces)
                    guard !text.isEmpty else { return }
                    guard let number = Double(text), range.contains(number) else {
                        throw SettingError("\(source) must be a number in \(range.lowerBound)...\(range.upperBound), not '\(text)'")
                    }
                    apply(&configuration, number)
                },
                defaultText: defaultText ?? SettingText.decimal(value),
                rangeText: "\(SettingText.decimal(range.lowerBound))–\(SettingText.decimal(range.upperBound))")
        }
    }
}
