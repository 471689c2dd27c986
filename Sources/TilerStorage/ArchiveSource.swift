import CStorageShims
import Foundation
import PMTiles
import Synchronization

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
            throw .invalid(
                path: name, reason: (info.st_mode & S_IFMT) == S_IFDIR ? "is a directory, not an archive" : "is not a regular file")
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

    /// Exactly `length` bytes at `offset` if the page cache holds all of them, else nil
    /// (read them with `read`, where blocking is allowed); never waits for the disk, so an
    /// event loop may call it. Throws what `read` throws for a range past the end or a
    /// failed read. How the page cache is asked depends on the file system:
    /// `preadv2(RWF_NOWAIT)` where it works, else `mincore` on the range, else every read
    /// answers nil (``PageCacheProbe``).
    public func readIfCached(offset: UInt64, length: Int) throws(StorageError) -> [UInt8]? {
        guard length >= 0, offset <= size, UInt64(length) <= size - offset else {
            throw .io(path: name, reason: "bytes \(offset)..<\(offset &+ UInt64(max(0, length))) are past the end (\(size) bytes)")
        }
        if length == 0 { return [] }
        let device = UInt64(info.st_dev)
        var probe = PageCacheProbe.probe(for: device)
        if probe == .readWithoutWaiting {
            var bytes = [UInt8](repeating: 0, count: length)
            var done = 0
            var outcome = 0  // 0 read, 1 would block, 2 unsupported, 3 short
            while done < length {
                let n = bytes.withUnsafeMutableBytes {
                    tiler_pread_nowait(descriptor, $0.baseAddress! + done, length - done, Int64(offset) + Int64(done))
                }
                if n < 0 && errno == EINTR { continue }
                if n < 0 {
                    outcome = errno == EOPNOTSUPP || errno == EINVAL || errno == ENOSYS ? 2 : 1
                    break
                }
                if n == 0 {
                    outcome = 3
                    break
                }
                done += n
            }
            switch outcome {
            case 0: return bytes
            case 1: return nil
            case 3: throw .io(path: name, reason: "the file ends before byte \(offset + UInt64(length)) (truncated while served?)")
            default:
                PageCacheProbe.set(.residency, for: device)
                probe = .residency
            }
        }
        guard probe == .residency else { return nil }
        switch tiler_range_resident(descriptor, Int64(offset), length) {
        case 1: return try read(offset: offset, length: length)  // every page is cached: no wait
        case 0: return nil
        default:
            PageCacheProbe.set(.none, for: device)
            return nil
        }
    }
}

/// How ``FileArchiveSource/readIfCached(offset:length:)`` tells whether bytes are in the
/// page cache, learnt once per file system (`st_dev`): `preadv2(RWF_NOWAIT)` first; a file
/// system that answers it `EOPNOTSUPP` (overlayfs, hence containers; tmpfs) moves to
/// `mincore` on a read-only mapping of the range, and one where that fails too to asking
/// nothing (every read goes where blocking is allowed).
public enum PageCacheProbe: Sendable, Hashable {
    case readWithoutWaiting
    case residency
    case none

    private static let byDevice = Mutex<[UInt64: PageCacheProbe]>([:])

    /// The probe used for files on `device`.
    public static func probe(for device: UInt64) -> PageCacheProbe {
        byDevice.withLock { $0[device] ?? .readWithoutWaiting }
    }

    static func set(_ probe: PageCacheProbe, for device: UInt64) {
        byDevice.withLock { $0[device] = probe }
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
