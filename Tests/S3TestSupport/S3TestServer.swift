import Foundation
import Synchronization
import TilerTestSupport

/// A real S3-compatible server for tests: `scripts/s3-test-server` (moto, from PyPI
/// `moto[server]`) started on a free loopback port, with Signature V4 checking on, and
/// stopped when this object goes (or the test process exits: the script leaves when its
/// standard input closes).
///
/// ``shared`` serves every test that only needs a bucket (each uses its own prefix);
/// tests that take storage down make their own with ``init(buckets:)``.
public final class S3TestServer: Sendable {
    /// `http://127.0.0.1:PORT`.
    public let endpoint: String
    public let region: String
    /// An IAM user's key, allowed everything.
    public let accessKeyID: String
    public let secretAccessKey: String
    /// Temporary credentials of an assumed role: key, secret and session token.
    public let session: (accessKeyID: String, secretAccessKey: String, token: String)
    /// The buckets made at start.
    public let buckets: [String]

    private let process: Process
    private let input: FileHandle
    private let lines: PipeReader
    private let closed = Atomic<Bool>(false)

    /// The server most tests share, with bucket `tiles`; started at first use.
    public static let shared: Result<S3TestServer, any Error> = Result { try S3TestServer(buckets: ["tiles"]) }

    /// `scripts/s3-test-server`, beside the package's `Tests/`.
    public static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/s3-test-server").path
    }

    /// Starts a server with `buckets` made, and waits (60 s at most) until it answers.
    public init(buckets: [String] = ["tiles"]) throws {
        self.buckets = buckets
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", Self.script] + buckets.flatMap { ["--bucket", $0] }
        let stdin = Pipe(), stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.standardError
        try process.run()
        input = stdin.fileHandleForWriting
        lines = PipeReader(stdout.fileHandleForReading)
        guard let first = lines.nextLine(within: 60) else {
            process.terminate()
            throw S3TestServerError(
                "scripts/s3-test-server did not start within 60 s (is moto[server] installed? scripts/install-deps test installs it)")
        }
        struct Started: Decodable {
            struct Session: Decodable {
                let access_key_id: String
                let secret_access_key: String
                let session_token: String
            }
            let endpoint: String
            let region: String
            let access_key_id: String
            let secret_access_key: String
            let session: Session
        }
        let started = try JSONDecoder().decode(Started.self, from: Data(first.utf8))
        endpoint = started.endpoint
        region = started.region
        accessKeyID = started.access_key_id
        secretAccessKey = started.secret_access_key
        session = (started.session.access_key_id, started.session.secret_access_key, started.session.session_token)
    }

    deinit { shutdown() }

    /// Takes storage down: the listening socket closes (connections are refused); the
    /// objects are kept.
    public func stop() throws { try command("stop") }

    /// Brings storage back on the same port.
    public func start() throws { try command("start") }

    /// Holds every `method` request (`GET`, `PUT`, ..., `*`, or `RANGE` for range reads
    /// only) for `seconds` before answering it: slow storage. 0 ends it.
    public func delay(_ method: String, seconds: Double) throws { try command("delay \(method) \(seconds)") }

    /// A faulty store: every listing page says it is truncated and gives the same
    /// continuation token (`false` ends it).
    public func loopListings(_ on: Bool) throws { try command("loop-listing \(on ? "on" : "off")") }

    /// Answers every `method` request (or `*`) with `status` and an S3 error document of
    /// `code`, before any other check (`403`, `InvalidAccessKeyId`: credentials revoked;
    /// `500`, `InternalError`: a failing store). `status` 0 ends it.
    public func fail(_ method: String, status: Int, code: String = "-") throws { try command("fail \(method) \(status) \(code)") }

    /// Answers GETs as if they carried no `If-Match` (a proxy or an S3 clone that drops
    /// it), or honours it again.
    public func ignoreIfMatch(_ on: Bool) throws { try command("ignore-if-match \(on ? "on" : "off")") }

    private func command(_ line: String) throws {
        let word = line.split(separator: " ").first.map(String.init) ?? line
        input.write(Data("\(line)\n".utf8))
        guard let answer = lines.nextLine(within: 30), answer.hasPrefix("\(word):") else {
            throw S3TestServerError("scripts/s3-test-server did not answer '\(line)'")
        }
    }

    /// Ends the server and waits for it.
    public func shutdown() {
        guard !closed.exchange(true, ordering: .sequentiallyConsistent) else { return }
        try? input.close()
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    /// The variables an S3 tool (tiler, boto3, the AWS CLI) reads to reach this server
    /// as the IAM user.
    public var environment: [String: String] {
        [
            "AWS_ACCESS_KEY_ID": accessKeyID, "AWS_SECRET_ACCESS_KEY": secretAccessKey, "AWS_REGION": region,
            "AWS_ENDPOINT_URL": endpoint,
        ]
    }

    /// Runs a Python program (boto3 is there) with this server's variables, and returns
    /// its standard output; a non-zero exit throws with its standard error.
    @discardableResult
    public func python(_ program: String, arguments: [String] = [], environment extra: [String: String] = [:]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", program] + arguments
        var environment = ProcessInfo.processInfo.environment
        for (name, value) in self.environment.merging(extra, uniquingKeysWith: { $1 }) { environment[name] = value }
        process.environment = environment
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let errors = PipeReader(err.fileHandleForReading)
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        _ = errors.waitForEnd(within: 60)
        guard process.terminationStatus == 0 else {
            throw S3TestServerError("python3 failed (\(process.terminationStatus)): \(errors.text)")
        }
        return String(decoding: outData, as: UTF8.self)
    }
}

public struct S3TestServerError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
