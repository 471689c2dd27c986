import Dispatch
import Foundation
import Logging
import ObjectStorage
import Synchronization
import TilerCore
import TilerImaging
import TilerSettings
import TilerStorage

/// The pyramids under ROOT, kept in memory: found by a scan of ROOT when the server
/// starts, then re-scanned every `rescanInterval` seconds by a background thread, so that
/// pyramids cut, re-cut, replaced or deleted while the server runs are noticed without
/// any request waiting for the disk or the network. Requests read a snapshot (one
/// dictionary lookup under a lock); the listing is a sorted array made by the scan.
///
/// The catalog coordinates; what is under each kind of root is its scanner's to find
/// (`CatalogScanner`): a folder of pyramids and archives (`FolderScanner`; a name the
/// snapshot does not know, a pyramid cut since the last scan, is looked up by `load`,
/// which the router runs on the blocking pool), or `s3://BUCKET/PREFIX`
/// (`BucketScanner`; names are found only by the listing), then the `--sources` folder
/// (`SourcesScanner`). One writer at a time: a scan, a load or a reopen.
///
/// `tiler serve` listens before the first scan ends (`startRefreshing(scanningFirst:)`):
/// until it does, `isLoaded` is false and requests that need the whole catalog wait for
/// it (`waitUntilLoaded`). A changed pyramid is loaded as a new `Pyramid` with a new
/// generation and swapped in whole, so no answer mixes two versions. Faults an operator
/// must hear about are logged once per pyramid and change (`CatalogWriter`).
final class PyramidCatalog: Sendable {
    struct Snapshot: Sendable {
        var entries: [String: CatalogEntry] = [:]
        /// The servable pyramids in listing order (`Pyramid.inListingOrder`): `/images`.
        var sorted: [Pyramid] = []
        /// The other orders and the albums of `sorted`, made when first asked for
        /// (`Listings`); replaced whenever the snapshot changes.
        var listings = Listings(byName: [])
    }

    /// `ROOT` without trailing slashes, or `s3://BUCKET/PREFIX`.
    let root: String
    /// ROOT's scanner: a folder's, a bucket's, or none for an `s3://` root that could
    /// not be set up (nothing is served; the error was logged).
    private let folder: FolderScanner?
    let bucket: BucketScanner?
    private let sources: SourcesScanner?
    private let writer: CatalogWriter
    private let storageTimeout: Double
    /// Held only to read or swap the snapshot.
    private let current = Mutex(Snapshot())
    /// How many times the snapshot has changed (`RecentPyramid` checks it).
    private let changes = Atomic<UInt64>(0)
    /// One writer at a time (the scan, loads on demand). A semaphore rather than a lock
    /// because `reopen` waits for it with a deadline.
    private let turn = WriterTurn()

    /// Whether a scan of ROOT has ended since the catalog was made (a request for a name
    /// not known yet cannot be answered 404 before).
    private let loaded = Atomic<Bool>(false)
    /// Signalled when `loaded` turns true; each waiter signals it again for the next.
    private let loadedGate = DispatchSemaphore(value: 0)
    var isLoaded: Bool { loaded.load(ordering: .acquiring) }

