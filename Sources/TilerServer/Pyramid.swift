import Synchronization
import TilerCore

/// One pyramid as the catalog loaded it: its manifest and geometry, and the source its
/// bytes come from (a folder, a local archive, an archive in a bucket). Immutable; a
/// re-cut or replaced pyramid is a new `Pyramid` with a new `generation`.
public final class Pyramid: Sendable {
    public let id: PyramidID
    public let manifest: PyramidManifest
    public let geometry: PyramidGeometry
    /// Where its tiles and thumbnail are read.
    public let source: any PyramidSource
    /// Unique per load: cache keys include it, so a re-cut never serves stale tiles.
    public let generation: UInt64
    /// What the catalog compares to tell whether the stored pyramid changed.
    let signature: SourceSignature
    /// The viewport-independent parts of its `/visible` answers.
    let visiblePieces: VisiblePieces
    /// `source` when it is a folder (its tiles can be kept open): known once, not cast
    /// at each request.
    let folderSource: FolderSource?
    /// Its tile grids, so that a tile request's check costs two compares.
    let grids: TileGrids
    /// Where it comes in the `/images` listing: natural order of its title, else its id
    /// (`Pyramid.inListingOrder`).
    let listingKey: NaturalSortKey
    /// When it was taken (`metadata.dateTaken`), read once: `/images?sort=date`. nil
    /// when undated or the date is not one `TakenInstant` reads.
    let taken: TakenInstant?
    /// Whether it is private under the access policy in force, memoized per policy
    /// (`AccessControl.isPrivate`): the policy's generation, shifted, and 1 for private.
    let accessMemo = Atomic<UInt64>(0)
    /// Unique in the process, from 1 (`generation` is unique in its catalog): what a
    /// connection's `CredentialMemo` notes a token opened.
    let serial = Pyramid.serials.wrappingAdd(1, ordering: .relaxed).newValue
    private static let serials = Atomic<UInt64>(0)

    init(
        id: PyramidID, manifest: PyramidManifest, geometry: PyramidGeometry, source: any PyramidSource,
        signature: SourceSignature, generation: UInt64
    ) {
        self.id = id
        self.manifest = manifest
        self.geometry = geometry
        self.source = source
        self.signature = signature
        self.generation = generation
        visiblePieces = VisiblePieces(id: id, geometry: geometry, format: manifest.format)
        grids = TileGrids(geometry)
        folderSource = source as? FolderSource
        listingKey = NaturalSortKey(manifest.metadata?.title ?? id.rawValue)
        taken = manifest.metadata?.dateTaken.flatMap(TakenInstant.init)
    }

    /// Whether `a` comes before `b` in the `/images` listing: natural order of titles, else
    /// ids (`img2` before `img10`, without case), then the ids' bytes.
    static func inListingOrder(_ a: Pyramid, _ b: Pyramid) -> Bool {
        NaturalSortKey.areInOrder((a.listingKey, a.id.rawValue), (b.listingKey, b.id.rawValue))
    }

    /// Validators of the manifest and the documents made from it.
    public var validators: Validators { source.validators }

    /// The file name of the thumbnail if the manifest names a plain file.
    public var thumbnailFile: String? {
        let file = manifest.thumbnail.file
        guard !file.isEmpty, file != ".", file != "..", !file.utf8.contains(UInt8(ascii: "/")),
            !file.utf8.contains(0)
        else { return nil }
        return file
    }

    /// The largest tile served or drawn (`PyramidManifest.maximumTileBytes`, as pack and
    /// verify).
    public var maximumTileBytes: Int { manifest.maximumTileBytes }

    /// The largest thumbnail served (`PyramidManifest.maximumThumbnailBytes`).
    public var maximumThumbnailBytes: Int { manifest.maximumThumbnailBytes }

    /// The most bytes `part` may have.
    func maximumBytes(_ part: PyramidPart) -> Int {
        switch part {
        case .tile: maximumTileBytes
        case .thumbnail: maximumThumbnailBytes
        }
    }
}
