import Foundation
import Synchronization
import TilerCore
import TilerHTTP
import TilerImaging
import TilerStorage
import TilerSystem

/// An image file in the `--sources` folder, served as the pyramid `tiler cut` would make
/// of it (`SourcePyramid`): every tile and the thumbnail is made on the render lane when
/// first asked for, within the render memory budget, then kept by the store's response
/// cache (and, with `--keep`, written into `ROOT/ID/`).
///
/// The open file keeps its inode: a file replaced (renamed over) while served is still
/// read whole from the old one until the catalog's next scan opens the new one as a new
/// generation, so no answer mixes the two.
final class SourceFileSource: PyramidSource {
    let pyramid: SourcePyramid
    let location: String
    let validators: Validators
    private let budget: RenderBudget
    private let keeper: KeptTiles?

    init(pyramid: SourcePyramid, info: FileInfo, location: String, budget: RenderBudget, keeper: KeptTiles?) {
        self.pyramid = pyramid
        self.location = location
        self.budget = budget
        self.keeper = keeper
        // The file's identity and the tile format: another file, or another --sources-format,
        // is another tag.
        let file = info.entityTag.dropFirst().dropLast()
        let format = pyramid.manifest.format.rawValue + (pyramid.manifest.quality.map { "q\($0)" } ?? "")
        validators = Validators(etag: "\"f\(file)-\(format)\"", lastModified: info.modificationSeconds)
    }

    func readIfReady(_ part: PyramidPart, maximumBytes: Int) throws(SourceError) -> SourceRead {
        .mustWait(.render)
    }

    func read(_ part: PyramidPart, maximumBytes: Int) throws(SourceError) -> StoredBytes {
        let tile: TileCoordinate?
        switch part {
        case let .tile(t):
            guard pyramid.geometry.contains(t) else { throw .absent }
            tile = t
        case .thumbnail:
            tile = nil
        }
        let estimate = pyramid.estimatedPeakBytes(tile)
        let admitted = RenderBudget.isHeldByThisThread
        if !admitted {
            switch budget.admit(estimate) {
            case .admitted: break
            case .busy: throw .busy("\(location): no render memory for \(part) within \(budget.wait) s")
            case .tooLarge:
                throw .damaged("\(location): \(part) needs about \(estimate >> 20) MiB to make, more than --render-memory-mb")
            }
        }
        defer { if !admitted { budget.release(estimate) } }
        let bytes: [UInt8]
        do {
            bytes = try RenderBudget.holding { () throws(ImagingError) -> [UInt8] in
                if let tile { return try pyramid.tile(tile) }
                return try pyramid.thumbnail()
            }
        } catch {
            if case .busy = error { throw .busy("\(location): \(part): \(error)") }
            throw .damaged("\(location): \(part): \(error)")
        }
        guard bytes.count <= maximumBytes else {
            throw .damaged("\(location): \(part) encodes to \(bytes.count) bytes, more than the \(maximumBytes) a tile may have")
        }
        keeper?.keep(part, bytes, of: pyramid)
        let suffix = tile.map { "\($0.level).\($0.row).\($0.column)" } ?? "t"
        return StoredBytes(bytes: bytes, validators: validators.derived(suffix))
    }
}

/// `--keep`: tiles made from sources written into `ROOT/ID/` as a pyramid folder whose
/// manifest says `"partial": true`, each file written under a temporary name and renamed
/// into place, so a later `tiler serve ROOT` (without `--sources`) serves every tile kept
/// and 404s the others. The manifest is written (atomically) before the first tile; a
/// folder kept from another version of the source is replaced. Failures are logged once
/// and never fail the request.
final class KeptTiles: Sendable {
    let root: String
    private let faults: OnceLog
    /// The manifests written, per id; held while one is written.
    private let written = Mutex<[PyramidID: PyramidManifest]>([:])

    init(root: String, faults: OnceLog) {
        self.root = root
        self.faults = faults
    }

    func keep(_ part: PyramidPart, _ bytes: [UInt8], of pyramid: SourcePyramid) {
        var manifest = pyramid.manifest
        manifest.partial = true
        let folder = "\(root)/\(pyramid.id)"
        do {
            try written.withLock { written throws in
                guard written[pyramid.id] != manifest else { return }
                let path = "\(folder)/\(PyramidManifest.fileName)"
                if let old = try? JSONDecoder().decode(PyramidManifest.self, from: Data(contentsOf: URL(fileURLWithPath: path))),
                    old != manifest
                {
                    guard old.partial == true else { throw KeepError("\(folder) holds a cut pyramid; nothing is kept there") }
                    // Kept from another version of the source: out of view, then deleted.
                    let aside = "\(root)/.tiler-kept-\(pyramid.id)-\(UUID().uuidString.prefix(8))"
                    if (try? FileSystem.rename(folder, to: aside)) != nil { try? FileManager.default.removeItem(atPath: aside) }
                }
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                try Self.write(manifest.fileBytes(), to: path)
                written[pyramid.id] = manifest
            }
            let name: String
            switch part {
            case let .tile(t): name = manifest.tilePath(t)
            case .thumbnail: name = manifest.thumbnail.file
            }
            let path = "\(folder)/\(name)"
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent,
                withIntermediateDirectories: true)
            try Self.write(bytes, to: path)
        } catch {
            faults.once("keep/\(pyramid.id)", "cannot keep tiles of image '\(pyramid.id)' in \(folder): \(error)")
        }
    }

    /// `bytes` into `path` through a temporary name in the same folder and a rename.
    private static func write(_ bytes: [UInt8], to path: String) throws {
        let staged = path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        do {
            try AtomicFile.write(bytes, to: path, through: staged)
        } catch {
            throw KeepError("\(path): \(error.reason)")
        }
    }
}

struct KeepError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
