import ArgumentParser
import Foundation
import ObjectStorage
import TilerServer
import TilerStorage

/// What `info`, `verify` and `ls` share: `--json`, `--s3-endpoint`, and opening a
/// pyramid or a ROOT that may be local or in a bucket.
struct PyramidAccess: ParsableArguments {
    @Flag(help: "Print JSON on stdout instead of text.")
    var json = false

    @Option(name: .s3Endpoint, help: .s3Endpoint) var s3Endpoint: String?

    /// An S3 client configured from the environment (and `--s3-endpoint`) when `path`
    /// is `s3://…`; nil otherwise.
    func client(for path: String) throws -> S3Client? {
        guard S3Location.isS3(path) else {
            if s3Endpoint != nil { throw ValidationError("\(S3Settings.endpointFlag) applies to s3:// paths only.") }
            return nil
        }
        do {
            return S3Client(
                configuration: try S3Settings.configuration(environment: ProcessInfo.processInfo.environment, endpoint: s3Endpoint))
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// Opens the pyramid `path` names, or fails with one line on stderr (exit 1).
    func open(_ path: String, verb: String) throws -> StoredPyramid {
        let client = try client(for: path)
        do {
            return try StoredPyramid.open(path, client: client)
        } catch {
            fail(verb, error.description)
        }
    }
}

/// Prints `tiler: VERB: MESSAGE` on stderr and exits 1.
func fail(_ verb: String, _ message: String) -> Never {
    FileHandle.standardError.write(Data("tiler: \(verb): \(message)\n".utf8))
    Tiler.exit(withError: ExitCode(1))
}

/// JSON as the commands print it: sorted keys, indented, slashes as they are.
func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    FileHandle.standardOutput.write(try encoder.encode(value) + Data("\n".utf8))
}

/// `12345678` as `12,345,678`.
func grouped(_ value: Int) -> String {
    let digits = String(value.magnitude)
    var out = ""
    for (i, c) in digits.enumerated() {
        if i > 0, (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(c)
    }
    return value < 0 ? "-" + out : out
}

/// A byte count for people: `1.2 MB` (powers of 1000), with the exact figure for small ones.
func humanBytes(_ value: Int) -> String {
    let units = ["B", "kB", "MB", "GB", "TB", "PB"]
    var v = Double(value)
    var unit = 0
    while v >= 1000, unit < units.count - 1 {
        v /= 1000
        unit += 1
    }
    return unit == 0 ? "\(value) B" : String(format: "%.1f %@", v, units[unit])
}
