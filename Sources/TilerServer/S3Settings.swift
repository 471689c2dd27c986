import Foundation
import ObjectStorage
import TilerSettings

/// What every command that reaches a bucket is told besides the bucket's address,
/// declared once: `--s3-endpoint` (`serve`, `cut`, `pack`, `info`, `verify`, `ls`), the
/// folder uploads are staged in (`TILER_S3_STAGING`, `cut` and `pack`), and how the rest
/// is read: credentials, region and endpoint from the `AWS_*` variables every S3 tool
/// reads, the request bounds from `TILER_S3_*` (`S3Configuration.Setting`, a table without
/// flags), both by `S3Configuration(environment:endpoint:)`.
public enum S3Settings {
    /// `--s3-endpoint`: its name, the flag, its value's name, what it does and its default.
    public static let endpointName = "s3-endpoint"
    public static var endpointFlag: String { "--" + endpointName }
    public static let endpointValueName = "URL"
    public static let endpointSummary = "S3-compatible server for s3:// addresses, addressed path-style"
    public static let endpointDefault = "AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else AWS itself"
    /// `--s3-endpoint`'s help text.
    public static var endpointHelp: String { "\(endpointSummary) (default: \(endpointDefault))." }

    /// The variable naming the folder an archive is staged in before its upload (it needs
    /// the archive's size free).
    public static let stagingVariable = "TILER_S3_STAGING"

    /// `TILER_S3_STAGING` in `environment`, else the temporary folder (`TMPDIR`).
    public static func stagingFolder(environment: [String: String]) -> String {
        environment[stagingVariable].flatMap { $0.isEmpty ? nil : $0 } ?? NSTemporaryDirectory()
    }

    /// How to reach a bucket: the `AWS_*` and `TILER_S3_*` variables of `environment`,
    /// with `endpoint` (`--s3-endpoint`) over the endpoint variables. A value that cannot
    /// be used throws, naming its variable.
    public static func configuration(environment: [String: String], endpoint: String? = nil) throws(SettingError) -> S3Configuration {
        do {
            return try S3Configuration(environment: environment, endpoint: endpoint)
        } catch {
            throw SettingError(error.message)
        }
    }
}
