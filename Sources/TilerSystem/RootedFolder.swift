import Glibc

/// A folder beneath a root, opened the way `RootedFiles` opens paths (no symbolic link
/// below the root is followed) and kept open to look at many of its entries: a scan of
/// ROOT opens ROOT once and each pyramid folder once. Files are read with the same rules:
/// no link followed, regular files only (opened `O_NONBLOCK`, so a FIFO cannot block),
/// at most a given number of bytes.
///
/// Unlike `RootedFiles`, failures say why (`RootedFileError`), so that a caller can tell
/// a file that is not there from one it is not allowed to read.
public final class RootedFolder {
    /// The open folder (`O_DIRECTORY`); closed when the value goes away.
    public let descriptor: FileDescriptor

    /// Opens `root` itself, which may be a symbolic link (`/data` → `/mnt/disk/data`).
    public init(root: String) throws(RootedFileError) {
        descriptor = try Self.attempt { () throws(SystemCallError) in try FileDescriptor.open(root, O_RDONLY | O_DIRECTORY) }
    }

    private init(descriptor: FileDescriptor) {
        self.descriptor = descriptor
    }

    deinit { descriptor.close() }

    /// `body`'s result, its failure told as a `RootedFileError`.
    private static func attempt<T>(_ body: () throws(SystemCallError) -> T) throws(RootedFileError) -> T {
        do {
            return try body()
        } catch {
            throw RootedFileError(errno: error.errno)
        }
    }

    /// The folder `name` inside this one: `.link` if it is a symbolic link,
    /// `.notRegularFile` if it is not a folder.
    public func folder(_ name: String) throws(RootedFileError) -> RootedFolder {
        RootedFolder(descriptor: try openFolder(name))
    }

    /// Opens the folder `name` inside this one without following a link.
    private func openFolder(_ name: String) throws(RootedFileError) -> FileDescriptor {
        guard RootedFiles.isPlainName(name) else { throw RootedFileError(.missing) }
        do {
            return try descriptor.open(at: name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        } catch {
            throw folderError(name, error.errno)
        }
    }

    /// Why the folder `name` did not open with `code`. With O_DIRECTORY, Linux reports a
    /// link as ENOTDIR, like a file: tell them apart.
    private func folderError(_ name: String, _ code: Int32) -> RootedFileError {
        if code == ENOTDIR, let info = try? descriptor.info(at: name), info.isSymbolicLink {
            return RootedFileError(.link, errno: code)
        }
        return RootedFileError(errno: code)
    }

    /// `lstat` of the entry `name`: a link is reported as itself.
    public func info(_ name: String) throws(RootedFileError) -> FileInfo {
        guard RootedFiles.isPlainName(name) else { throw RootedFileError(.missing) }
        return try Self.attempt { () throws(SystemCallError) in try descriptor.info(at: name) }
    }

    /// `lstat` of the entry `name` of the folder `folder` inside this one, without
    /// following links and without making a `RootedFolder` (for a scan over many folders).
    public func info(_ name: String, inFolder folder: String) throws(RootedFileError) -> FileInfo {
        guard RootedFiles.isPlainName(folder), RootedFiles.isPlainName(name) else { throw RootedFileError(.missing) }
        let fd = try openFolder(folder)
        defer { fd.close() }
        return try Self.attempt { () throws(SystemCallError) in try fd.info(at: name) }
    }

    /// `fstat` of this folder.
    public func info() throws(RootedFileError) -> FileInfo {
        try Self.attempt { () throws(SystemCallError) in try descriptor.info() }
    }

    /// The bytes and metadata of the regular file `name`: `.link` for a symbolic link,
    /// `.notRegularFile` for a FIFO, device or folder, `.tooLarge` past `maximumBytes`,
    /// `.changed` if it shrinks while being read.
    public func read(_ name: String, maximumBytes: Int) throws(RootedFileError) -> (bytes: [UInt8], info: FileInfo) {
        guard RootedFiles.isPlainName(name) else { throw RootedFileError(.missing) }
        let fd = try Self.attempt { () throws(SystemCallError) in
            try descriptor.open(at: name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        }
        defer { fd.close() }
        let info = try Self.attempt { () throws(SystemCallError) in try fd.info() }
        guard info.isRegularFile else { throw RootedFileError(.notRegularFile) }
        guard info.size <= maximumBytes else { throw RootedFileError(.tooLarge) }
        var failure: Int32 = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: info.size) { buffer, initialized in
            var done = 0
            while done < info.size {
                do throws(SystemCallError) {
                    let n = try fd.read(
                        into: UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[done...])),
                        at: done)
                    if n == 0 { break }
                    done += n
                } catch {
                    failure = error.errno
                    break
                }
            }
            initialized = done
        }
        if failure != 0 { throw RootedFileError(errno: failure) }
        guard bytes.count == info.size else { throw RootedFileError(.changed) }
        return (bytes, info)
    }

    /// The regular file `root/components…`, read as `read(_:maximumBytes:)` reads, each
    /// folder on the way opened with `folder(_:)`: nothing below `root` is followed.
    public static func read(root: String, _ components: [String], maximumBytes: Int) throws(RootedFileError)
        -> (bytes: [UInt8], info: FileInfo)
    {
        guard let last = components.last else { throw RootedFileError(.missing) }
        var folder = try RootedFolder(root: root)
        for name in components.dropLast() { folder = try folder.folder(name) }
        return try folder.read(last, maximumBytes: maximumBytes)
    }

    /// The names of the entries (without `.` and `..`), in directory order.
    public func names() throws(RootedFileError) -> [String] {
        let copy = dup(descriptor.rawValue)
        guard copy >= 0 else { throw RootedFileError(errno: errno) }
        guard let dir = fdopendir(copy) else {
            let code = errno
            close(copy)
            throw RootedFileError(errno: code)
        }
        defer { closedir(dir) }
        rewinddir(dir)
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}

/// Why a rooted file or folder could not be opened or read.
public struct RootedFileError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// Not there (`ENOENT`, or a name that is not a plain file name).
        case missing
        /// Permission denied (`EACCES`, `EPERM`): worth telling the operator.
        case denied
        /// A symbolic link, which is never followed below the root.
        case link
        /// A FIFO, device, socket or folder where a file was expected, or a file where a
        /// folder was.
        case notRegularFile
        /// Larger than the caller allows.
        case tooLarge
        /// Shorter when read than when opened: replaced while being read.
        case changed
        /// Any other system error (`errno` says which).
        case other
    }

    public let kind: Kind
    /// The system's error number, or 0 when the failure is not a system call's.
    public let errno: Int32

    public init(_ kind: Kind, errno: Int32 = 0) {
        self.kind = kind
        self.errno = errno
    }

    init(errno code: Int32) {
        switch code {
        case ENOENT: self.init(.missing, errno: code)
        case EACCES, EPERM: self.init(.denied, errno: code)
        case ELOOP: self.init(.link, errno: code)
        case ENOTDIR: self.init(.notRegularFile, errno: code)
        default: self.init(.other, errno: code)
        }
    }

    public var description: String {
        switch kind {
        case .missing: "not found"
        case .denied: "permission denied"
        case .link: "a symbolic link (never followed below ROOT)"
        case .notRegularFile: "not a regular file"
        case .tooLarge: "larger than allowed"
        case .changed: "changed while being read"
        case .other: String(cString: strerror(errno))
        }
    }
}
