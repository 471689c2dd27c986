import Glibc
import Synchronization

/// How this process asks whether a file's bytes are in the page cache, so that an event
/// loop reads only what will not wait for the disk. Learnt once per file system
/// (`st_dev`), shared by every thread: the first read tries `preadv2(RWF_NOWAIT)`, and a
/// file system that answers it `EOPNOTSUPP` (overlayfs, hence every container; tmpfs)
/// moves to `.residency` for good, and one where that fails too to `.none`.
public enum PageCacheProbe: Sendable, Hashable {
    /// `preadv2(RWF_NOWAIT)`: reads what the page cache holds, `EAGAIN` for the rest.
    case readWithoutWaiting
    /// `mincore` on a read-only mapping of the range (never touched, so a truncation
    /// meanwhile cannot raise SIGBUS), then a plain `pread` when every page is resident. A
    /// page evicted between the two is read from the disk on the event loop: a window of
    /// microseconds, against every read going to the pool.
    case residency
    /// Neither works (the file cannot be mapped): every read goes where blocking is
    /// allowed.
    case none
}

/// The one page-cache probe: reads of cached bytes for the event loops (`read`), and the
/// residency of files kept open (`Residency`).
public enum PageCache {
    private static let probes = Mutex<[UInt64: PageCacheProbe]>([:])

    /// The probe used for files on `device` (`FileInfo.device`).
    public static func probe(for device: UInt64) -> PageCacheProbe {
        probes.withLock { $0[device] ?? .readWithoutWaiting }
    }

    private static func setProbe(_ probe: PageCacheProbe, for device: UInt64) {
        probes.withLock { $0[device] = probe }
    }

    /// What `read` did.
    public enum Read: Sendable, Equatable {
        /// Read this many bytes: all of the buffer, or fewer where the file ends.
        case read(Int)
        /// Some of the bytes would have to come from the disk (or the page cache cannot
        /// be asked here): read them where blocking is allowed.
        case wouldBlock
    }

    /// Fills `buffer` from `offset` of `fd` (a file on `device`) only if the page cache
    /// holds every byte, so an event loop may call it. Throws only what a plain read of
    /// bytes known to be cached throws (`EIO`).
    public static func read(
        _ fd: FileDescriptor, device: UInt64, into buffer: UnsafeMutableRawBufferPointer, at offset: Int
    ) throws(SystemCallError) -> Read {
        guard buffer.count > 0 else { return .read(0) }
        var probe = probe(for: device)
        if probe == .readWithoutWaiting {
            var done = 0
            while done < buffer.count {
                let result: IOResult<Int>
                do throws(SystemCallError) {
                    result = try fd.readWithoutWaiting(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + done)
                } catch  where [EOPNOTSUPP, EINVAL, ENOSYS].contains(error.errno) {
                    setProbe(.residency, for: device)
                    probe = .residency
                    break
                } catch {
                    return .wouldBlock  // EIO and the like: the blocking read decides
                }
                guard case .done(let n) = result else { return .wouldBlock }  // not cached
                if n == 0 { return .read(done) }
                done += n
            }
            if probe == .readWithoutWaiting { return .read(done) }
        }
        guard probe == .residency else { return .wouldBlock }
        do {
            // All cached: the plain read below does not wait for the disk.
            guard try fd.isResident(offset: offset, count: buffer.count) else { return .wouldBlock }
        } catch {
            setProbe(.none, for: device)
            return .wouldBlock
        }
        return .read(try fd.readFully(into: buffer, at: offset))
    }

    /// How the residency of a file kept open is asked, chosen when it is opened: by
    /// counting its cached pages (`cachestat(2)`, Linux 6.5: one system call, no mapping)
    /// where that counted all of them then, else by `mincore` on a mapping (file systems
    /// that keep the pages elsewhere, as overlayfs keeps them with the file beneath,
    /// count 0; older kernels have no `cachestat`).
    public enum Residency: Sendable {
        case counted
        case mapped

        /// The way for `fd`, whose first `count` bytes were just read.
        public init(of fd: FileDescriptor, count: Int) {
            self = (try? fd.cachedPages(count: count)) == FileDescriptor.pages(count) ? .counted : .mapped
        }

        /// Whether the first `count` bytes of `fd` are all in the page cache now.
        @inlinable @inline(__always)
        public func holds(_ fd: FileDescriptor, count: Int) -> Bool {
            switch self {
            case .counted: (try? fd.cachedPages(count: count)) == FileDescriptor.pages(count)
            case .mapped: (try? fd.isResident(count: count)) == true
            }
        }
    }
}
