import Foundation
import Logging
import TilerCore
import TilerHTTP
import TilerImaging

/// One pyramid as loaded from `ROOT/ID/pyramid.json`: its manifest and geometry.
/// Immutable; a re-cut pyramid is a new `Pyramid` with a new `generation`.
public final class Pyramid: Sendable {
    public let id: PyramidID
    public let manifest: PyramidManifest
    public let geometry: PyramidGeometry
    /// `stat` of `pyramid.json` when it was read.
    public let manifestInfo: FileInfo
    /// Unique per load: cache keys include it, so a re-cut never serves stale tiles.
    public let generation: UInt64
    /// The viewport-independent parts of its `/visible` answers.
    let visiblePieces: VisiblePieces

    init(id: PyramidID, manifest: PyramidManifest, geometry: PyramidGeometry, manifestInfo: FileInfo, generation: UInt64) {
        self.id = id
        self.manifest = manifest
        self.geometry = geometry
        self.manifestInfo = manifestInfo
        self.generation = generation
        visiblePieces = VisiblePieces(id: id, geometry: geometry, format: manifest.format)
    }

    /// The file name of the thumbnail if the manifest names a plain file in the folder.
    public var thumbnailFile: String? {
        let file = manifest.thumbnail.file
        guard !file.isEmpty, file != ".", file != "..", !file.utf8.contains(UInt8(ascii: "/")),
              !file.utf8.contains(0) else { return nil }
        return file
    }

    /// The largest tile file served or drawn: twice a tile's decoded size plus 64 KiB
    /// (no encoder makes a tile larger). A bigger file is not a tile.
    public var maximumTileBytes: Int {
        let t = geometry.tileSize
        return 2 * t * t * max(1, min(4, manifest.bands ?? 4)) + (64 << 10)
    }

    /// The largest thumbnail file served, by the same rule, and at most 64 MiB.
    public var maximumThumbnailBytes: Int {
        let (pixels, overflow) = manifest.thumbnail.width.multipliedReportingOverflow(by: manifest.thumbnail.height)
        return overflow || pixels > 8 << 20 ? 64 << 20 : 8 * pixels + (64 << 10)
    }
}

/// What the cache holds, per pyramid generation.
public enum CachedItem: Hashable, Sendable {
    case tile(generation: UInt64, level: Int32, row: Int32, column: Int32)
    case file(generation: UInt64, name: String)
    case document(generation: UInt64, name: String)
}

/// The pyramids under ROOT (a `PyramidCatalog`, kept in memory and re-scanned in the
/// background) and their files through a bounded cache. Every path it builds comes from a
/// validated `PyramidID`, a tile coordinate inside the geometry, or a file name from the
/// manifest, and every file is read through `RootedFiles` (no link below ROOT followed,
/// regular files only, size-bounded): tiles served as stored and tiles drawn into IIIF
/// and DeepZoom images alike.
///
/// Tiles are checked before they are served or cached: a file that does not look like a
/// whole image of the pyramid's format (`TileFormat.looksComplete`: empty, cut short,
/// another format) is a 500 with a short message, not cached, and logged once.
public final class TileStore: @unchecked Sendable {
    public let configuration: ServerConfiguration
    /// Prepared responses: tiles, thumbnails and JSON documents.
    public let cache: ResponseCache<CachedItem>
    /// The memory drawn images may take at once.
    let renderBudget: RenderBudget
    let catalog: PyramidCatalog
    let log: Logger
    private let root: String
    /// Faults already logged: damaged files and failed drawings, per pyramid generation.
    let faults: OnceLog

    /// Scans ROOT once (so every pyramid there is known before the first request), then
    /// keeps scanning it every `configuration.rescanInterval` seconds on a background
    /// thread until `stopRescanning`. Faults (unreadable pyramids, damaged tiles, failed
    /// drawings) go to `log`.
    public init(configuration: ServerConfiguration, log: Logger = Logger(label: "tiler")) {
        self.configuration = configuration
        var root = configuration.root
        while root.count > 1 && root.hasSuffix("/") { root.removeLast() }
        self.root = root
        self.log = log
        cache = ResponseCache(capacity: configuration.cacheBytes)
        renderBudget = RenderBudget(capacity: configuration.renderMemoryBytes, wait: configuration.renderWait)
        faults = OnceLog(log: log)
        catalog = PyramidCatalog(root: root, log: log)
        catalog.rescan()
        catalog.startRefreshing(every: configuration.rescanInterval)
    }

    /// Stops the background scan of ROOT.
    public func stopRescanning() { catalog.stopRefreshing() }

    /// Scans ROOT now, on the calling thread (it may block).
    public func rescan() { catalog.rescan() }