    /// The background thread: started once, stopped once; `stop` wakes it from its wait.
    private let refreshing = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)
    private let stop = DispatchSemaphore(value: 0)
    private let metrics: ServerMetrics?

    init(
        configuration: ServerConfiguration, health: StorageHealth, renderBudget: RenderBudget, log: Logger,
        metrics: ServerMetrics? = nil
    ) {
        self.metrics = metrics
        storageTimeout = configuration.storageTimeout
        let writer = CatalogWriter(log: log)
        self.writer = writer
        let directories = DirectoryCache(capacity: configuration.directoryCacheEntries)
        sources = configuration.sources.map { settings in
            SourcesScanner(
                settings: settings, writer: writer, pixelCache: PixelCache(capacity: settings.pixelCacheBytes),
                spillBudget: SpillBudget(capacity: settings.spillBytes, wait: configuration.renderWait),
                renderBudget: renderBudget,
                keeper: settings.keep && !S3Location.isS3(configuration.root)
                    ? KeptTiles(root: configuration.root, faults: OnceLog(log: log)) : nil)
        }
        if S3Location.isS3(configuration.root) {
            var bucket: BucketScanner?
            let location = Result { () throws(S3Error) in try S3Location(parsing: configuration.root) }
            let s3 =
                configuration.s3.map { Result<S3Configuration, SettingError>.success($0) }
                ?? Result { () throws(SettingError) in try S3Settings.configuration(environment: ProcessInfo.processInfo.environment) }
            switch (location, s3) {
            case let (.success(location), .success(s3)):
                bucket = BucketScanner(
                    location: location, client: S3Client(configuration: s3), health: health,
                    storageTimeout: configuration.storageTimeout, writer: writer, directories: directories)
            case let (.failure(error), _):
                log.error("cannot serve \(configuration.root): \(error.message); no image is served")
            case let (_, .failure(error)):
                log.error("cannot serve \(configuration.root): \(error.description); no image is served")
            }
            self.bucket = bucket
            folder = nil
            root = bucket?.location.description ?? configuration.root
        } else {
            var root = configuration.root
            while root.count > 1 && root.hasSuffix("/") { root.removeLast() }
            self.root = root
            bucket = nil
            folder = FolderScanner(root: root, servesSources: sources != nil, writer: writer, directories: directories)
        }
    }

    /// Whether a name the snapshot does not know is looked up in ROOT (folders), rather
    /// than left to the next listing (buckets).
    var looksUpUnknownNames: Bool { folder != nil }

    /// The current snapshot (no I/O).
    var snapshot: Snapshot { current.withLock { $0 } }

    /// What the snapshot says about `name` (no I/O): nil when it is not known.
    func entry(_ name: String) -> CatalogEntry? {
        current.withLock { $0.entries[name] }
    }

    /// A number that changes whenever the snapshot does: read it before a lookup, and an
    /// answer kept from that lookup holds while the number is the same.
    var version: UInt64 { changes.load(ordering: .acquiring) }

    /// Waits at most `seconds` for the first scan to end; whether it has.
    func waitUntilLoaded(seconds: Double) -> Bool {
        if isLoaded { return true }
        if loadedGate.wait(timeout: .now() + .milliseconds(Int(max(0, min(seconds, 86_400)) * 1000))) == .success {
            loadedGate.signal()
        }
        return isLoaded
    }

    /// Looks `id` up in a ROOT folder (may block) and records what it finds, so the next
    /// request is answered from memory: nil when it is not a pyramid.
    func load(_ id: PyramidID) -> CatalogEntry? {
        guard let folder else { return nil }
        return turn.withLock {
            if let known = entry(id.rawValue) { return known }
            guard let found = folder.load(id) else { return nil }
            publish { snapshot in
                snapshot.entries[id.rawValue] = found
                if let p = found.pyramid {
                    let at = snapshot.sorted.firstIndex { Pyramid.inListingOrder(p, $0) } ?? snapshot.sorted.endIndex
                    snapshot.sorted.insert(p, at: at)
                }
            }
            return found
        }
    }

    /// Opens the stored version of `stale` again after a read found its object replaced
    /// (bucket roots; may block, within the `StorageDeadline` in force): the new version
    /// becomes the current entry, and is returned. nil when the object is gone or cannot
    /// be opened now.
    func reopen(_ stale: Pyramid) -> Pyramid? {
        guard let bucket else { return nil }
        // A scan may hold the catalog for a while (opening many new archives): wait for it
        // no longer than the request may wait for storage.
        let seconds = StorageDeadline.current?.secondsLeft ?? storageTimeout
        guard turn.begin(waitingAtMost: seconds) else { return nil }
        defer { turn.end() }
        if let now = entry(stale.id.rawValue)?.pyramid, now.generation != stale.generation { return now }
        guard case .some(let found) = bucket.reopen(stale, previous: entry(stale.id.rawValue)) else { return nil }
        publish { snapshot in
            snapshot.entries[stale.id.rawValue] = found
            snapshot.sorted = snapshot.entries.values.compactMap(\.pyramid).sorted(by: Pyramid.inListingOrder)
        }
        return found?.pyramid
    }

    /// Scans ROOT, then the `--sources` folder (may block): every pyramid is loaded again
    /// if it changed, kept if not, and dropped if it is gone. A ROOT that could not be
    /// listed keeps every pyramid known.
    func rescan() {
        turn.withLock {
            defer {
                if !loaded.exchange(true, ordering: .acquiringAndReleasing) { loadedGate.signal() }
            }
            let old = snapshot
            let pass = CatalogPass(
                old: old.entries, isFirst: !isLoaded,
                publish: { partial in
                    self.publish { snapshot in
                        snapshot.entries = partial
                        snapshot.sorted = partial.values.compactMap(\.pyramid).sorted(by: Pyramid.inListingOrder)
                    }
                }, isStopped: { self.stopped.load(ordering: .acquiring) })
            var next: [String: CatalogEntry] = [:]
            let primary: (any CatalogScanner)? = folder ?? bucket
            guard let primary, primary.scan(pass, into: &next) else {
                metrics?.catalogScanned(failed: true)
                return
            }
            metrics?.catalogScanned(failed: writer.hasReport(""))
            _ = sources?.scan(pass, into: &next)
            if next.count == old.entries.count, next.allSatisfy({ $0.value.isSame(as: old.entries[$0.key]) }) { return }
            publish { snapshot in
                snapshot.entries = next
                snapshot.sorted = next.values.compactMap(\.pyramid).sorted(by: Pyramid.inListingOrder)
            }
            // Sources no longer served (deleted, replaced, shadowed) close their decoded
            // levels now, not when the last request or loop's memo lets go of them.
            for (name, entry) in old.entries where !entry.isSame(as: next[name]) {
                (entry.pyramid?.source as? SourceFileSource)?.pyramid.closeLevels()
            }
        }
    }

    /// Starts the background thread that calls `rescan` every `interval` seconds (or four
    /// times as long as the last scan took, if longer, so that scanning a huge ROOT never
    /// takes more than a fifth of a core), until `stopRefreshing` (or until the catalog
    /// goes away).
    func startRefreshing(every interval: Double, scanningFirst: Bool = false) {
        guard !stopped.load(ordering: .acquiring),
            refreshing.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        let thread = Thread { [weak self] in
            var wait = scanningFirst ? 0 : interval
            while let catalog = self, catalog.waitForNextRescan(wait) {
                let started = Date()
                catalog.rescan()
                wait = max(interval, 4 * Date().timeIntervalSince(started))
            }
        }
        thread.name = "tiler-rescan"
        thread.start()
    }

    /// Stops the background thread (it exits at its next wake-up, at once if waiting).
    func stopRefreshing() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        stop.signal()
    }

    /// Waits `interval` seconds; false once stopped.
    private func waitForNextRescan(_ interval: Double) -> Bool {
        if stopped.load(ordering: .acquiring) { return false }
        let woken = stop.wait(timeout: .now() + .milliseconds(Int(min(interval, 86_400) * 1000))) == .success
        if woken { stop.signal() }  // leave the stop for any later wait
        return !stopped.load(ordering: .acquiring)
    }

    private func publish(_ change: (inout Snapshot) -> Void) {
        current.withLock {
            change(&$0)
            $0.listings = Listings(byName: $0.sorted)
            changes.add(1, ordering: .releasing)
        }
    }
}

/// One writer at a time, with a deadline for those that may not wait long: a binary
/// semaphore (`Mutex` has no timed acquire).
private struct WriterTurn: Sendable {
    private let turn = DispatchSemaphore(value: 1)

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        turn.wait()
        defer { turn.signal() }
        return try body()
    }

    /// Takes the turn within `seconds`; false if the writer holding it did not finish by then.
    func begin(waitingAtMost seconds: Double) -> Bool {
        turn.wait(timeout: .now() + .milliseconds(Int(max(0, min(seconds, 86_400)) * 1000))) == .success
    }

    func end() { turn.signal() }
}
