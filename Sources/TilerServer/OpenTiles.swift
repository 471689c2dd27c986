import Synchronization
import TilerHTTP
import TilerSystem

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
/// their names) is caught by checking, once per `revalidateAfter`, that the tile's folder
/// path still leads to the same folder, unchanged (`Folder`): any name added, removed or
/// renamed in it moves its modification time, so a tile renamed or replaced where the
/// file's own `fstat` cannot see it (a file of an overlayfs lower layer replaced by a
/// rename keeps its link count) is caught too. The check is shared by every open tile of
/// that folder: one walk per folder and interval, not one per tile (a folder holds up to a
/// level's row of tiles, and a walk is five system calls). A changed folder has all its
/// tiles opened again by name at their next request, once.
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
        /// `file`'s descriptor, read here rather than through `file` (one object fewer
        /// to reach per request; `file` keeps it open while this entry lives).
        let descriptor: FileDescriptor
        let info: FileInfo
        /// The folder it was opened in.
        let folder: Folder
        /// How its residency is asked (`cachestat` or `mincore`).
        let residency: PageCache.Residency

        init(response: PreparedResponse, file: OpenFile, info: FileInfo, folder: Folder, residency: PageCache.Residency) {
            self.response = response
            self.file = file
            descriptor = file.descriptor
            self.info = info
            self.folder = folder
            self.residency = residency
        }

        /// Whether every page of the file is in the page cache.
        var isResident: Bool { residency.holds(descriptor, count: info.size) }
    }

    /// A folder holding open tiles, as the `fstat` taken in the walk that opened the
    /// first of them found it: found again at its path, the same folder and unchanged
    /// (same inode, modification and change times), once per `revalidateAfter` for all of
    /// its tiles.
    final class Folder: Sendable {
        let root: String
        /// Its path below `root`.
        let components: ArraySlice<String>
        let identity: FileInfo
        /// When its path was last found to lead to it, unchanged (monotonic milliseconds).
        let checked: Atomic<Int64>
        /// Set for good once its path led elsewhere or it changed: its tiles are dropped.
        let isReplaced = Atomic<Bool>(false)

        init(root: String, components: ArraySlice<String>, identity: FileInfo, checked: Int64) {
            self.root = root
            self.components = components
            self.identity = identity
            self.checked = Atomic(checked)
        }

        /// Whether it is still the folder at its path, checked at most once per `interval`
        /// milliseconds (two loops may both check at the interval's end; both agree).
        func isCurrent(now: Int64, interval: Int64) -> Bool {
            guard !isReplaced.load(ordering: .relaxed) else { return false }
            guard now - checked.load(ordering: .relaxed) >= interval else { return true }
            guard RootedFiles.folderInfo(root: root, components) == identity else {
                isReplaced.store(true, ordering: .relaxed)
                return false
            }
            checked.store(now, ordering: .relaxed)
            return true
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
    /// The folders of open tiles, by path, so that the tiles of one folder share one
    /// check; folders no tile refers to any more are dropped when this holds twice the
    /// descriptors' capacity (each tile refers to one folder, so at most `capacity` stay).
    private let folders = Mutex<[String: Folder]>([:])
    private let folderLimit: Int
    /// Milliseconds after which a folder's path is checked again.
    let revalidateAfter: Int64

    /// `capacity` descriptors at most; paths checked again after `revalidateAfter`
    /// seconds (the catalog's rescan interval: the same promise as for pyramids).
    init(capacity: Int, revalidateAfter: Double) {
        entries = ClockCache(capacity: capacity)
        folderLimit = 2 * max(capacity, 16)
        self.revalidateAfter = Int64((revalidateAfter * 1000).rounded())
    }

    /// Descriptors held now.
    var count: Int { entries.count }

    /// Folders known now (those of open tiles, and some no tile refers to any more).
    var folderCount: Int { folders.withLock { $0.count } }

    /// The folder the open tile `key` was opened in (for tests).
    func folder(of key: CachedItem) -> Folder? { entries.value(for: key)?.folder }

    /// The open tile for `key`, checked (see the type's notes). No I/O but `fstat`, the
    /// residency check and, once per `revalidateAfter` for its whole folder, a walk of
    /// the folder's path.
    func answer(for key: CachedItem, now: Int64 = SystemClock.monotonicMilliseconds()) -> Answer {
        guard let entry = entries.value(for: key) else { return .notOpen }
        guard let current = try? entry.descriptor.info(), entry.info.stillDescribes(current),
            entry.folder.isCurrent(now: now, interval: revalidateAfter)
        else {
            drop(entry, for: key)
            return .notOpen
        }
        return entry.isResident ? .ready(entry.response) : .notResident
    }

    /// Folders shared, by path, with tiles opened before, or a new one.
    private func folder(root: String, _ components: ArraySlice<String>, identity: FileInfo, now: Int64) -> Folder {
        let path = ([root] + components).joined(separator: "/")  // plain names: no "/" in any
        return folders.withLock { folders in
            if let known = folders[path], known.identity == identity, !known.isReplaced.load(ordering: .relaxed) {
                return known
            }
            if folders.count >= folderLimit {
                for known in Array(folders.keys) where isKnownUniquelyReferenced(&folders[known]!) {
                    folders[known] = nil
                }
            }
            let made = Folder(root: root, components: components, identity: identity, checked: now)
            folders[path] = made
            return made
        }
    }

    /// Keeps `fd` (which the cache now owns), a file whose bytes were just read whole and
    /// checked, opened at `path` below `root` in a folder that was then `folder`, as the
    /// tile `key`, sent with these headers.
    func keep(
        _ fd: FileDescriptor, _ info: FileInfo, in folder: FileInfo, root: String, path: [String], contentType: String,
        validators: Validators, cacheControl: String?, vary: String?, for key: CachedItem,
        now: Int64 = SystemClock.monotonicMilliseconds()
    ) {
        let file = OpenFile(taking: fd)
        // The bytes were just read, so every page is resident: a count short of that means
        // cachestat cannot see this file system's pages.
        let residency = PageCache.Residency(of: fd, count: info.size)
        let sent = PreparedResponse(
            file: FileRange(file: file, count: info.size), contentType: contentType,
            etag: validators.etag, lastModified: validators.lastModified, cacheControl: cacheControl, vary: vary)
        let shared = self.folder(root: root, path.dropLast(), identity: folder, now: now)
        let entry = Entry(response: sent, file: file, info: info, folder: shared, residency: residency)
        entries.insert(entry, cost: 1, for: key)
    }

    private func drop(_ entry: Entry, for key: CachedItem) {
        entries.remove(key) { $0 === entry }
    }
}