    /// The pyramid named `name`, or a 404 (or 500 for an unreadable manifest).
    ///
    /// Known pyramids come from memory. A name the last scan did not see is looked up on
    /// the disk, which only a request that may block does (`request.mayBlock`): on an
    /// event loop this throws `TileStore.lookupMustBlock`, and the router runs the
    /// request again on the blocking pool.
    public func pyramid(named name: String, for request: Request) throws(HTTPError) -> Pyramid {
        guard let p = try pyramidIfPresent(named: name, for: request) else {
            throw HTTPError(404, "no image named '\(name.prefix(200))'")
        }
        return p
    }

    /// Like `pyramid(named:for:)`, but nil when there is no pyramid of that name.
    public func pyramidIfPresent(named name: String, for request: Request) throws(HTTPError) -> Pyramid? {
        var entry = catalog.entry(name)
        if entry == nil {
            guard let id = PyramidID(name) else { return nil }
            guard request.mayBlock else { throw Self.lookupMustBlock }
            entry = catalog.load(id)
        }
        switch entry {
        case let .pyramid(p)?: return p
        case let .broken(message, _)?: throw HTTPError(500, message)
        case nil: return nil
        }
    }

    /// Thrown by lookups that would have to read the disk on an event loop; `Router`
    /// catches it and answers the request from the blocking pool instead. Never sent.
    public static let lookupMustBlock = HTTPError(0, "the lookup must run where blocking is allowed")

    /// Every servable pyramid, sorted by id, as of the last scan (or lookup): no I/O.
    public var pyramids: [Pyramid] { catalog.snapshot.sorted }

    /// A tile of `pyramid` as a response: from the cache, or from the page cache when the
    /// file is there, or else `.blocking` (read from disk on the blocking pool, so the
    /// event loop never waits for the disk). 404 if outside the pyramid or missing.
    public func tileResponse(_ coordinate: TileCoordinate, of pyramid: Pyramid) throws(HTTPError) -> HTTPResponse {
        let key = try tileKey(coordinate, of: pyramid)
        if let hit = cache.value(for: key) { return .prepared(hit) }
        switch RootedFiles.readIfCached(root: root, tilePath(coordinate, of: pyramid), maximumBytes: pyramid.maximumTileBytes) {
        case let .read(bytes, info):
            try checkTile(bytes, coordinate, of: pyramid)
            return .prepared(keep(prepared(bytes, info, contentType: pyramid.manifest.format.mimeType), for: key))
        case .unavailable:
            throw missingTile(coordinate, of: pyramid)
        case .wouldBlock:
            return .blocking(.read) { [self] in
                do throws(HTTPError) {
                    return .prepared(try tile(coordinate, of: pyramid))
                } catch {
                    return .error(error)
                }
            }
        }
    }

    /// A tile of `pyramid` as a prepared response, read from disk if need be (this may
    /// block: event loops use `tileResponse`). 404 if outside the pyramid or missing.
    public func tile(_ coordinate: TileCoordinate, of pyramid: Pyramid) throws(HTTPError) -> PreparedResponse {
        let key = try tileKey(coordinate, of: pyramid)
        if let hit = cache.value(for: key) { return hit }
        guard let (bytes, info) = RootedFiles.read(root: root, tilePath(coordinate, of: pyramid),
                                                   maximumBytes: pyramid.maximumTileBytes) else {
            throw missingTile(coordinate, of: pyramid)
        }
        try checkTile(bytes, coordinate, of: pyramid)
        return keep(prepared(bytes, info, contentType: pyramid.manifest.format.mimeType), for: key)
    }

    /// A tile's bytes for drawing: from the cache, or read from disk (this blocks; it runs
    /// on the blocking pool) without taking cache room from the tiles clients fetch.
    func tileForDrawing(_ coordinate: TileCoordinate, of pyramid: Pyramid) throws(RenderError) -> [UInt8] {
        let key = CachedItem.tile(generation: pyramid.generation, level: Int32(coordinate.level),
                                  row: Int32(coordinate.row), column: Int32(coordinate.column))
        if let hit = cache.value(for: key) { return hit.body }
        let file = "\(root)/\(pyramid.id)/\(pyramid.manifest.tilePath(coordinate))"
        let bytes: [UInt8]
        do {
            bytes = try RootedFolder.read(root: root, tilePath(coordinate, of: pyramid), maximumBytes: pyramid.maximumTileBytes).bytes
        } catch {
            throw .missingTile("\(file): \(error)")
        }
        guard pyramid.manifest.format.looksComplete(bytes) else {
            throw .badTile("\(file) is not a complete \(pyramid.manifest.format.rawValue) file (\(bytes.count) bytes)")
        }
        return bytes
    }

    /// A renderer of `pyramid` that reads its tiles through `tileForDrawing`.
    func renderer(for pyramid: Pyramid) throws(RenderError) -> RegionRenderer {
        try RegionRenderer(manifest: pyramid.manifest) { [self] (tile: TileCoordinate) throws(RenderError) -> [UInt8] in
            try tileForDrawing(tile, of: pyramid)
        }
    }

