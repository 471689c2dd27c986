import Foundation
import ObjectStorage
import PMTiles
import TilerSystem

/// Why a pyramid could not be written, read or converted. `description` names the file
/// and the reason in one line.
public enum StorageError: Error, Sendable, CustomStringConvertible {
    /// The destination exists and was not to be replaced.
    case exists(path: String)
    /// A system call failed on `path`.
    case io(path: String, reason: String)
    /// `path` is not a readable archive.
    case archive(path: String, ArchiveFormatError)
    /// `path` is not a usable pyramid (folder or archive) for another reason.
    case invalid(path: String, reason: String)
    /// A request to object storage failed (the error names the bucket, key, operation
    /// and S3's code).
    case remote(S3Error)

    public var description: String {
        switch self {
        case let .exists(path): "\(path) already exists; use --force to replace it"
        case let .io(path, reason): "\(path): \(reason)"
        case let .archive(path, error): "\(path): \(error)"
        case let .invalid(path, reason): "\(path): \(reason)"
        case let .remote(error): error.description
        }
    }

    /// `.io` for `path` with the reason of a failed system call, after `what` failed if
    /// given ("cannot create a working folder: Permission denied").
    static func system(_ path: String, _ error: SystemCallError, _ what: String? = nil) -> StorageError {
        .io(path: path, reason: what.map { "\($0): \(error.reason)" } ?? error.reason)
    }

    /// Throws unless `path` is a folder (a link to one counts): "no such folder" when it
    /// is missing, `.invalid` with `notAFolder` when it is something else.
    static func requireFolder(_ path: String, notAFolder: String) throws(StorageError) {
        let info: FileInfo?
        do {
            info = try FileSystem.info(path)
        } catch {
            throw .system(path, error)
        }
        guard let info else { throw .io(path: path, reason: "no such folder") }
        guard info.isDirectory else { throw .invalid(path: path, reason: notAFolder) }
    }
}
