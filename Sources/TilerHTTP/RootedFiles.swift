import CNetShims
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

    /// Like `read`, but takes only what the page cache already holds (`preadv2` with
    /// `RWF_NOWAIT`), so an event loop can call it: `.wouldBlock` when any of the file
    /// would have to come from the disk.
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
        var wouldBlock = false
        let bytes = [UInt8](unsafeUninitializedCapacity: info.size) { buffer, initialized in
            var done = 0
            while done < info.size {
                let n = onlyIfCached
                    ? cns_pread_nowait(fd, buffer.baseAddress! + done, info.size - done, done)
                    : Glibc.read(fd, buffer.baseAddress! + done, info.size - done)
                if n < 0 && errno == EINTR { continue }
                if n < 0 && onlyIfCached && errno != EBADF && errno != EFAULT {
                    // EAGAIN: not cached. EOPNOTSUPP/EINVAL: no RWF_NOWAIT here; either
                    // way the blocking read decides.
                    wouldBlock = true
                    break
                }
                if n <= 0 { break }
                done += n
            }
            initialized = done
        }
        if wouldBlock { return .wouldBlock }
        return bytes.count == info.size ? .read(bytes, info) : .unavailable
    }
}
