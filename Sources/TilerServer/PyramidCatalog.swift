import Foundation
import Logging
import ObjectStorage
import Synchronization
import TilerCore
import TilerHTTP
import TilerImaging
import TilerStorage
import TilerSystem

/// What the catalog compares to tell whether a stored pyramid changed since it was
/// loaded: the manifest's `stat` for a folder, the archive's `lstat` for a local archive,
/// the listing's key, size and ETag for an object.
enum SourceSignature: Sendable, Hashable {
    case folder(manifest: FileInfo)
    case archive(FileInfo)
    case object(key: String, size: UInt64, etag: String)
    /// An image file in the `--sources` folder, as `lstat` saw it.
    case sourceFile(name: String, FileInfo)

    init(_ object: S3Object) {
        self = .object(key: object.key, size: object.size, etag: object.etag)
    }
}

/// What the catalog knows about a name under ROOT.
enum CatalogEntry: Sendable {
    /// A pyramid that can be served.
    case pyramid(Pyramid)
    /// A pyramid whose manifest or archive exists but cannot be used: requests for it get
    /// a 500 with `message` (short, no paths); the details went to the log. `signature` is
    /// what failed, so an unchanged one is not read again.
    case broken(message: String, signature: SourceSignature?)

    var pyramid: Pyramid? {
        if case let .pyramid(p) = self { return p }
        return nil
    }

    var signature: SourceSignature? {
        switch self {
        case let .pyramid(p): p.signature
        case let .broken(_, signature): signature
        }
    }

    /// Whether `other` is this very entry (the same loaded pyramid, or the same failure).
    func isSame(as other: CatalogEntry?) -> Bool {
        switch (self, other) {
        case let (.pyramid(a), .pyramid(b)?): a === b
        case let (.broken(m, f), .broken(n, g)?): m == n && f == g
        default: false
        }
    }
}

/// The pyramids under ROOT, kept in memory: found by a scan of ROOT when the server
/// starts, then re-scanned every `rescanInterval` seconds by a background thread, so that
/// pyramids cut, re-cut, replaced or deleted while the server runs are noticed without
/// any request waiting for the disk or the network. Requests read a snapshot (one
/// dictionary lookup under a lock); the listing is a sorted array made by the scan.
///
/// ROOT is a folder or `s3://BUCKET/PREFIX`:
/// - **A folder.** A scan opens ROOT once and stats each pyramid folder's manifest (about
///   6 µs a pyramid, 0.12 s for 20,000; never more than a fifth of a core, see
///   `startRefreshing`) and each `ID.pmtiles` archive. A folder `ROOT/ID/` with a
///   manifest wins over an archive `ROOT/ID.pmtiles`. A name the snapshot does not know
///   (a pyramid cut since the last scan, or no pyramid at all) is looked up by `load`,
///   which the router runs on the blocking pool.
/// - **A bucket.** A scan lists `PREFIX/` (one ListObjectsV2 per 1,000 keys) and opens
///   each new or changed `PREFIX/ID.pmtiles` (two range reads), `openConcurrency` at a
///   time, and no more once one finds storage unavailable; names are found only by the
///   listing. A failed listing keeps every pyramid known (storage may be down: cached
///   tiles still serve) and marks storage down in `StorageHealth`.
///
/// `tiler serve` listens before the first scan ends (`startRefreshing(scanningFirst:)`):
/// until it does, `isLoaded` is false and requests that need the whole catalog wait for
/// it (`waitUntilLoaded`).
///
/// A changed archive (another inode, size or modification time; another ETag) is opened
/// as a new `Pyramid` with a new generation and swapped in whole: requests that hold the
/// old one finish reading the old file (its descriptor keeps the old inode) or the old
/// object (reads pinned to its ETag), so no answer mixes two versions.
///
/// **Loading a pyramid happens in one place**, `entry(for:in:previous:)`: a folder's
/// `pyramid.json` read beneath ROOT without following links (regular file, at most
/// 16 MiB), decoded and validated; an archive opened and checked (`ArchivedPyramid`).
///
/// Faults an operator must hear about (a folder, manifest or archive the server may not
/// read or cannot use) are logged once per pyramid and change, not once per request or
/// scan.
final class PyramidCatalog: Sendable {
    struct Snapshot: Sendable {
        var entries: [String: CatalogEntry] = [:]
        /// The servable pyramids in listing order (`Pyramid.inListingOrder`): `/images`.
        var sorted: [Pyramid] = []
        /// The other orders and the albums of `sorted`, made when first asked for
        /// (`Listings`); replaced whenever the snapshot changes.
        var listings = Listings(byName: [])
    }

