import CSystemShims
import Glibc

/// An open file descriptor, with one throwing method per system call made on it.
///
/// A plain value: copying it does not duplicate the descriptor, and nothing closes it
/// but `close()` (or an owner such as `OpenFile`).
public struct FileDescriptor: Sendable, Hashable {
    public let rawValue: Int32

    public init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// Standard error (2), for messages written straight to it.
    public static let standardError = FileDescriptor(rawValue: STDERR_FILENO)

    /// Opens `path` (`O_CLOEXEC` is always added); a file it creates (`O_CREAT`) gets
    /// `mode` less the umask.
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o666) throws(SystemCallError) -> FileDescriptor {
        do {
            return FileDescriptor(rawValue: try systemCall("open") { Glibc.open(path, flags | O_CLOEXEC, mode) })
        } catch {
            throw error.on("'\(path)'")
        }
    }

    /// Opens `name` in the folder `self` (`O_CLOEXEC` is always added).
    public func open(at name: String, _ flags: Int32, mode: mode_t = 0o666) throws(SystemCallError) -> FileDescriptor {
        FileDescriptor(rawValue: try systemCall("openat") { openat(rawValue, name, flags | O_CLOEXEC, mode) })
    }

    /// A second descriptor for the same open file (`F_DUPFD_CLOEXEC`), closed apart.
    public func duplicate() throws(SystemCallError) -> FileDescriptor {
        FileDescriptor(rawValue: try systemCall("fcntl") { fcntl(rawValue, F_DUPFD_CLOEXEC, 0) })
    }

    /// Releases the descriptor. Linux releases it whatever `close(2)` answers (`EINTR`
    /// included), so there is nothing to retry; `EBADF` means it was closed twice, a bug.
    public func close() {
        if Glibc.close(rawValue) != 0 {
            let code = Glibc.errno
            precondition(code != EBADF, "descriptor \(rawValue) closed twice")
        }
    }

    /// Reads up to `buffer.count` bytes: `.done(0)` at the end of the file or stream.
    @inlinable @inline(__always)
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> IOResult<Int> {
        try nonBlockingCall("read") { tsys_read(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Reads up to `buffer.count` bytes at `offset`, without moving the file position.
    @inlinable
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(SystemCallError) -> Int {
        try systemCall("pread") { pread(rawValue, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// Reads only what the page cache holds (`preadv2` with `RWF_NOWAIT`): `.wouldBlock`
    /// when the bytes would have to come from the disk. File systems without it (overlayfs,
    /// tmpfs) throw `EOPNOTSUPP`.
    @inlinable
    public func readWithoutWaiting(into buffer: UnsafeMutableRawBufferPointer, at offset: Int)
        throws(SystemCallError) -> IOResult<Int>
    {
        try nonBlockingCall("preadv2") { tsys_pread_nowait(rawValue, buffer.baseAddress, buffer.count, Int64(offset)) }
    }

    /// Writes up to `buffer.count` bytes.
    @inlinable
    public func write(_ buffer: UnsafeRawBufferPointer) throws(SystemCallError) -> IOResult<Int> {
        try nonBlockingCall("write") { Glibc.write(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// `fstat`: size, times, identity and type.
    @inlinable
    public func info() throws(SystemCallError) -> FileInfo {
        var st = stat()
        _ = try systemCall("fstat") { fstat(rawValue, &st) }
        return FileInfo(st)
    }

    /// `fstatat(…, AT_SYMLINK_NOFOLLOW)` of `name` in the folder `self`: a symbolic link is
    /// reported as itself.
    public func info(at name: String) throws(SystemCallError) -> FileInfo {
        var st = stat()
        _ = try systemCall("fstatat") { fstatat(rawValue, name, &st, AT_SYMLINK_NOFOLLOW) }
        return FileInfo(st)
    }

    /// How many pages of the first `count` bytes are in the page cache (`cachestat(2)`,
    /// Linux 6.5: one system call, no mapping). Throws `ENOSYS` on older kernels. On a
    /// file system that keeps the pages elsewhere (overlayfs keeps them with the file
    /// beneath) it answers 0: callers learn that once per file system.
    @inlinable @inline(__always)
    public func cachedPages(count: Int) throws(SystemCallError) -> Int {
        var cached: UInt64 = 0
        _ = try systemCall("cachestat") { tsys_cached_pages(rawValue, 0, UInt64(count), &cached) }
        return Int(cached)
    }

    /// The pages `count` bytes take.
    @inlinable
    public static func pages(_ count: Int) -> Int { (count + pageSize - 1) / pageSize }

    public static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// Whether bytes `offset..<offset + count` of the file are all in the page cache,
    /// learnt with `mincore(2)` on a read-only mapping of their pages that is never
    /// touched (so a file truncated meanwhile cannot raise SIGBUS). Throws if the file
    /// cannot be mapped.
    public func isResident(offset: Int = 0, count: Int) throws(SystemCallError) -> Bool {
        guard count > 0 else { return true }
        let start = offset - offset % Self.pageSize
        let span = offset + count - start
        let map = mmap(nil, span, PROT_READ, MAP_SHARED, rawValue, off_t(start))
        guard let map, map != UnsafeMutableRawPointer(bitPattern: -1) else {
            throw SystemCallError("mmap", errno: Glibc.errno)
        }
        defer { munmap(map, span) }
        return try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.pages(span)) { vector throws(SystemCallError) in
            _ = try systemCall("mincore") { mincore(map, span, vector.baseAddress) }
            return vector.allSatisfy { $0 & 1 != 0 }
        }
    }
}

/// A descriptor closed when the last reference goes: lets a file be shared, e.g. by a
/// cache and by the connections sending ranges of it (`FileRange`), without anyone
/// closing it under the others.
public final class OpenFile: Sendable {
    public let descriptor: FileDescriptor

    /// Takes ownership of `descriptor`.
    public init(taking descriptor: FileDescriptor) {
        self.descriptor = descriptor
    }

    deinit { descriptor.close() }
}

/// What `stat` says about a file: enough to build validators and notice changes.
public struct FileInfo: Sendable, Hashable {
    public let size: Int
    public let modificationSeconds: Int64
    public let modificationNanoseconds: Int64
    public let inode: UInt64
    /// The file system it lives on (`st_dev`).
    public let device: UInt64
    public let isRegularFile: Bool
    public let isDirectory: Bool
    /// Whether it is a symbolic link (only `info(at:)`, which does not follow links, says so).
    public let isSymbolicLink: Bool
    /// The type bits of `st_mode` (`S_IFREG`, `S_IFDIR`, `S_IFIFO`…).
    public let type: mode_t
    /// Names the file has: 0 once it is deleted, or replaced by a rename over its name,
    /// while still open.
    public let linkCount: Int
    /// When its metadata last changed (`st_ctim`, nanoseconds): moves on a write, a
    /// rename of the file, a change of its link count.
    public let changeNanoseconds: Int64

    @usableFromInline
    init(_ st: stat) {
        size = Int(st.st_size)
        modificationSeconds = Int64(st.st_mtim.tv_sec)
        modificationNanoseconds = Int64(st.st_mtim.tv_nsec)
        inode = UInt64(st.st_ino)
        device = UInt64(st.st_dev)
        type = st.st_mode & S_IFMT
        isRegularFile = type == S_IFREG
        isDirectory = type == S_IFDIR
        isSymbolicLink = type == S_IFLNK
        linkCount = Int(st.st_nlink)
        changeNanoseconds = Int64(st.st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_ctim.tv_nsec)
    }

    /// Whether `now` (an `fstat` of the same open file) says its bytes are still the ones
    /// these were taken with: same size, same modification and change times, and still
    /// named somewhere (not deleted, not replaced by a rename).
    public func stillDescribes(_ now: FileInfo) -> Bool {
        now.linkCount > 0 && now.size == size && now.modificationSeconds == modificationSeconds
            && now.modificationNanoseconds == modificationNanoseconds && now.changeNanoseconds == changeNanoseconds
    }

    /// A strong entity tag from size, modification time and inode, e.g. `"1000-65f0a1b2.1c-3f2a"`.
    public var entityTag: String {
        "\"\(String(size, radix: 16))-\(String(modificationSeconds, radix: 16)).\(String(modificationNanoseconds, radix: 16))-\(String(inode, radix: 16))\""
    }
}

extension FileDescriptor {
    /// Waits up to `timeoutMilliseconds` until the descriptor is ready for `events`
    /// (`POLLIN`, `POLLOUT`); true when it is (or has an error the next call will report),
    /// false on timeout. A signal ends the wait early with false.
    public func poll(for events: Int16, timeoutMilliseconds: Int32) throws(SystemCallError) -> Bool {
        var entry = pollfd(fd: rawValue, events: events, revents: 0)
        let ready = Glibc.poll(&entry, 1, timeoutMilliseconds)
        if ready >= 0 { return ready > 0 }
        let code = Glibc.errno
        if code == EINTR { return false }
        throw SystemCallError("poll", errno: code)
    }
}
