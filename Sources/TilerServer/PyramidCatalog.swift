import Foundation
import Logging
import TilerCore
import TilerHTTP

/// What the catalog knows about a name under ROOT.
enum CatalogEntry: Sendable {
    /// A pyramid that can be served.
    case pyramid(Pyramid)
    /// A pyramid whose manifest exists but cannot be used: requests for it get a 500 with
    /// `message` (short, no paths); the details went to the log. `manifest` is the stat of
    /// the manifest that failed, so an unchanged one is not read again.
    case broken(message: String, manifest: FileInfo?)

    var pyramid: Pyramid? {
        if case let .pyramid(p) = self { return p }
        return nil
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
/// starts, then re-scanned every `rescanInterval` seconds by a background thread (a scan
/// opens each pyramid folder and stats its manifest: about 6 µs a pyramid, 0.12 s for
/// 20,000; never more than a fifth of a core, see `startRefreshing`), so that
/// pyramids cut, re-cut or deleted while the server runs are noticed without any request
/// waiting for the disk. Requests read a snapshot (one dictionary lookup under a lock);
/// the listing is a sorted array made by the scan.
///
/// A name the snapshot does not know (a pyramid cut since the last scan, or no pyramid at
/// all) is looked up on the disk by `load`, which the router runs on the blocking pool.
///
/// **Loading a pyramid happens in one place**, `entry(for:in:previous:)`: the folder is
/// opened beneath ROOT without following links, its `pyramid.json` read with the same
/// rules (regular file, at most 16 MiB), decoded and validated. Another kind of pyramid
/// (an archive) is loaded there too.
///
/// Faults an operator must hear about (a folder or manifest the server may not read, a
/// manifest it cannot use) are logged once per pyramid and change of its manifest, not
/// once per request or scan.
final class PyramidCatalog: @unchecked Sendable {
    struct Snapshot: Sendable {
        var entries: [String: CatalogEntry] = [:]
        /// The servable pyramids, sorted by id: the `/images` listing.
        var sorted: [Pyramid] = []
    }

    /// The largest `pyramid.json` read.
    static let maximumManifestBytes = 16 << 20

    private let root: String
    private let log: Logger
    /// Guards `current`: held only to read or swap it.
    private let snapshotLock = NSLock()
    private var current = Snapshot()
    /// One writer at a time (the scan, loads on demand); guards everything below.
    private let writer = NSLock()
    private var nextGeneration: UInt64 = 1
    /// Per name, the fault last logged for it, so that it is logged once.
    private var reported: [String: String] = [:]

    /// The background thread's state.
    private let refresher = NSCondition()
    private var refreshing = false
    private var stopped = false

    init(root: String, log: Logger) {
        self.root = root
        self.log = log
    }

    /// The current snapshot (no I/O).
    var snapshot: Snapshot { snapshotLock.withLock { current } }

    /// What the snapshot says about `name` (no I/O): nil when it is not known.
    func entry(_ name: String) -> CatalogEntry? {
        snapshotLock.withLock { current.entries[name] }
    }

    /// Looks `id` up on the disk (may block) and records what it finds, so the next
    /// request is answered from memory: nil when it is not a pyramid.
    func load(_ id: PyramidID) -> CatalogEntry? {
        writer.withLock {
            if let known = entry(id.rawValue) { return known }
            let folder: RootedFolder
            do throws(RootedFileError) {
                folder = try RootedFolder(root: root)
            } catch {
                report("", "root-\(error.kind)", "cannot open ROOT '\(root)': \(error)")
                return nil
            }
            guard let found = entry(for: id, in: folder, previous: nil) else { return nil }
            publish { snapshot in
                snapshot.entries[id.rawValue] = found
                if let p = found.pyramid {
                    let at = snapshot.sorted.firstIndex { $0.id > p.id } ?? snapshot.sorted.endIndex
                    snapshot.sorted.insert(p, at: at)
                }
            }
            return found
        }
    }

    /// Scans ROOT (may block): every folder with a valid id is loaded again if its
    /// manifest changed, kept if not, and dropped if it is gone.
    func rescan() {
        writer.withLock {
            let old = snapshot
            var next = Snapshot()
            var names: [String] = []
            // Most scans find nothing new: then the snapshot (and its sorted listing) stays.
            var unchanged = true
            do throws(RootedFileError) {
                let folder = try RootedFolder(root: root)
                names = try folder.names()
                clearReport("")
                next.entries.reserveCapacity(old.entries.count)
                for name in names {
                    guard let id = PyramidID(name) else { continue }
                    let previous = old.entries[name]
                    guard let found = entry(for: id, in: folder, previous: previous) else { continue }
                    next.entries[name] = found
                    if unchanged, !found.isSame(as: previous) { unchanged = false }
                }
            } catch {
                report("", "root-\(error.kind)", "cannot read ROOT '\(root)': \(error); no image is served until it can")
            }
            if reported.count > 1 || !reported.isEmpty && reported[""] == nil {
                let present = Set(names)
                reported = reported.filter { $0.key.isEmpty || present.contains($0.key) }
            }
            if unchanged && next.entries.count == old.entries.count { return }
            next.sorted = next.entries.values.compactMap(\.pyramid).sorted { $0.id < $1.id }
            publish { $0 = next }
        }
    }

    /// Starts the background thread that calls `rescan` every `interval` seconds (or four
    /// times as long as the last scan took, if longer), until `stopRefreshing` (or until
    /// the catalog goes away).
    func startRefreshing(every interval: Double) {
        refresher.withLock {
            guard !refreshing, !stopped else { return }
            refreshing = true
        }
        let thread = Thread { [weak self] in
            var wait = interval
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
        refresher.withLock {
            stopped = true
            refresher.broadcast()
        }
    }

    /// Waits `interval` seconds; false once stopped.
    private func waitForNextRescan(_ interval: Double) -> Bool {
        refresher.withLock {
            let deadline = Date().addingTimeInterval(interval)
            while !stopped, refresher.wait(until: deadline) {}
            return !stopped
        }
    }

    // MARK: Loading (the one place)

    /// What `ROOT/id` is: a pyramid, a broken one (500), or nil for none (not a folder,
    /// no manifest, a link, or a folder the server may not open, which is logged).
    /// `previous` is kept when its manifest has not changed. Holds `writer`.
    private func entry(for id: PyramidID, in root: RootedFolder, previous: CatalogEntry?) -> CatalogEntry? {
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
        switch previous {
        case let .pyramid(p)? where p.manifestInfo == info:
            return previous
        case let .broken(_, manifest)? where manifest == info:
            return previous
        default:
            break
        }
        let bytes: [UInt8], readInfo: FileInfo
        do {
            (bytes, readInfo) = try root.folder(name).read(PyramidManifest.fileName, maximumBytes: Self.maximumManifestBytes)
        } catch {
            switch error.kind {
            case .missing, .link, .notRegularFile, .changed:
                // Replaced between the look and the read: the next scan sees the new one.
                return nil
            case .denied, .other, .tooLarge:
                report(name, "read-\(error.kind)-\(info.entityTag)",
                       "cannot read \(manifestPath()): \(error); image '\(name)' answers 500")
                return .broken(message: "image '\(name)' cannot be read by the server", manifest: info)
            }
        }
        let manifest: PyramidManifest
        let geometry: PyramidGeometry
        do {
            manifest = try JSONDecoder().decode(PyramidManifest.self, from: Data(bytes))
            geometry = try manifest.geometry()
        } catch {
            report(name, "decode-\(readInfo.entityTag)",
                   "\(manifestPath()) cannot be used: \(error); image '\(name)' answers 500")
            return .broken(message: "image '\(name)' has an unreadable pyramid.json", manifest: readInfo)
        }
        guard manifest.id == id else {
            report(name, "id-\(readInfo.entityTag)",
                   "\(manifestPath()) is the manifest of '\(manifest.id)', not of '\(name)'; image '\(name)' answers 500")
            return .broken(message: "image '\(name)' has a pyramid.json for another image", manifest: readInfo)
        }
        clearReport(name)
        let p = Pyramid(id: id, manifest: manifest, geometry: geometry, manifestInfo: readInfo, generation: nextGeneration)
        nextGeneration += 1
        return .pyramid(p)
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
        guard reported[name] != signature else { return }
        reported[name] = signature
        log.warning("\(message())")
    }

    private func clearReport(_ name: String) {
        reported[name] = nil
    }

    private func publish(_ change: (inout Snapshot) -> Void) {
        snapshotLock.withLock { change(&current) }
    }
}
