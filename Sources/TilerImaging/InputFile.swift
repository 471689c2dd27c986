import Foundation

/// An input image opened for reading. Only regular files are accepted, and the check is
/// made on the open descriptor (`fstat`), so a FIFO, a device such as `/dev/zero`, a
/// socket or a directory is refused before anything reads it, and nothing can swap the
/// file between the check and the read. libvips then reads the same descriptor: the
/// file's name is never parsed (`photo.jpg[shrink=8]` is a file name, not options).
final class InputFile {
    /// The path as the user gave it, for messages.
    let path: String
    let descriptor: Int32
    /// Bytes, from `fstat`.
    let size: Int
    /// Last modification, seconds since 1970, from `fstat`.
    let modificationSeconds: Int

    private init(path: String, descriptor: Int32, size: Int, modificationSeconds: Int) {
        self.path = path
        self.descriptor = descriptor
        self.size = size
        self.modificationSeconds = modificationSeconds
    }

    deinit { close(descriptor) }

    /// Opens `path` read-only. `O_NONBLOCK` keeps the open itself from waiting for a
    /// FIFO's writer; it is cleared again for a regular file.
    static func open(_ path: String) throws(CutError) -> InputFile {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR { throw .missing }
            throw .unreadable(String(cString: strerror(code)))
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw .unreadable(reason)
        }
        let kind = info.st_mode & S_IFMT
        guard kind == S_IFREG else {
            close(fd)
            if kind == S_IFDIR { throw .isDirectory }
            throw .notARegularFile(Self.describe(kind))
        }
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
        return InputFile(path: path, descriptor: fd, size: Int(info.st_size), modificationSeconds: Int(info.st_mtim.tv_sec))
    }

    /// libvips' message with the descriptor's stand-in name (`/proc/self/fd/N`) replaced
    /// by the user's path.
    func scrub(_ message: String) -> String {
        message.replacingOccurrences(of: "/proc/self/fd/\(descriptor)", with: path)
    }

    private static func describe(_ kind: mode_t) -> String {
        switch kind {
        case S_IFIFO: "a FIFO (named pipe)"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFSOCK: "a socket"
        default: "not a regular file"
        }
    }
}
