import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// Writes `path`'s pages back and drops them from the page cache (`POSIX_FADV_DONTNEED`),
/// retried for up to `seconds` until at least one is gone, as `mincore` on a mapping of the
/// file tells (asked here with Glibc, not through tiler's own probe). The kernel drops only
/// what nothing else holds at that instant (a page isolated by reclaim or migration
/// stays), so on a busy machine one call can leave every page. False if the pages stayed,
/// or the file cannot be opened or mapped.
public func dropFromPageCache(_ path: String, within seconds: Double = 10) -> Bool {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0, info.st_size > 0 else { return false }
    let size = Int(info.st_size), page = Int(sysconf(Int32(_SC_PAGESIZE)))
    guard let map = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else { return false }
    defer { munmap(map, size) }
    var resident = [UInt8](repeating: 0, count: (size + page - 1) / page)
    return eventually(within: seconds) {
        fsync(fd)
        guard posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0, mincore(map, size, &resident) == 0 else { return false }
        return resident.contains { $0 & 1 == 0 }
    }
}
