import CSystemShims
import Glibc

/// The calls on files that loop until done (`EINTR` and short counts handled once, here),
/// and the few others the storage layer makes on an open file.
extension FileDescriptor {
    /// Reads until `buffer` is full or the file ends, from `offset` on (`pread`, which
    /// does not move the file position); returns the bytes read, fewer than
    /// `buffer.count` only at the end of the file.
    public func readFully(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(SystemCallError) -> Int {
        var done = 0
        while done < buffer.count {
            let n = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + done)
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Reads until `buffer` is full or the stream ends (a blocking descriptor); returns
    /// the bytes read.
    public func readFully(into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Int {
        var done = 0
        while done < buffer.count {
            let n = try systemCall("read") {
                Glibc.read(rawValue, buffer.baseAddress! + done, buffer.count - done)
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Writes all of `buffer` (a blocking descriptor: a file, a pipe, the terminal).
    public func writeAll(_ buffer: UnsafeRawBufferPointer) throws(SystemCallError) {
        var done = 0
        while done < buffer.count {
            done += try systemCall("write") { Glibc.write(rawValue, buffer.baseAddress! + done, buffer.count - done) }
        }
    }

    /// Writes all of `bytes`.
    public func writeAll(_ bytes: [UInt8]) throws(SystemCallError) {
        let failure = bytes.withUnsafeBytes { buffer -> SystemCallError? in
            do throws(SystemCallError) {
                try writeAll(buffer)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// Writes all of `buffer` at `offset` (`pwrite`, which does not move the file position).
    public func writeAll(_ buffer: UnsafeRawBufferPointer, at offset: Int) throws(SystemCallError) {
        var done = 0
        while done < buffer.count {
            done += try systemCall("pwrite") {
                pwrite(rawValue, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            }
        }
    }

    /// Flushes the file's bytes and metadata to the disk (`fsync`).
    public func sync() throws(SystemCallError) {
        _ = try systemCall("fsync") { fsync(rawValue) }
    }

    /// Makes reads and writes wait (clears `O_NONBLOCK`).
    public func setBlocking() throws(SystemCallError) {
        let flags = try systemCall("fcntl") { fcntl(rawValue, F_GETFL) }
        _ = try systemCall("fcntl") { fcntl(rawValue, F_SETFL, flags & ~O_NONBLOCK) }
    }

    /// Sets the file's size (`ftruncate`).
    public func truncate(to size: Int) throws(SystemCallError) {
        _ = try systemCall("ftruncate") { ftruncate(rawValue, off_t(size)) }
    }

    /// Takes the exclusive advisory lock on the open file (`flock(LOCK_EX | LOCK_NB)`),
    /// held until every descriptor of this open file is closed (the kernel drops it when
    /// the process dies): false when another open file holds it.
    public func tryLockExclusive() throws(SystemCallError) -> Bool {
        do {
            _ = try systemCall("flock") { flock(rawValue, LOCK_EX | LOCK_NB) }
            return true
        } catch  where error.errno == EWOULDBLOCK {
            return false
        }
    }

    /// Copies `count` bytes at `offset` of this file to `targetOffset` of `target`: with
    /// `copy_file_range(2)` (in the kernel, no user-space buffer) while `inKernel` is true,
    /// else, or once the kernel or file system refuses it (`EXDEV`, `ENOSYS`, `EINVAL`,
    /// `EOPNOTSUPP`, `EPERM`: overlayfs, older kernels; `inKernel` is then set to false),
    /// through a buffer of at most 1 MiB. Throws `EIO` when this file ends early.
    public func copy(
        count: Int, at offset: Int, to target: FileDescriptor, at targetOffset: Int, inKernel: inout Bool
    ) throws(SystemCallError) {
        var done = 0
        while inKernel && done < count {
            var from = Int64(offset + done)
            var to = Int64(targetOffset + done)
            let n = tsys_copy_file_range(rawValue, &from, target.rawValue, &to, min(count - done, 1 << 30))
            if n > 0 {
                done += n
                continue
            }
            if n == 0 { throw SystemCallError("copy_file_range", errno: EIO) }  // the source ends early
            let code = Glibc.errno
            if code == EINTR { continue }
            guard [EXDEV, ENOSYS, EINVAL, EOPNOTSUPP, EPERM].contains(code) else {
                throw SystemCallError("copy_file_range", errno: code)
            }
            inKernel = false  // this kernel or file system cannot: copy through memory
        }
        guard done < count else { return }
        let size = min(count - done, 1 << 20)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        while done < count {
            let want = UnsafeMutableRawBufferPointer(rebasing: buffer[..<min(size, count - done)])
            let got = try read(into: want, at: offset + done)
            if got == 0 { throw SystemCallError("pread", errno: EIO) }
            try target.writeAll(UnsafeRawBufferPointer(rebasing: want[..<got]), at: targetOffset + done)
            done += got
        }
    }
}
