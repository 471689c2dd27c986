import CSystemShims
import Glibc

/// Calls on paths: what the storage layer does to names rather than to open files. Each
/// throws `SystemCallError` naming the path; callers decide by its `errno`.
public enum FileSystem {
    /// Makes the folder `path` (`mode` less the umask).
    public static func makeDirectory(_ path: String, mode: mode_t = 0o777) throws(SystemCallError) {
        try call("mkdir", path) { mkdir(path, mode) }
    }

    /// Makes the folder `path` unless it exists; true when this call made it.
    @discardableResult
    public static func makeDirectoryIfMissing(_ path: String, mode: mode_t = 0o777) throws(SystemCallError) -> Bool {
        do {
            try makeDirectory(path, mode: mode)
            return true
        } catch  where error.errno == EEXIST {
            return false
        }
    }

    /// Makes a new folder, mode 0700, named `prefix` and six random characters
    /// (`mkdtemp`); returns its path.
    public static func makeTemporaryDirectory(prefix: String) throws(SystemCallError) -> String {
        var template = Array("\(prefix)XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard let made else { throw SystemCallError("mkdtemp", "'\(prefix)XXXXXX'", errno: Glibc.errno) }
        return String(cString: made)
    }

    /// Removes the empty folder `path`.
    public static func removeDirectory(_ path: String) throws(SystemCallError) {
        try call("rmdir", path) { rmdir(path) }
    }

    /// Removes the name `path` (a file, a link).
    public static func unlink(_ path: String) throws(SystemCallError) {
        try call("unlink", path) { Glibc.unlink(path) }
    }

    /// Removes the name `path` if it is there; a missing name is not an error.
    public static func unlinkIfPresent(_ path: String) throws(SystemCallError) {
        do { try unlink(path) } catch  where error.errno == ENOENT {}
    }

    /// Renames `from` to `to`, replacing what `to` names (a file, or an empty folder).
    public static func rename(_ from: String, to: String) throws(SystemCallError) {
        try call("rename", to) { Glibc.rename(from, to) }
    }

    /// Renames `from` to `to` only if `to` does not exist (`RENAME_NOREPLACE`): `EEXIST`
    /// otherwise; `EINVAL` or `ENOSYS` where the file system or kernel cannot.
    public static func renameWithoutReplacing(_ from: String, to: String) throws(SystemCallError) {
        try call("renameat2", to) { tsys_rename_noreplace(from, to) }
    }

    /// Swaps two existing paths in one step (`RENAME_EXCHANGE`), so a reader sees either
    /// and never neither; `EINVAL` or `ENOSYS` where the file system or kernel cannot.
    public static func exchange(_ a: String, _ b: String) throws(SystemCallError) {
        try call("renameat2", b) { tsys_rename_exchange(a, b) }
    }

    /// Gives the file `from` the further name `to` (`link(2)`): `EEXIST` if `to` exists.
    public static func link(_ from: String, to: String) throws(SystemCallError) {
        try call("link", to) { Glibc.link(from, to) }
    }

    /// Writes `bytes` to the file `path`, made (`mode` less the umask: 0644 under umask
    /// 022) or emptied first.
    public static func write(_ bytes: UnsafeRawBufferPointer, to path: String, mode: mode_t = 0o666) throws(SystemCallError) {
        let fd = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_TRUNC, mode: mode)
        defer { fd.close() }
        do {
            try fd.writeAll(bytes)
        } catch {
            throw error.on("'\(path)'")
        }
    }

    /// `stat` of `path` (`lstat` without `followingLinks`: a symbolic link is reported as
    /// itself); nil if it does not exist.
    public static func info(_ path: String, followingLinks: Bool = true) throws(SystemCallError) -> FileInfo? {
        var st = stat()
        do {
            try call("stat", path) { followingLinks ? stat(path, &st) : lstat(path, &st) }
        } catch  where error.errno == ENOENT {
            return nil
        }
        return FileInfo(st)
    }

    @inline(__always)
    private static func call(_ name: StaticString, _ path: String, _ body: () -> Int32) throws(SystemCallError) {
        do {
            _ = try systemCall(name, body)
        } catch {
            throw error.on("'\(path)'")
        }
    }
}

/// A file written whole under a temporary name beside its destination and renamed over it
/// when complete: a reader sees the old bytes or the new, never part of them.
public enum AtomicFile {
    /// Writes `bytes` to `path` through `temporary` (which must not exist: opened with
    /// `O_EXCL`), with `mode` less the umask; `sync` flushes the bytes to the disk before
    /// the rename. The temporary file is removed when anything fails.
    public static func write(
        _ bytes: [UInt8], to path: String, through temporary: String, mode: mode_t = 0o666, sync: Bool = false
    ) throws(SystemCallError) {
        let fd = try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_EXCL, mode: mode)
        do {
            defer { fd.close() }
            try fd.writeAll(bytes)
            if sync { try fd.sync() }
        } catch {
            try? FileSystem.unlink(temporary)
            throw error
        }
        do {
            try FileSystem.rename(temporary, to: path)
        } catch {
            try? FileSystem.unlink(temporary)
            throw error
        }
    }
}