    /// Where a bucket root's archives are, and how to reach them.
    struct Bucket {
        let location: S3Location
        let client: S3Client
    }

    /// What a scan found under one id.
    enum Candidate {
        /// `ROOT/ID/` (its manifest is stat'ed when loading).
        case folder
        /// `ROOT/ID.pmtiles`, as `lstat` saw it.
        case archive(FileInfo)
        /// `PREFIX/ID.pmtiles` in the bucket, as listed.
        case object(S3Object)
    }

    /// The largest `pyramid.json` read.
    static let maximumManifestBytes = StoredPyramid.maximumManifestBytes

    /// `ROOT` without trailing slashes, or `s3://BUCKET/PREFIX`.
    let root: String
    let bucket: Bucket?
    private let storageTimeout: Double
    private let health: StorageHealth
    private let log: Logger
    /// Leaf directories of every archive, shared.
    let directories: DirectoryCache
    /// `--sources`: image files served on the fly, and what they share.
    private let sources: ServerConfiguration.SourceSettings?
    private let pixelCache: PixelCache
    /// The temporary disk sources' decoding may take.
    private let spillBudget: SpillBudget
    private let renderBudget: RenderBudget
    private let keeper: KeptTiles?
    /// Held only to read or swap the snapshot.
    private let current = Mutex(Snapshot())
    /// How many times the snapshot has changed (`RecentPyramid` checks it).
    private let changes = Atomic<UInt64>(0)
    /// One writer at a time (the scan, loads on demand). A semaphore rather than a lock
    /// because `reopen` waits for it with a deadline.
    private let writer = WriterTurn()

    /// What the writer keeps. Only the thread holding `writer` touches it, so its Mutex
    /// is never contended; it is there to make the sharing checked.
    private struct WriterState {
        var nextGeneration: UInt64 = 1
        /// Per name, the fault last logged for it, so that it is logged once.
        var reported: [String: String] = [:]
    }

    private let writerState = Mutex(WriterState())

    /// Whether a scan of ROOT has ended since the catalog was made (a request for a name
    /// not known yet cannot be answered 404 before).
    private let loaded = Atomic<Bool>(false)
    /// Signalled when `loaded` turns true; each waiter signals it again for the next.
    private let loadedGate = DispatchSemaphore(value: 0)
    var isLoaded: Bool { loaded.load(ordering: .acquiring) }

    /// Waits at most `seconds` for the first scan to end; whether it has.
    func waitUntilLoaded(seconds: Double) -> Bool {
        if isLoaded { return true }
        if loadedGate.wait(timeout: .now() + .milliseconds(Int(max(0, min(seconds, 86_400)) * 1000))) == .success {
            loadedGate.signal()
        }
        return isLoaded
    }

    /// The most archives of a bucket opened at once by a scan (two range reads each).
    static let openConcurrency = 8

