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
