import CNetShims
import Foundation
import Glibc

/// Files read strictly beneath a root folder: every component below the root is opened
/// with `O_NOFOLLOW`, one `openat` at a time, so a symbolic link anywhere inside the root
/// (a pyramid folder, a level or row folder, a tile, a manifest) is never followed, and
/// no request can reach a file outside the root through one. The root itself may be a
/// symbolic link (`/data` → `/mnt/disk/data`).
///
/// The last component is also opened with `O_NONBLOCK`, so a FIFO or device planted in
/// the root cannot block an event loop: anything but a regular file is refused.
public enum RootedFiles {
    /// Opens the directory holding `components.last`, walking `components.dropLast()` from
    /// `root` without following links. Returns the directory's descriptor or -1.
    private static func openParent(root: String, _ components: [String]) -> Int32 {
        var dir = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dir >= 0 else { return -1 }
        for name in components.dropLast() {
            guard isPlainName(name) else {
                close(dir)
                return -1
            }
            let next = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            close(dir)
            guard next >= 0 else { return -1 }
            dir = next
        }
        return dir
    }

    /// A single path component: not empty, `.` or `..`, and without `/` or NUL.
    static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.utf8.contains(UInt8(ascii: "/")) && !name.utf8.contains(0)
    }

    /// `lstat` of `root/components…`, or nil if it is missing, unreadable or reached
    /// through a symbolic link. A link as the last component is reported as itself (not a
    /// regular file).
    public static func info(root: String, _ components: [String]) -> FileInfo? {
        guard let last = components.last, isPlainName(last) else { return nil }
        let dir = openParent(root: root, components)
        guard dir >= 0 else { return nil }
        defer { close(dir) }
        var st = stat()
        guard fstatat(dir, last, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        var raw = cns_file_info()
        _ = cns_fill_info(&st, &raw)
        return FileInfo(raw)
    }

    /// The bytes and metadata of the regular file `root/components…`, or nil if it is
    /// missing, reached through a symbolic link, not a regular file (FIFO, device,
    /// folder), larger than `maximumBytes`, or shrinks while being read.
    public static func read(root: String, _ components: [String], maximumBytes: Int = 1 << 30) -> (bytes: [UInt8], info: FileInfo)? {
        if case let .read(bytes, info) = read(root: root, components, maximumBytes: maximumBytes, onlyIfCached: false) {
            return (bytes, info)
        }
        return nil
    }

    /// What `readIfCached` found.
    public enum CachedRead {
        case read([UInt8], FileInfo)
        /// Missing, a link, not a regular file, too large, or it shrank.
        case unavailable
        /// Reading it would wait for the disk: read it where blocking is allowed.
        case wouldBlock
    }

    /// How `readIfCached` tells whether a file's bytes are in the page cache. Learnt once
    /// per file system (`st_dev`): the first read tries `preadv2(RWF_NOWAIT)`, and a file
    /// system that answers it `EOPNOTSUPP` (overlayfs, hence every container; tmpfs) moves
    /// to `.residency` for good.
    public enum PageCacheProbe: Sendable, Hashable {
        /// `preadv2(RWF_NOWAIT)`: reads what the page cache holds, `EAGAIN` for the rest.
        case readWithoutWaiting
        /// `mincore` on a read-only mapping of the file (never touched, so a truncation
        /// meanwhile cannot raise SIGBUS), then a plain `read` when every page is
        /// resident. A page evicted between the two is read from the disk on the event
        /// loop: a window of microseconds, against every read going to the pool.
        case residency
        /// Neither works (the file cannot be mapped): every read goes to the pool.
        case none
    }

    /// The probe used for files on `device` (`FileInfo.device`).
    public static func pageCacheProbe(device: UInt64) -> PageCacheProbe { probes.probe(for: device) }

    /// Probes by file system, shared by every event loop.
    private final class Probes: @unchecked Sendable {
        private let lock = NSLock()
        private var byDevice: [UInt64: PageCacheProbe] = [:]
        func probe(for device: UInt64) -> PageCacheProbe { lock.withLock { byDevice[device] ?? .readWithoutWaiting } }
        func set(_ probe: PageCacheProbe, for device: UInt64) { lock.withLock { byDevice[device] = probe } }
    }
    private static let probes = Probes()

    /// Like `read`, but takes only what the page cache already holds, so an event loop
    /// can call it: `.wouldBlock` when any of the file would have to come from the disk
    /// (see `PageCacheProbe` for how that is known).
    public static func readIfCached(root: String, _ components: [String], maximumBytes: Int = 1 << 30) -> CachedRead {
        read(root: root, components, maximumBytes: maximumBytes, onlyIfCached: true)
    }

    private static func read(root: String, _ components: [String], maximumBytes: Int, onlyIfCached: Bool) -> CachedRead {
        guard let last = components.last, isPlainName(last) else { return .unavailable }
        let dir = openParent(root: root, components)
        guard dir >= 0 else { return .unavailable }
        let fd = openat(dir, last, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        close(dir)
        guard fd >= 0 else { return .unavailable }
        defer { close(fd) }
        var raw = cns_file_info()
        guard cns_fstat(fd, &raw) == 0 else { return .unavailable }
        let info = FileInfo(raw)
        guard info.isRegularFile, info.size <= maximumBytes else { return .unavailable }
        if onlyIfCached {
            var probe = probes.probe(for: info.device)
            if probe == .readWithoutWaiting {
                switch readWithoutWaiting(fd, info) {
                case .read(let bytes): return bytes.count == info.size ? .read(bytes, info) : .unavailable
                case .wouldBlock: return .wouldBlock
                case .unsupported:
                    probes.set(.residency, for: info.device)
                    probe = .residency
                }
            }
            if probe == .residency {
                switch cns_pages_resident(fd, info.size) {
                case 1: break  // all cached: the plain read below does not wait for the disk
                case 0: return .wouldBlock
                default:
                    probes.set(.none, for: info.device)
                    return .wouldBlock
                }
            } else {
                return .wouldBlock
            }
        }
        let bytes = [UInt8](unsafeUninitializedCapacity: info.size) { buffer, initialized in
            var done = 0
            while done < info.size {
                let n = pread(fd, buffer.baseAddress! + done, info.size - done, off_t(done))
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                done += n
            }
            initialized = done
        }
        return bytes.count == info.size ? .read(bytes, info) : .unavailable
    }

    private enum NoWaitRead {
        case read([UInt8])
        case wouldBlock
        /// This file system does not take `RWF_NOWAIT`.
        case unsupported
    }

    private static func readWithoutWaiting(_ fd: Int32, _ info: FileInfo) -> NoWaitRead {
        var outcome = NoWaitRead.wouldBlock
        let bytes = [UInt8](unsafeUninitializedCapacity: info.size) { buffer, initialized in
            var done = 0
            while done < info.size {
                let n = cns_pread_nowait(fd, buffer.baseAddress! + done, info.size - done, done)
                if n < 0 && errno == EINTR { continue }
                if n < 0 {
                    // EAGAIN: not cached. Other errors (EIO): the blocking read decides.
                    if errno == EOPNOTSUPP || errno == EINVAL || errno == ENOSYS { outcome = .unsupported }
                    initialized = 0
                    return
                }
                if n == 0 { break }
                done += n
            }
            initialized = done
            outcome = .read([])
        }
        if case .read = outcome { return .read(bytes) }
        return outcome
    }
}