    /// The background thread: started once, stopped once; `stop` wakes it from its wait.
    private let refreshing = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)
    private let stop = DispatchSemaphore(value: 0)
    private let metrics: ServerMetrics?

    init(
        configuration: ServerConfiguration, health: StorageHealth, renderBudget: RenderBudget, log: Logger,
        metrics: ServerMetrics? = nil
    ) {
        self.log = log
        self.metrics = metrics
        self.health = health
        self.renderBudget = renderBudget
        sources = configuration.sources
        pixelCache = PixelCache(capacity: configuration.sources?.pixelCacheBytes ?? 0)
        spillBudget = SpillBudget(capacity: configuration.sources?.spillBytes ?? 0, wait: configuration.renderWait)
        keeper =
            configuration.sources?.keep == true && !S3Location.isS3(configuration.root)
            ? KeptTiles(root: configuration.root, faults: OnceLog(log: log)) : nil
        storageTimeout = configuration.storageTimeout
        directories = DirectoryCache(capacity: configuration.directoryCacheEntries)
        if S3Location.isS3(configuration.root) {
            var bucket: Bucket?
            do throws(S3Error) {
                let location = try S3Location(parsing: configuration.root)
                var s3: S3Configuration
                if let given = configuration.s3 {
                    s3 = given
                } else {
                    s3 = try S3Configuration(environment: ProcessInfo.processInfo.environment)
                }
                bucket = Bucket(location: location, client: S3Client(configuration: s3))
            } catch {
                log.error("cannot serve \(configuration.root): \(error.message); no image is served")
            }
            self.bucket = bucket
            root = bucket?.location.description ?? configuration.root
        } else {
            var root = configuration.root
            while root.count > 1 && root.hasSuffix("/") { root.removeLast() }
            self.root = root
            bucket = nil
        }
    }

    /// Whether a name the snapshot does not know is looked up in ROOT (folders), rather
    /// than left to the next listing (buckets).
    var looksUpUnknownNames: Bool { bucket == nil && !S3Location.isS3(root) }

    /// The current snapshot (no I/O).
    var snapshot: Snapshot { current.withLock { $0 } }

    /// What the snapshot says about `name` (no I/O): nil when it is not known.
    func entry(_ name: String) -> CatalogEntry? {
        current.withLock { $0.entries[name] }
    }

    /// A number that changes whenever the snapshot does: read it before a lookup, and an
    /// answer kept from that lookup holds while the number is the same.
    var version: UInt64 { changes.load(ordering: .acquiring) }

    /// Looks `id` up in a ROOT folder (may block) and records what it finds, so the next
    /// request is answered from memory: nil when it is not a pyramid.
    func load(_ id: PyramidID) -> CatalogEntry? {
        guard looksUpUnknownNames else { return nil }
        return writer.withLock {
            if let known = entry(id.rawValue) { return known }
            let folder: RootedFolder
            do throws(RootedFileError) {
                folder = try RootedFolder(root: root)
            } catch {
                if !isAbsentRootOfSources(error) { report("", "root-\(error.kind)", "cannot open ROOT '\(root)': \(error)") }
                return nil
            }
            var found = entry(for: id, candidate: .folder, in: folder, previous: nil)
            if found == nil {
                let name = id.rawValue + "." + PyramidLayout.archiveExtension
                if let info = try? folder.info(name) {
                    found = entry(for: id, candidate: .archive(info), in: folder, previous: nil)
                }
            }
            guard let found else { return nil }
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
        guard let bucket, case let .object(key, _, _) = stale.signature else { return nil }
        // A scan may hold the catalog for a while (opening many new archives): wait for it
        // no longer than the request may wait for storage.
        let seconds = StorageDeadline.current?.secondsLeft ?? storageTimeout
        guard writer.begin(waitingAtMost: seconds) else { return nil }
        defer { writer.end() }
        if let now = entry(stale.id.rawValue)?.pyramid, now.generation != stale.generation { return now }
        let listed: S3Object?
        do throws(S3Error) {
            listed = try bucket.client.list(bucket: bucket.location.bucket, prefix: key, maxKeys: 1).objects.first { $0.key == key }
        } catch {
            if error.isUnavailable || error.isAccessRefused { health.failed(StorageHealth.reason(error)) }
            return nil
        }
        let found = listed.flatMap { entry(for: stale.id, candidate: .object($0), in: nil, previous: entry(stale.id.rawValue)) }
        publish { snapshot in
            snapshot.entries[stale.id.rawValue] = found
            snapshot.sorted = snapshot.entries.values.compactMap(\.pyramid).sorted(by: Pyramid.inListingOrder)
        }
        return found?.pyramid
    }

    /// Scans ROOT (may block): every pyramid is loaded again if it changed, kept if not,
    /// and dropped if it is gone.
    func rescan() {
        writer.withLock {
            defer {
                if !loaded.exchange(true, ordering: .acquiringAndReleasing) { loadedGate.signal() }
            }
            let old = snapshot
            guard var next = bucket == nil ? scanFolder(old) : scanBucket(old) else {
                metrics?.catalogScanned(failed: true)
                return
            }
            metrics?.catalogScanned(failed: writerState.withLock { $0.reported[""] != nil })
            scanSources(&next, old)
            var unchanged = next.entries.count == old.entries.count
            if unchanged {
                for (name, entry) in next.entries where !entry.isSame(as: old.entries[name]) {
                    unchanged = false
                    break
                }
            }
            if unchanged { return }
            var published = next
            published.sorted = next.entries.values.compactMap(\.pyramid).sorted(by: Pyramid.inListingOrder)
            publish { $0 = published }
            // Sources no longer served (deleted, replaced, shadowed) close their decoded
            // levels now, not when the last request or loop's memo lets go of them.
            for (name, entry) in old.entries where !entry.isSame(as: next.entries[name]) {
                (entry.pyramid?.source as? SourceFileSource)?.pyramid.closeLevels()
            }
        }
    }

    /// The pyramids of a ROOT folder: folders with a manifest, then archives whose id no
    /// such folder has. Holds `writer`.
    private func scanFolder(_ old: Snapshot) -> Snapshot? {
        if S3Location.isS3(root) { return nil }  // an s3:// root that could not be set up
        var next = Snapshot()
        var names: [String] = []
        do throws(RootedFileError) {
            let folder = try RootedFolder(root: root)
            names = try folder.names()
            clearReport("")
            next.entries.reserveCapacity(old.entries.count)
            var archives: [(PyramidID, String)] = []
            let suffix = "." + PyramidLayout.archiveExtension
            for name in names {
                if name.hasSuffix(suffix), let id = PyramidID(String(name.dropLast(suffix.count))) {
                    archives.append((id, name))
                }
                guard let id = PyramidID(name) else { continue }
                guard let found = entry(for: id, candidate: .folder, in: folder, previous: old.entries[name]) else { continue }
                next.entries[name] = found
            }
            for (id, name) in archives where next.entries[id.rawValue] == nil {
                let info: FileInfo
                do {
                    info = try folder.info(name)
                } catch {
                    reportIfOperatorsFault(id.rawValue, error, "cannot look at \(root)/\(name): \(error); image '\(id)' is not served")
                    continue
                }
                guard let found = entry(for: id, candidate: .archive(info), in: folder, previous: old.entries[id.rawValue]) else {
                    continue
                }
                next.entries[id.rawValue] = found
            }
        } catch {
            if isAbsentRootOfSources(error) {
                clearReport("")
            } else {
                report("", "root-\(error.kind)", "cannot read ROOT '\(root)': \(error); no image is served until it can")
            }
        }
        writerState.withLock { w in
            if w.reported.count > 1 || !w.reported.isEmpty && w.reported[""] == nil {
                let present = Set(names.map { $0.hasSuffix(".pmtiles") ? String($0.dropLast(8)) : $0 } + names)
                w.reported = w.reported.filter { $0.key.isEmpty || $0.key.hasPrefix("source:") || present.contains($0.key) }
            }
        }
        return next
    }

    /// Whether `error` only says that ROOT does not exist while `--sources` is served:
    /// `tiler serve --sources DIR` needs no folder of pyramids (ROOT's pyramids are
    /// served once it appears), so that is no fault to log.
    private func isAbsentRootOfSources(_ error: RootedFileError) -> Bool {
        sources != nil && error.kind == .missing
    }

    /// The pyramids of a bucket root: every `PREFIX/ID.pmtiles` listed. nil when the
    /// listing failed (every known pyramid is kept). Holds `writer`.
    private func scanBucket(_ old: Snapshot) -> Snapshot? {
        guard let bucket else { return nil }
        let objects: [S3Object]
        do throws(S3Error) {
            objects = try bucket.client.listAll(bucket: bucket.location.bucket, prefix: bucket.location.listPrefix)
            health.succeeded()
            clearReport("")
        } catch {
            if error.isUnavailable || error.isAccessRefused {
                health.failed(StorageHealth.reason(error))
            } else {
                report("", "list-\(error.code ?? "")", "cannot list \(root): \(error); the images already known are still served")
            }
            return nil
        }
        var next = Snapshot()
        var toOpen: [(PyramidID, S3Object, CatalogEntry?)] = []
        let suffix = "." + PyramidLayout.archiveExtension
        for object in objects {
            let name = object.key.dropFirst(bucket.location.listPrefix.count)
            guard name.hasSuffix(suffix), !name.contains("/"), let id = PyramidID(String(name.dropLast(suffix.count))) else {
                continue
            }
            let previous = old.entries[id.rawValue]
            if let previous, previous.signature == SourceSignature(object) {
                next.entries[id.rawValue] = previous
            } else {
                toOpen.append((id, object, previous))
            }
        }
        openArchives(toOpen, into: &next)
        let present = Set(next.entries.keys)
        writerState.withLock { w in
            w.reported = w.reported.filter { $0.key.isEmpty || $0.key.hasPrefix("source:") || present.contains($0.key) }
        }
        return next
    }

    /// Opens new and changed archives of a bucket, `openConcurrency` at a time, into
    /// `next`. Once one finds storage unavailable (a timeout, a refused connection) the
    /// others are not tried this scan: each keeps its previous entry, if any, and the next
    /// scan tries again; so a store whose reads hang costs one `storageTimeout` per scan,
    /// not one per archive. The first scan publishes what it has opened every half second,
    /// so that images are served as they load. Holds `writer`.
    private func openArchives(_ work: [(PyramidID, S3Object, CatalogEntry?)], into next: inout Snapshot) {
        guard !work.isEmpty else { return }
        let shared = OpeningArchives()
        let workers = DispatchGroup()
        for _ in 0..<min(Self.openConcurrency, work.count) {
            workers.enter()
            let thread = Thread { [self] in
                defer { workers.leave() }
                while true {
                    let taken = shared.state.withLock { s -> Int? in
                        guard !s.abandoned, s.nextIndex < work.count, !stopped.load(ordering: .acquiring) else { return nil }
                        defer { s.nextIndex += 1 }
                        return s.nextIndex
                    }
                    guard let i = taken else { return }
                    let (id, object, previous) = work[i]
                    var unavailable = false
                    let found = objectEntry(for: id, object: object, previous: previous) { unavailable = true }
                    shared.state.withLock { s in
                        if unavailable { s.abandoned = true }
                        if let found { s.found[id.rawValue] = found }
                    }
                }
            }
            thread.name = "tiler-open"
            thread.start()
        }
        let first = !isLoaded
        let base = next
        while workers.wait(timeout: .now() + .milliseconds(500)) == .timedOut {
            guard first else { continue }
            // Images are served as they load; the snapshot is whole at the end of the scan.
            let partial = shared.state.withLock { $0.found }
            publish { snapshot in
                snapshot.entries = base.entries.merging(partial) { $1 }
                snapshot.sorted = snapshot.entries.values.compactMap(\.pyramid).sorted(by: Pyramid.inListingOrder)
            }
        }
        let (found, abandoned) = shared.state.withLock { ($0.found, $0.abandoned || $0.nextIndex < work.count) }
        for (name, entry) in found { next.entries[name] = entry }
        if abandoned {
            // Not tried this scan: what was served is kept.
            for (id, _, previous) in work where found[id.rawValue] == nil {
                if let previous { next.entries[id.rawValue] = previous }
            }
        }
    }

    /// The image files of the `--sources` folder: each regular file a libvips loader
    /// recognises, under the id `tiler cut` would give it, unless ROOT has a pyramid of
    /// that id (a cut pyramid wins; a folder kept by `--keep` does not). New and changed
    /// files (another inode, size or modification time) are opened (headers only) as a
    /// new generation; others keep theirs. Holds `writer`.
    private func scanSources(_ next: inout Snapshot, _ old: Snapshot) {
        guard let sources else { return }
        let names: [String]
        let folder: RootedFolder
        do throws(RootedFileError) {
            folder = try RootedFolder(root: sources.directory)
            names = try folder.names().sorted()
            clearReport("source:")
        } catch {
            report(
                "source:", "sources-\(error.kind)",
                "cannot read the --sources folder '\(sources.directory)': \(error); no source is served until it can")
            return
        }
        var claimed: [String: String] = [:]
        for name in names where !name.hasPrefix(".") {
            guard let id = PyramidID(deriving: name) else { continue }
            if let existing = next.entries[id.rawValue], existing.pyramid?.manifest.partial != true { continue }
            if let other = claimed[id.rawValue] {
                report(
                    "source:" + name, "duplicate-\(other)",
                    "\(sources.directory)/\(name) would be image '\(id)', which \(other) already is; it is not served (rename it)")
                continue
            }
            guard let info = try? folder.info(name), info.isRegularFile else { continue }
            let signature = SourceSignature.sourceFile(name: name, info)
            if let previous = old.entries[id.rawValue], previous.signature == signature {
                claimed[id.rawValue] = name
                next.entries[id.rawValue] = previous
                continue
            }
            let path = "\(sources.directory)/\(name)"
            do throws(CutError) {
                let pyramid = try SourcePyramid(path: path, id: id, options: sources.cutOptions, cache: pixelCache, spill: spillBudget)
                claimed[id.rawValue] = name
                clearReport("source:" + name)
                let source = SourceFileSource(pyramid: pyramid, info: info, location: path, budget: renderBudget, keeper: keeper)
                next.entries[id.rawValue] = .pyramid(makePyramid(id, pyramid.manifest, pyramid.geometry, source, signature))
            } catch {
                if case let .notAnImage(why) = error, why == SourcePyramid.unrecognised { continue }
                claimed[id.rawValue] = name
                report("source:" + name, "open-\(info.entityTag)", "\(path): \(error); image '\(id)' answers 500")
                next.entries[id.rawValue] = .broken(message: "image '\(id)' cannot be served from its source file", signature: signature)
            }
        }
        let present = Set(names.map { "source:" + $0 })
        writerState.withLock { w in
            w.reported = w.reported.filter { !$0.key.hasPrefix("source:") || $0.key == "source:" || present.contains($0.key) }
        }
    }

    /// Starts the background thread that calls `rescan` every `interval` seconds (or four
    /// times as long as the last scan took, if longer), until `stopRefreshing` (or until
    /// the catalog goes away).
    func startRefreshing(every interval: Double, scanningFirst: Bool = false) {
        guard !stopped.load(ordering: .acquiring),
            refreshing.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        let thread = Thread { [weak self] in
            var wait = scanningFirst ? 0 : interval
            while let catalog = self, catalog.waitForNextRescan(wait) {
                let started = Date()
                catalog.rescan()
                // A huge ROOT: pause four times as long as the scan took, so that scanning
                // never takes more than a fifth of a core.
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

    // MARK: Loading (the one place)

    /// What `candidate` is for `id`: a pyramid, a broken one (500), or nil for none (not a
    /// pyramid, a link, something the server may not open, which is logged, or an object
    /// storage could not be asked about now). `previous` is kept when what it was loaded
    /// from has not changed (and, for objects, when storage cannot be asked). `root` is
    /// ROOT opened, for folders and local archives. Holds `writer`.
    private func entry(
        for id: PyramidID, candidate: Candidate, in root: RootedFolder?,
        previous: CatalogEntry?
    ) -> CatalogEntry? {
        switch candidate {
        case .folder:
            guard let root else { return nil }
            return folderEntry(for: id, in: root, previous: previous)
        case let .archive(info):
            guard let root else { return nil }
            return archiveEntry(for: id, info: info, in: root, previous: previous)
        case let .object(object):
            return objectEntry(for: id, object: object, previous: previous)
        }
    }

    private func folderEntry(for id: PyramidID, in root: RootedFolder, previous: CatalogEntry?) -> CatalogEntry? {
        let name = id.rawValue
        let manifestPath = { "\(self.root)/\(name)/\(PyramidManifest.fileName)" }
        let info: FileInfo
        do {
            info = try root.info(PyramidManifest.fileName, inFolder: name)
        } catch {
            reportIfOperatorsFault(name, error, "cannot look at \(manifestPath()): \(error); image '\(name)' is not served")
            return nil
        }
        // A link (or anything but a file) named pyramid.json is not a manifest: the folder
        // is not a pyramid.
        guard info.isRegularFile else {
            clearReport(name)
            return nil
        }
        if let previous, previous.signature == .folder(manifest: info) { return previous }
        let bytes: [UInt8], readInfo: FileInfo
        do {
            (bytes, readInfo) = try root.folder(name).read(PyramidManifest.fileName, maximumBytes: Self.maximumManifestBytes)
        } catch {
            switch error.kind {
            case .missing, .link, .notRegularFile, .changed:
                // Replaced between the look and the read: the next scan sees the new one.
                return nil
            case .denied, .other, .tooLarge:
                report(
                    name, "read-\(error.kind)-\(info.entityTag)",
                    "cannot read \(manifestPath()): \(error); image '\(name)' answers 500")
                return .broken(message: "image '\(name)' cannot be read by the server", signature: .folder(manifest: info))
            }
        }
        let signature = SourceSignature.folder(manifest: readInfo)
        let decoded: (manifest: PyramidManifest, geometry: PyramidGeometry)
        do {
            decoded = try PyramidManifest.decodedWithGeometry(bytes)
        } catch {
            report(
                name, "decode-\(readInfo.entityTag)",
                "\(manifestPath()) cannot be used: \(error); image '\(name)' answers 500")
            return .broken(message: "image '\(name)' has an unreadable pyramid.json", signature: signature)
        }
        let (manifest, geometry) = decoded
        guard manifest.id == id else {
            report(
                name, "id-\(readInfo.entityTag)",
                "\(manifestPath()) is the manifest of '\(manifest.id)', not of '\(name)'; image '\(name)' answers 500")
            return .broken(message: "image '\(name)' has a pyramid.json for another image", signature: signature)
        }
        clearReport(name)
        let source = FolderSource(root: self.root, id: id, manifest: manifest, manifestInfo: readInfo)
        return .pyramid(makePyramid(id, manifest, geometry, source, signature))
    }

    private func archiveEntry(
        for id: PyramidID, info: FileInfo, in root: RootedFolder,
        previous: CatalogEntry?
    ) -> CatalogEntry? {
        let name = id.rawValue
        let file = "\(id).\(PyramidLayout.archiveExtension)"
        let path = "\(self.root)/\(file)"
        // A link (or anything but a file) is not an archive, as for manifests.
        guard info.isRegularFile else {
            clearReport(name)
            return nil
        }
        let signature = SourceSignature.archive(info)
        if let previous, previous.signature == signature { return previous }
        let fd: FileDescriptor
        do throws(SystemCallError) {
            fd = try root.descriptor.open(at: file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        } catch {
            let code = error.errno
            if code == EACCES || code == EPERM || code == EIO {
                report(
                    name, "open-\(code)-\(info.entityTag)",
                    "cannot open \(path): \(error.reason); image '\(name)' answers 500")
                return .broken(message: "image '\(name)' cannot be read by the server", signature: signature)
            }
            return nil  // gone or replaced by a link meanwhile
        }
        let archive: ArchivedPyramid, source: FileArchiveSource
        do {
            source = try FileArchiveSource(descriptor: fd, name: path)
            // Replaced between the look and the open: the next scan sees the new one.
            guard source.info.inode == info.inode else { return previous }
            archive = try ArchivedPyramid(reader: ArchiveReader(source: source, cache: directories))
        } catch {
            report(name, "archive-\(info.entityTag)", "\(error); image '\(name)' answers 500")
            return .broken(message: "image '\(name)' has a damaged archive", signature: signature)
        }
        guard archive.manifest.id == id else {
            report(
                name, "id-\(info.entityTag)",
                "\(path) holds the pyramid '\(archive.manifest.id)', not '\(name)'; image '\(name)' answers 500")
            return .broken(message: "image '\(name)' has an archive of another image", signature: signature)
        }
        clearReport(name)
        return .pyramid(makePyramid(id, archive.manifest, archive.geometry, LocalArchiveSource(archive: archive, file: source), signature))
    }

    /// `unavailable` is called when storage could not be asked (the previous entry is then
    /// returned).
    private func objectEntry(
        for id: PyramidID, object: S3Object, previous: CatalogEntry?, unavailable: () -> Void = {}
    ) -> CatalogEntry? {
        guard let bucket else { return nil }
        let name = id.rawValue
        let signature = SourceSignature(object)
        if let previous, previous.signature == signature { return previous }
        let location = bucket.location.url(ofKey: object.key)
        let archive: ArchivedPyramid
        do throws(StorageError) {
            let source = S3ArchiveSource(client: bucket.client, bucket: bucket.location.bucket, object: object)
            archive = try StorageDeadline(seconds: storageTimeout).run { () throws(StorageError) -> ArchivedPyramid in
                try ArchivedPyramid(reader: ArchiveReader(source: source, cache: directories))
            }
            health.succeeded()
        } catch {
            switch LocalArchiveSource.sourceError(error) {
            case let .unavailable(why, _):
                // Storage is down or slow: keep what was served, try again next scan.
                health.failed(why)
                unavailable()
                return previous
            case .replaced:
                return previous  // replaced since the listing: the next listing has it
            default:
                report(name, "archive-\(object.etag)-\(object.size)", "\(error); image '\(name)' answers 500")
                return .broken(message: "image '\(name)' has a damaged archive", signature: signature)
            }
        }
        guard archive.manifest.id == id else {
            report(
                name, "id-\(object.etag)",
                "\(location) holds the pyramid '\(archive.manifest.id)', not '\(name)'; image '\(name)' answers 500")
            return .broken(message: "image '\(name)' has an archive of another image", signature: signature)
        }
        clearReport(name)
        return .pyramid(
            makePyramid(
                id, archive.manifest, archive.geometry,
                BucketArchiveSource(archive: archive, object: object, location: location), signature))
    }

    private func makePyramid(
        _ id: PyramidID, _ manifest: PyramidManifest, _ geometry: PyramidGeometry,
        _ source: any PyramidSource, _ signature: SourceSignature
    ) -> Pyramid {
        let generation = writerState.withLock { w in
            defer { w.nextGeneration += 1 }
            return w.nextGeneration
        }
        return Pyramid(
            id: id, manifest: manifest, geometry: geometry, source: source, signature: signature,
            generation: generation)
    }

    /// Logs a failure to open something that exists but may not be read (permissions,
    /// I/O errors); a name that is simply not a pyramid (missing, a link, a file) is not
    /// worth a line.
    private func reportIfOperatorsFault(_ name: String, _ error: RootedFileError, _ message: @autoclosure () -> String) {
        switch error.kind {
        case .denied, .other: report(name, "open-\(error.kind)-\(error.errno)", message())
        default: clearReport(name)
        }
    }

    /// Logs `message` unless the same fault (`signature`) was the last one logged for
    /// `name`. Holds `writer`.
    private func report(_ name: String, _ signature: String, _ message: @autoclosure () -> String) {
        guard
            writerState.withLock({ w in
                guard w.reported[name] != signature else { return false }
                w.reported[name] = signature
                return true
            })
        else { return }
        log.warning("\(message())")
    }

    private func clearReport(_ name: String) {
        writerState.withLock { _ = $0.reported.removeValue(forKey: name) }
    }

    private func publish(_ change: (inout Snapshot) -> Void) {
        current.withLock {
            change(&$0)
            $0.listings = Listings(byName: $0.sorted)
            changes.add(1, ordering: .releasing)
        }
    }
}

/// What the threads of one scan's `openArchives` share: the next archive to open, whether
/// storage was found unavailable (then no more are tried), and what they opened.
private final class OpeningArchives: Sendable {
    struct State {
        var nextIndex = 0
        var abandoned = false
        var found: [String: CatalogEntry] = [:]
    }

    let state = Mutex(State())
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

/// The pyramid one event loop's plain tile paths named last, kept for the next one: a
/// viewer asks for many tiles of one image in a row, and a hit needs no `String` of the id,
/// no hash and no catalog lock (a third of the lookup's cost in user space). A kept
/// pyramid holds only while the catalog's `version` is the one read before it was looked
/// up, so a rescan's change is seen by the next request. Each loop has its own (one per
/// `Router`), so its lock is never contended.
final class RecentPyramid: Sendable {
    private struct Kept {
        var id: [UInt8] = []
        var version: UInt64 = 0
        var pyramid: Pyramid?
    }

    private let kept = Mutex(Kept())

    /// The pyramid `catalog` holds under the id `id` (UTF-8 bytes), or nil when it holds
    /// none, or something that is not a pyramid (a broken one).
    func pyramid(_ id: UnsafeBufferPointer<UInt8>, in catalog: PyramidCatalog) -> Pyramid? {
        let version = catalog.version
        // Read in place under the lock (binding the kept value would copy it).
        let hit = kept.withLock { k -> Pyramid? in
            guard k.version == version, k.id.count == id.count,
                k.id.withUnsafeBufferPointer({ kept in
                    var i = 0
                    while i < kept.count, kept[i] == id[i] { i += 1 }
                    return i == kept.count
                })
            else { return nil }
            return k.pyramid
        }
        if let hit { return hit }
        guard case .pyramid(let pyramid)? = catalog.entry(String(decoding: id, as: UTF8.self)) else { return nil }
        kept.withLock { $0 = Kept(id: Array(id), version: version, pyramid: pyramid) }
        return pyramid
    }
}
