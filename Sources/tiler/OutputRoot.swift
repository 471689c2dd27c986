import ArgumentParser
import Foundation
import ObjectStorage
import TilerServer
import TilerStorage

/// Where `cut` and `pack` write: a folder ROOT, or `s3://BUCKET/PREFIX` with its client.
enum OutputRoot {
    /// A ``FolderOutput`` for a folder; for `s3://BUCKET/PREFIX` a ``BucketOutput``
    /// checked by listing the prefix once, so that a missing bucket, refused credentials
    /// or unreachable storage end the command (one line, exit 1) before any work. A
    /// malformed address or missing credentials are usage errors.
    static func make(
        _ root: String, s3Endpoint: String?, environment: [String: String], verb: String,
        isCancelled: @escaping @Sendable () -> Bool
    ) throws -> any PyramidOutput {
        guard S3Location.isS3(root) else { return FolderOutput(root: root) }
        let location: S3Location
        let configuration: S3Configuration
        do {
            location = try S3Location(parsing: root)
        } catch {
            throw ValidationError(error.message)
        }
        do {
            configuration = try S3Settings.configuration(environment: environment, endpoint: s3Endpoint)
        } catch {
            throw ValidationError(error.description)
        }
        let staging = S3Settings.stagingFolder(environment: environment)
        let bucket = BucketOutput(
            client: S3Client(configuration: configuration), location: location, staging: staging,
            isCancelled: isCancelled)
        do {
            try bucket.check()
        } catch {
            FileHandle.standardError.write(Data("tiler: \(verb): \(error)\n".utf8))
            throw ExitCode(1)
        }
        return bucket
    }
}
