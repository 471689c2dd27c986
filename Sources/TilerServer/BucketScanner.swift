import Dispatch
import Foundation
import ObjectStorage
import Synchronization
import TilerCore
import TilerStorage

/// The pyramids of a bucket root `s3://BUCKET/PREFIX`: every `PREFIX/ID.pmtiles` listed
/// (one ListObjectsV2 per 1,000 keys). Each new or changed archive is opened (two range
/// reads), `openConcurrency` at a time, and no more once one finds storage unavailable;
/// names are found only by the listing. A failed listing keeps every pyramid known
/// (storage may be down: cached tiles still serve) and marks storage down in
/// `StorageHealth`. A changed object (another ETag) is opened as a new `Pyramid`: requests
/// that hold the old one finish reading the old object (reads pinned to its ETag).
struct BucketScanner: CatalogScanner {
    let location: S3Location
    let client: S3Client
    let health: StorageHealth
    let storageTimeout: Double
    let writer: CatalogWriter
    /// Leaf directories of every archive, shared.
    let directories: DirectoryCache

    /// The most archives opened at once by a scan (two range reads each).
    static let openConcurrency = 8

    func scan(_ pass: CatalogPass, into next: inout [String: CatalogEntry]) -> Bool {
        let objects: [S3Object]
        do throws(S3Error) {
            objects = try client.listAll(bucket: location.bucket, prefix: location.listPrefix)
            health.succeeded()
            writer.clearReport("")
        } catch {
            if error.isUnavailable || error.isAccessRefused {
                health.failed(StorageHealth.reason(error))
            } else {
                writer.report(
                    "", "list-\(error.code ?? "")", "cannot list \(location): \(error); the images already known are still served")
            }
            return false
        }
        var toOpen: [(PyramidID, S3Object, CatalogEntry?)] = []
        for object in objects {
            let name = object.key.dropFirst(location.listPrefix.count)
            guard !name.contains("/"), let id = PyramidLayout.archive.id(named: name) else { continue }
            let previous = pass.old[id.rawValue]
            if let previous, previous.signature == SourceSignature(object) {
                next[id.rawValue] = previous
            } else {
                toOpen.append((id, object, previous))
            }
        }
        openArchives(toOpen, pass, into: &next)
        let present = Set(next.keys)
        writer.pruneReports { $0.isEmpty || $0.hasPrefix("source:") || present.contains($0) }
        return true
    }

    /// Opens the stored version of `stale` again after a read found its object replaced
    /// (may block, within the `StorageDeadline` in force): nil when the object is gone or
    /// cannot be opened now.
    func reopen(_ stale: Pyramid, previous: CatalogEntry?) -> CatalogEntry?? {
        guard case let .object(key, _, _) = stale.signature else { return .none }
        let listed: S3Object?
        do throws(S3Error) {
            listed = try client.list(bucket: location.bucket, prefix: key, maxKeys: 1).objects.first { $0.key == key }
        } catch {
            if error.isUnavailable || error.isAccessRefused { health.failed(StorageHealth.reason(error)) }
            return .none
        }
        return .some(listed.flatMap { entry(for: stale.id, object: $0, previous: previous) })
    }

    /// Opens new and changed archives, `openConcurrency` at a time, into `next`. Once one
    /// finds storage unavailable (a timeout, a refused connection) the others are not
    /// tried this scan: each keeps its previous entry, if any, and the next scan tries
    /// again; so a store whose reads hang costs one `storageTimeout` per scan, not one per
    /// archive. The first scan publishes what it has opened every half second, so that
    /// images are served as they load.
    private func openArchives(
        _ work: [(PyramidID, S3Object, CatalogEntry?)], _ pass: CatalogPass, into next: inout [String: CatalogEntry]
    ) {
        guard !work.isEmpty else { return }
        let shared = OpeningArchives()
        let workers = DispatchGroup()
        let isStopped = pass.isStopped
        for _ in 0..<min(Self.openConcurrency, work.count) {
            workers.enter()
            let thread = Thread { [self] in
                defer { workers.leave() }
                while true {
                    let taken = shared.state.withLock { s -> Int? in
                        guard !s.abandoned, s.nextIndex < work.count, !isStopped() else { return nil }
                        defer { s.nextIndex += 1 }
                        return s.nextIndex
                    }
                    guard let i = taken else { return }
                    let (id, object, previous) = work[i]
                    var unavailable = false
                    let found = entry(for: id, object: object, previous: previous) { unavailable = true }
                    shared.state.withLock { s in
                        if unavailable { s.abandoned = true }
                        if let found { s.found[id.rawValue] = found }
                    }
                }
            }
            thread.name = "tiler-open"
            thread.start()
        }
        let base = next
        while workers.wait(timeout: .now() + .milliseconds(500)) == .timedOut {
            guard pass.isFirst else { continue }
            // Images are served as they load; the snapshot is whole at the end of the scan.
            let partial = shared.state.withLock { $0.found }
            pass.publish(base.merging(partial) { $1 })
        }
        let (found, abandoned) = shared.state.withLock { ($0.found, $0.abandoned || $0.nextIndex < work.count) }
        for (name, entry) in found { next[name] = entry }
        if abandoned {
            // Not tried this scan: what was served is kept.
            for (id, _, previous) in work where found[id.rawValue] == nil {
                if let previous { next[id.rawValue] = previous }
            }
        }
    }

    /// What the object `object` is for `id`: a pyramid, a broken one (500), or `previous`
    /// when it has not changed, or when storage cannot be asked now (`unavailable` is
    /// then called).
    private func entry(
        for id: PyramidID, object: S3Object, previous: CatalogEntry?, unavailable: () -> Void = {}
    ) -> CatalogEntry? {
        let signature = SourceSignature(object)
        if let previous, previous.signature == signature { return previous }
        let url = location.url(ofKey: object.key)
        let archive: ArchivedPyramid
        do throws(StorageError) {
            let source = S3ArchiveSource(client: client, bucket: location.bucket, object: object)
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
                return writer.damagedArchive(id, error, version: "\(object.etag)-\(object.size)", signature: signature)
            }
        }
        let source = BucketArchiveSource(archive: archive, object: object, location: url)
        return writer.archiveEntry(id, archive, at: url, version: object.etag, signature: signature, source: source)
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
