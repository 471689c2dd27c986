import Logging
import Synchronization
import TilerCore
import TilerStorage
import TilerSystem

/// One kind of root the catalog scans: a folder of pyramids and archives
/// (`FolderScanner`), a bucket of archives (`BucketScanner`), or the `--sources` folder of
/// images served on the fly (`SourcesScanner`). `PyramidCatalog` runs them in that order,
/// one writer at a time, and publishes what they found together.
protocol CatalogScanner: Sendable {
    /// Adds to `next` the entries under this scanner's root. False when the root could not
    /// be listed and every entry known must be kept as it is (a bucket whose listing
    /// failed); a root that can be listed but holds nothing is an empty scan, not a
    /// failure.
    func scan(_ pass: CatalogPass, into next: inout [String: CatalogEntry]) -> Bool
}

/// What a scanner is told about the scan it is part of.
struct CatalogPass {
    /// What the last scan published: an entry whose file or object has not changed since
    /// is kept as it is (same pyramid, same generation).
    let old: [String: CatalogEntry]
    /// Whether no scan has ended yet: a slow first scan publishes what it has as it goes
    /// (`publish`), so that images are served as they load.
    let isFirst: Bool
    /// Publishes `entries` over the last snapshot, before the scan ends.
    let publish: ([String: CatalogEntry]) -> Void
    /// Whether the catalog is stopping (a long scan gives up).
    let isStopped: @Sendable () -> Bool
}

/// What the catalog's one writer keeps across scans and loads, shared by its scanners:
/// the next generation, and the faults logged, so that each is logged once per name and
/// change, not once per request or scan. Only the thread holding the catalog's writer
/// turn touches it (the threads of a bucket scan take turns under the lock), so its
/// `Mutex` is never contended; it is there to make the sharing checked.
final class CatalogWriter: Sendable {
    private struct State {
        var nextGeneration: UInt64 = 1
        /// Per name, the fault last logged for it. "" is ROOT itself; "source:" the
        /// `--sources` folder, "source:NAME" a file in it.
        var reported: [String: String] = [:]
    }

    private let state = Mutex(State())
    private let log: Logger

    init(log: Logger) {
        self.log = log
    }

    /// A pyramid with the next generation.
    func makePyramid(
        _ id: PyramidID, _ manifest: PyramidManifest, _ geometry: PyramidGeometry,
        _ source: any PyramidSource, _ signature: SourceSignature
    ) -> Pyramid {
        let generation = state.withLock { s in
            defer { s.nextGeneration += 1 }
            return s.nextGeneration
        }
        return Pyramid(
            id: id, manifest: manifest, geometry: geometry, source: source, signature: signature,
            generation: generation)
    }

    /// The entry of an archive opened for `id` from `location`, served from `source`:
    /// broken (500) when it holds another image's pyramid. `version` tells this file or
    /// object from a later one, so that its fault is logged once.
    func archiveEntry(
        _ id: PyramidID, _ archive: ArchivedPyramid, at location: String, version: String,
        signature: SourceSignature, source: any PyramidSource
    ) -> CatalogEntry {
        let name = id.rawValue
        guard archive.manifest.id == id else {
            report(
                name, "id-\(version)",
                "\(location) holds the pyramid '\(archive.manifest.id)', not '\(name)'; image '\(name)' answers 500")
            return .broken(message: "image '\(name)' has an archive of another image", signature: signature)
        }
        clearReport(name)
        return .pyramid(makePyramid(id, archive.manifest, archive.geometry, source, signature))
    }

    /// The entry of an archive of `id` that could not be opened: broken (500), its
    /// `error` logged once per `version`.
    func damagedArchive(_ id: PyramidID, _ error: StorageError, version: String, signature: SourceSignature) -> CatalogEntry {
        report(id.rawValue, "archive-\(version)", "\(error); image '\(id)' answers 500")
        return .broken(message: "image '\(id)' has a damaged archive", signature: signature)
    }

    /// Logs `message` unless the same fault (`signature`) was the last one logged for
    /// `name`.
    func report(_ name: String, _ signature: String, _ message: @autoclosure () -> String) {
        guard
            state.withLock({ s in
                guard s.reported[name] != signature else { return false }
                s.reported[name] = signature
                return true
            })
        else { return }
        log.warning("\(message())")
    }

    /// Logs a failure to open something that exists but may not be read (permissions,
    /// I/O errors); a name that is simply not a pyramid (missing, a link, a file) is not
    /// worth a line.
    func reportIfOperatorsFault(_ name: String, _ error: RootedFileError, _ message: @autoclosure () -> String) {
        switch error.kind {
        case .denied, .other: report(name, "open-\(error.kind)-\(error.errno)", message())
        default: clearReport(name)
        }
    }

    /// Forgets the fault logged for `name`: the next one is logged again.
    func clearReport(_ name: String) {
        state.withLock { _ = $0.reported.removeValue(forKey: name) }
    }

    /// Whether a fault is on record for `name`.
    func hasReport(_ name: String) -> Bool {
        state.withLock { $0.reported[name] != nil }
    }

    /// Forgets the faults of names `keep` does not keep (names gone from a root).
    func pruneReports(keeping keep: (String) -> Bool) {
        state.withLock { s in s.reported = s.reported.filter { keep($0.key) } }
    }

    /// Every name with a fault on record.
    var reportedNames: [String] { state.withLock { Array($0.reported.keys) } }
}