    /// 500 (logged once) unless the tile looks like a whole file of the pyramid's format.
    private func checkTile(_ bytes: [UInt8], _ coordinate: TileCoordinate, of pyramid: Pyramid) throws(HTTPError) {
        let format = pyramid.manifest.format
        guard !format.looksComplete(bytes) else { return }
        faults.once("\(pyramid.generation)/\(coordinate)",
                       "\(root)/\(pyramid.id)/\(pyramid.manifest.tilePath(coordinate)) is not a complete \(format.rawValue) "
                       + "file (\(bytes.count) bytes): answering 500 until it is replaced")
        throw HTTPError(500, "tile \(coordinate) of image '\(pyramid.id)' is damaged on the server")
    }

    /// The cache key of a tile; 404 if the pyramid has no such tile.
    private func tileKey(_ coordinate: TileCoordinate, of pyramid: Pyramid) throws(HTTPError) -> CachedItem {
        guard pyramid.geometry.contains(coordinate) else {
            throw HTTPError(404, "no tile \(coordinate) in image '\(pyramid.id)' (levels 0...\(pyramid.geometry.maxLevel))")
        }
        return .tile(generation: pyramid.generation, level: Int32(coordinate.level),
                     row: Int32(coordinate.row), column: Int32(coordinate.column))
    }

    /// The tile's path below ROOT, as components: `[ID, LEVEL, ROW, COLUMN.EXT]`.
    private func tilePath(_ coordinate: TileCoordinate, of pyramid: Pyramid) -> [String] {
        [pyramid.id.rawValue] + pyramid.manifest.tilePath(coordinate).split(separator: "/").map(String.init)
    }

    private func missingTile(_ coordinate: TileCoordinate, of pyramid: Pyramid) -> HTTPError {
        HTTPError(404, "tile \(coordinate) of image '\(pyramid.id)' is missing on disk")
    }

    /// Stores a file's response in the cache unless it is too large; returns it.
    private func keep(_ response: PreparedResponse, for key: CachedItem) -> PreparedResponse {
        if response.body.count <= configuration.maximumCachedFileBytes { cache.insert(response, for: key) }
        return response
    }

    /// A file named in the manifest (the thumbnail), or another plain file name in the
    /// pyramid's folder. `name` must not contain `/` and must not start with `.`.
    public func file(named name: String, of pyramid: Pyramid, contentType: String) throws(HTTPError) -> PreparedResponse {
        guard !name.isEmpty, !name.hasPrefix("."), !name.utf8.contains(UInt8(ascii: "/")), !name.utf8.contains(0) else {
            throw HTTPError(404, "no file '\(name.prefix(200))' in image '\(pyramid.id)'")
        }
        let key = CachedItem.file(generation: pyramid.generation, name: name)
        if let hit = cache.value(for: key) { return hit }
        guard let (bytes, info) = RootedFiles.read(root: root, [pyramid.id.rawValue, name],
                                                   maximumBytes: pyramid.maximumThumbnailBytes) else {
            throw HTTPError(404, "no file '\(name)' in image '\(pyramid.id)'")
        }
        if let format = TileFormat(fileExtension: String(name.split(separator: ".").last ?? "")), !format.looksComplete(bytes) {
            faults.once("\(pyramid.generation)/\(name)", "\(root)/\(pyramid.id)/\(name) is not a complete \(format.rawValue) "
                           + "file (\(bytes.count) bytes): answering 500 until it is replaced")
            throw HTTPError(500, "'\(name)' of image '\(pyramid.id)' is damaged on the server")
        }
        return keep(prepared(bytes, info, contentType: contentType), for: key)
    }

    /// A document derived from the manifest (JSON, DZI XML, …), built once per pyramid
    /// generation by `make` and cached, with validators taken from `pyramid.json`.
    public func document(_ name: String, of pyramid: Pyramid, contentType: String,
                         make: (Pyramid) -> [UInt8]) -> PreparedResponse {
        let key = CachedItem.document(generation: pyramid.generation, name: name)
        if let hit = cache.value(for: key) { return hit }
        let info = pyramid.manifestInfo
        // A distinct tag per document kind, still tied to the manifest file's identity.
        let tag = "\"\(name)-" + info.entityTag.dropFirst()
        let response = PreparedResponse(body: make(pyramid), contentType: contentType, etag: tag,
                                        lastModified: info.modificationSeconds, cacheControl: configuration.cacheControl)
        cache.insert(response, for: key)
        return response
    }

    private func prepared(_ bytes: [UInt8], _ info: FileInfo, contentType: String) -> PreparedResponse {
        PreparedResponse(body: bytes, contentType: contentType, etag: info.entityTag,
                         lastModified: info.modificationSeconds, cacheControl: configuration.cacheControl)
    }
}
