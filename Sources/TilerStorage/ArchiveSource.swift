import Foundation
import PMTiles

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
public final class FileArchiveSource: ArchiveSource, @unchecked Sendable {
    public let name: String
    public let size: UInt64
    /// The open file (owned: closed when the source goes), for callers that want to
    /// read with their own flags (`preadv2` with `RWF_NOWAIT`).
    public let descriptor: Int32
    /// `stat` of the file at open: device, inode, size and modification time tell a
    /// replaced archive from the one this source reads.
    public let info: stat

    /// Opens `path`, which must be a regular file (a FIFO or device is refused without
    /// blocking).
    public convenience init(path: String) throws(StorageError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            throw .io(path: path, reason: errno == ENOENT ? "no such file" : StorageError.errnoText())
        }
        try self.init(descriptor: fd, name: path)
    }

    /// Takes ownership of an open descriptor (closed on failure too).
    public init(descriptor fd: Int32, name: String) throws(StorageError) {
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let error = StorageError.system(name)
            close(fd)
            throw error
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw .invalid(path: name, reason: (info.st_mode & S_IFMT) == S_IFDIR ? "is a directory, not an archive" : "is not a regular file")
        }
        descriptor = fd
        self.name = name
        self.info = info
        size = UInt64(info.st_size)
    }

    deinit { close(descriptor) }

    public func read(offset: UInt64, length: Int) throws(StorageError) -> [UInt8] {
        guard length >= 0, offset <= size, UInt64(length) <= size - offset else {
            throw .io(path: name, reason: "bytes \(offset)..<\(offset &+ UInt64(max(0, length))) are past the end (\(size) bytes)")
        }
        var bytes = [UInt8](repeating: 0, count: length)
        try bytes.withMutableBytes { (buffer) throws(StorageError) in
            try ArchiveWriter.readAll(descriptor, into: buffer, at: offset, path: name)
        }
        return bytes
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
