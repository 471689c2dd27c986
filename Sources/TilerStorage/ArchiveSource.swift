import Foundation
import PMTiles
import TilerSystem

/// Where an archive's bytes come from: positioned reads of a known total size. A local
/// file reads with `pread` (``FileArchiveSource``); an object in a bucket will read with
/// HTTP range requests. The reader asks only for ranges inside `size`.
public protocol ArchiveSource: Sendable {
    /// The file or object, for messages.
    var name: String { get }
    /// Total bytes.
    var size: UInt64 { get }
    /// Exactly `length` bytes at `offset`; throws if they cannot all be read. May block.
    func read(offset: UInt64, length: Int) throws(StorageError) -> [UInt8]
}

/// A local archive read with `pread` on one descriptor, shared by every thread. The size
/// is taken once, at open; a file replaced later is a new source (the old descriptor
/// keeps reading the old file).
public final class FileArchiveSource: ArchiveSource, Sendable {
    public let name: String
    public let size: UInt64
    /// The open file (owned: closed when the source goes).
    public let descriptor: FileDescriptor
    /// `fstat` of the file at open: device, inode, size and modification time tell a
    /// replaced archive from the one this source reads.
    public let info: FileInfo

    /// Opens `path`, which must be a regular file (a FIFO or device is refused without
    /// blocking).
    public convenience init(path: String) throws(StorageError) {
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(path, O_RDONLY | O_NONBLOCK)
        } catch {
            throw .io(path: path, reason: error.errno == ENOENT ? "no such file" : error.reason)
        }
        try self.init(descriptor: fd, name: path)
    }

    /// Takes ownership of an open descriptor (closed on failure too).
    public init(descriptor fd: FileDescriptor, name: String) throws(StorageError) {
        let info: FileInfo
        do {
            info = try fd.info()
        } catch {
            fd.close()
            throw .system(name, error)
        }
        guard info.isRegularFile else {
            fd.close()
            throw .invalid(path: name, reason: info.isDirectory ? "is a directory, not an archive" : "is not a regular file")
        }
        descriptor = fd
        self.name = name
        self.info = info
        size = UInt64(info.size)
    }

    deinit { descriptor.close() }

    public func read(offset: UInt64, length: Int) throws(StorageError) -> [UInt8] {
        try checkRange(offset: offset, length: length)
        var bytes = [UInt8](repeating: 0, count: length)
        let read = bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(StorageError) in try ArchiveWriter.readAll(descriptor, into: buffer, at: offset, path: name) }
        }
        try read.get()
        return bytes
    }

    /// Exactly `length` bytes at `offset` if the page cache holds all of them, else nil
    /// (read them with `read`, where blocking is allowed); never waits for the disk, so an
    /// event loop may call it (`PageCache`). Throws what `read` throws for a range past
    /// the end or a failed read.
    public func readIfCached(offset: UInt64, length: Int) throws(StorageError) -> [UInt8]? {
        try checkRange(offset: offset, length: length)
        if length == 0 { return [] }
        var bytes = [UInt8](repeating: 0, count: length)
        let outcome = bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(SystemCallError) in
                try PageCache.read(descriptor, device: info.device, into: buffer, at: Int(offset))
            }
        }
        switch outcome.mapError({ StorageError.system(name, $0) }) {
        case .failure(let error): throw error
        case .success(.wouldBlock): return nil
        case .success(.read(let n)) where n == length: return bytes
        case .success(.read):
            throw .io(path: name, reason: "the file ends before byte \(offset + UInt64(length)) (truncated while served?)")
        }
    }

    private func checkRange(offset: UInt64, length: Int) throws(StorageError) {
        guard length >= 0, offset <= size, UInt64(length) <= size - offset else {
            throw .io(path: name, reason: "bytes \(offset)..<\(offset &+ UInt64(max(0, length))) are past the end (\(size) bytes)")
        }
    }
}

/// An archive held in memory (tests, and archives small enough to keep whole).
public struct MemoryArchiveSource: ArchiveSource {
    public let name: String
    public let bytes: [UInt8]
    public var size: UInt64 { UInt64(bytes.count) }

    public init(_ bytes: [UInt8], name: String = "archive") {
        self.bytes = bytes
        self.name = name
    }

    public func read(offset: UInt64, length: Int) throws(StorageError) -> [UInt8] {
        guard length >= 0, offset <= size, UInt64(length) <= size - offset else {
            throw .io(path: name, reason: "bytes \(offset)..<\(offset &+ UInt64(max(0, length))) are past the end (\(size) bytes)")
        }
        return Array(bytes[Int(offset)..<(Int(offset) + length)])
    }
}
