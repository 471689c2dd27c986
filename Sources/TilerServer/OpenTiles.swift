import Synchronization
import TilerHTTP

/// Tile files of folder pyramids kept open, each with a response that sends it with
/// `sendfile`: a tile asked for again costs no path walk (five `openat`s), no copy of its
/// bytes into the server and no response built, only an `fstat`, a residency check and
/// the send. Bounded by a number of descriptors (`ServerConfiguration.openTiles`), CLOCK
/// eviction; a descriptor closes when its entry is evicted and no connection is still
/// sending from it.
///
/// **Never stale, never mixed.** An entry is made from a file whose bytes were just read
/// and checked (`TileFormat.looksComplete`); before each use an `fstat` of the open file
/// must still match (`FileInfo.stillDescribes`: same size, modification and change
/// times, and a link count above 0). So a tile rewritten in place, truncated, deleted, or
/// replaced by a rename over its name (the old inode loses its name) is dropped at its
/// next request and read again by name. A folder above it renamed away (its files keep
/// their names) is caught by checking, once per `revalidateAfter`, that the tile's path
/// still leads to the same inode.
///
/// **Never blocks an event loop.** `sendfile` would wait for the disk on pages not in the
/// page cache, so each use checks residency first: `cachestat(2)` (one system call) on
/// file systems where it sees the file's pages, else `mincore` on a mapping (overlayfs
/// keeps the pages with the file beneath, which `cachestat` on the overlay cannot see;
/// this is learnt per file when it is opened, right after its bytes were read). A tile
/// not wholly resident goes to the read lane like any uncached read.
final class OpenTiles: Sendable {
    /// One open tile file and the response that sends it.
    final class Entry: Sendable {
        let response: PreparedResponse
        let file: OpenFile
        let info: FileInfo
        let root: String
        let components: [String]
        /// Whether `cachestat` sees this file's pages (else `mincore` is asked).
        let countsPages: Bool
        /// When its path was last found to lead to this file (monotonic milliseconds).
        let checked: Atomic<Int64>

        init(
            response: PreparedResponse, file: OpenFile, info: FileInfo, root: String, components: [String],
            countsPages: Bool, checked: Int64
        ) {
            self.response = response
            self.file = file
            self.info = info
            self.root = root
            self.components = components
            self.countsPages = countsPages
            self.checked = Atomic(checked)
        }

        /// Whether every page of the file is in the page cache.
        var isResident: Bool {
            if countsPages {
                return (try? file.descriptor.cachedPages(count: info.size)) == FileDescriptor.pages(info.size)
            }
            return (try? file.descriptor.isResident(count: info.size)) == true
        }
    }

    /// What `answer` found.
    enum Answer {
        /// The tile's response, its body sent from the open file.
        case ready(PreparedResponse)
        /// Open and unchanged, but not all in the page cache: read it on the read lane.
        case notResident
        /// Not open (or dropped just now as changed): open it by name.
        case notOpen
    }

    private let entries: ClockCache<CachedItem, Entry>
    /// Milliseconds after which an entry's path is checked again.
    let revalidateAfter: Int64

    /// `capacity` descriptors at most; paths checked again after `revalidateAfter`
    /// seconds (the catalog's rescan interval: the same promise as for pyramids).
    init(capacity: Int, revalidateAfter: Double) {
        entries = ClockCache(capacity: capacity)
        self.revalidateAfter = Int64((revalidateAfter * 1000).rounded())
    }

    /// Descriptors held now.
    var count: Int { entries.count }

    /// The open tile for `key`, checked (see the type's notes). No I/O but `fstat`, the
    /// residency check and, once per `revalidateAfter`, a walk of its path.
    func answer(for key: CachedItem, now: Int64 = SystemClock.monotonicMilliseconds()) -> Answer {
        guard let entry = entries.value(for: key) else { return .notOpen }
        guard let current = try? entry.file.descriptor.info(), entry.info.stillDescribes(current) else {
            drop(entry, for: key)
            return .notOpen
        }
        if now - entry.checked.load(ordering: .relaxed) >= revalidateAfter {
            guard let named = RootedFiles.info(root: entry.root, entry.components), named.inode == entry.info.inode,
                named.device == entry.info.device
            else {
                drop(entry, for: key)
                return .notOpen
            }
            entry.checked.store(now, ordering: .relaxed)
        }
        return entry.isResident ? .ready(entry.response) : .notResident
    }

    /// Keeps `fd` (which the cache now owns), a file whose bytes were just read whole and
    /// checked, as the tile `key`, sent with these headers.
    func keep(
        _ fd: FileDescriptor, _ info: FileInfo, root: String, components: [String], contentType: String,
        validators: Validators, cacheControl: String, for key: CachedItem,
        now: Int64 = SystemClock.monotonicMilliseconds()
    ) {
        let file = OpenFile(taking: fd)
        // The bytes were just read, so every page is resident: a count short of that means
        // cachestat cannot see this file system's pages.
        let countsPages = (try? fd.cachedPages(count: info.size)) == FileDescriptor.pages(info.size)
        let sent = PreparedResponse(
            file: FileRange(file: file, count: info.size), contentType: contentType,
            etag: validators.etag, lastModified: validators.lastModified, cacheControl: cacheControl)
        let entry = Entry(
            response: sent, file: file, info: info, root: root, components: components,
            countsPages: countsPages, checked: now)
        entries.insert(entry, cost: 1, for: key)
    }

    private func drop(_ entry: Entry, for key: CachedItem) {
        entries.remove(key) { $0 === entry }
    }
}
