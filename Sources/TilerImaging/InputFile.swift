import Foundation
import TilerSystem

/// An input image opened for reading. Only regular files are accepted, and the check is
/// made on the open descriptor (`fstat`), so a FIFO, a device such as `/dev/zero`, a
/// socket or a directory is refused before anything reads it, and nothing can swap the
/// file between the check and the read. libvips then reads the same descriptor: the
/// file's name is never parsed (`photo.jpg[shrink=8]` is a file name, not options).
final class InputFile {
    /// The path as the user gave it, for messages.
    let path: String
    let descriptor: FileDescriptor
    /// Bytes, from `fstat`.
    let size: Int
    /// Last modification, seconds since 1970, from `fstat`.
    let modificationSeconds: Int

    private init(path: String, descriptor: FileDescriptor, size: Int, modificationSeconds: Int) {
        self.path = path
        self.descriptor = descriptor
        self.size = size
        self.modificationSeconds = modificationSeconds
    }

    deinit { descriptor.close() }

    /// Opens `path` read-only. `O_NONBLOCK` keeps the open itself from waiting for a
    /// FIFO's writer; it is cleared again for a regular file.
    static func open(_ path: String) throws(CutError) -> InputFile {
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY)
        } catch {
            if error.errno == ENOENT || error.errno == ENOTDIR { throw .missing }
            throw .unreadable(error.reason)
        }
        let info: FileInfo
        do {
            info = try fd.info()
        } catch {
            fd.close()
            throw .unreadable(error.reason)
        }
        guard info.isRegularFile else {
            fd.close()
            if info.isDirectory { throw .isDirectory }
            throw .notARegularFile(Self.describe(info.type))
        }
        try? fd.setBlocking()
        return InputFile(path: path, descriptor: fd, size: info.size, modificationSeconds: Int(info.modificationSeconds))
    }

    /// libvips' message with the descriptor's stand-in name (`/proc/self/fd/N`) replaced
    /// by the user's path.
    func scrub(_ message: String) -> String {
        message.replacingOccurrences(of: "/proc/self/fd/\(descriptor.rawValue)", with: path)
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
