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
    /// `root` without following links; nil if any step is missing, a link or not a folder.
    private static func openParent(root: String, _ components: [String]) -> FileDescriptor? {
        openFolder(root: root, components.dropLast())
    }

    /// Opens the folder `root/components…` (the root itself for none) the same way.
    private static func openFolder(root: String, _ components: ArraySlice<String>) -> FileDescriptor? {
        guard var dir = try? FileDescriptor.open(root, O_RDONLY | O_DIRECTORY) else { return nil }
        for name in components {
            let next = isPlainName(name) ? try? dir.open(at: name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW) : nil
            dir.close()
            guard let next else { return nil }
            dir = next
        }
        return dir
    }

    /// A single path component: not empty, `.` or `..`, and without `/` or NUL.
    static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.utf8.contains(UInt8(ascii: "/")) && !name.utf8.contains(0)
    }

    /// `fstat` of the folder `root/components…` (the root itself for none), reached as
    /// `open` reaches a file's folder; nil if a step is missing, a link or not a folder.
    public static func folderInfo(root: String, _ components: ArraySlice<String>) -> FileInfo? {
        guard let dir = openFolder(root: root, components) else { return nil }
        defer { dir.close() }
        return try? dir.info()
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
        /// Missing, a link, not a regular file, or it shrank.
        case unavailable
        /// A regular file larger than allowed: there, but damaged, not missing.
        case tooLarge(FileInfo)
        /// Reading it would wait for the disk: read it where blocking is allowed.
        case wouldBlock
    }

    /// The probe used for files on `device` (`FileInfo.device`).
    public static func pageCacheProbe(device: UInt64) -> PageCacheProbe { PageCache.probe(for: device) }

    /// Like `read`, but takes only what the page cache already holds, so an event loop
    /// can call it: `.wouldBlock` when any of the file would have to come from the disk
    /// (see `PageCacheProbe` for how that is known).
    public static func readIfCached(root: String, _ components: [String], maximumBytes: Int = 1 << 30) -> CachedRead {
        read(root: root, components, maximumBytes: maximumBytes, onlyIfCached: true)
    }

    private static func read(root: String, _ components: [String], maximumBytes: Int, onlyIfCached: Bool) -> CachedRead {
        switch open(root: root, components, maximumBytes: maximumBytes) {
        case let .file(fd, info, _):
            defer { fd.close() }
            return read(fd, info, onlyIfCached: onlyIfCached)
        case .unavailable: return .unavailable
        case let .tooLarge(info): return .tooLarge(info)
        }
    }

    /// What `open` found.
    public enum Opened {
        /// The open file and its `fstat`; the caller owns the descriptor. `folder` is the
        /// `fstat` of the folder it was opened in, when `open` was asked for it.
        case file(FileDescriptor, FileInfo, folder: FileInfo?)
        /// Missing, a link, not a regular file, or not readable.
        case unavailable
        /// A regular file larger than allowed (closed again).
        case tooLarge(FileInfo)
    }

    /// Opens the regular file `root/components…` as `read` does (no link followed, at
    /// most `maximumBytes`) without reading it; with `describingFolder`, also says what
    /// the folder it was found in was at that moment (one more `fstat`).
    public static func open(
        root: String, _ components: [String], maximumBytes: Int, describingFolder: Bool = false
    ) -> Opened {
        guard let last = components.last, isPlainName(last), let dir = openParent(root: root, components) else {
            return .unavailable
        }
        let opened = try? dir.open(at: last, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        let folder = describingFolder ? try? dir.info() : nil
        dir.close()
        guard let fd = opened else { return .unavailable }
        guard let info = try? fd.info(), info.isRegularFile else {
            fd.close()
            return .unavailable
        }
        guard info.size <= maximumBytes else {
            fd.close()
            return .tooLarge(info)
        }
        return .file(fd, info, folder: folder)
    }

    /// The bytes of an open file whose `fstat` is `info`: only what the page cache holds
    /// when `onlyIfCached` (`.wouldBlock` otherwise, see `PageCache`), as `readIfCached`
    /// reads.
    public static func read(_ fd: FileDescriptor, _ info: FileInfo, onlyIfCached: Bool) -> CachedRead {
        var outcome = CachedRead.unavailable
        let bytes = [UInt8](unsafeUninitializedCapacity: info.size) { buffer, initialized in
            initialized = 0
            let whole = UnsafeMutableRawBufferPointer(buffer)
            do {
                if onlyIfCached {
                    switch try PageCache.read(fd, device: info.device, into: whole, at: 0) {
                    case .read(let n): initialized = n
                    case .wouldBlock:
                        outcome = .wouldBlock
                        return
                    }
                } else {
                    initialized = try fd.readFully(into: whole, at: 0)
                }
            } catch {
                return  // EIO: unavailable
            }
        }
        if case .wouldBlock = outcome { return outcome }
        return bytes.count == info.size ? .read(bytes, info) : .unavailable
    }
}
