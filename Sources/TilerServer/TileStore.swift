import Foundation
import TilerCore
import TilerHTTP

/// One pyramid as loaded from `ROOT/ID/pyramid.json`: its manifest, geometry and the
/// folder its files live in. Immutable; a re-cut pyramid is a new `Pyramid` with a new
/// `generation`.
public final class Pyramid: Sendable {
    public let id: PyramidID
    public let manifest: PyramidManifest
    public let geometry: PyramidGeometry
    /// `ROOT/ID`, built from the validated id.
    public let directory: String
    /// `stat` of `pyramid.json` when it was read.
    public let manifestInfo: FileInfo
    /// Unique per load: cache keys include it, so a re-cut never serves stale tiles.
    public let generation: UInt64
    /// The viewport-independent parts of its `/visible` answers.
    let visiblePieces: VisiblePieces

    init(id: PyramidID, manifest: PyramidManifest, geometry: PyramidGeometry, directory: String,
         manifestInfo: FileInfo, generation: UInt64) {
        self.id = id
        self.manifest = manifest
        self.geometry = geometry
        self.directory = directory
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
}

/// What the cache holds, per pyramid generation.
public enum CachedItem: Hashable, Sendable {
    case tile(generation: UInt64, level: Int32, row: Int32, column: Int32)
    case file(generation: UInt64, name: String)
    case document(generation: UInt64, name: String)
}

/// The pyramids under ROOT, found and re-checked on demand, and their files through a
/// bounded cache. Every path it builds comes from a validated `PyramidID`, a tile
/// coordinate inside the geometry, or a file name from the manifest.
///
/// A folder is a pyramid once its `pyramid.json` exists; a loaded manifest is trusted for
/// `manifestCheckInterval` seconds, then stat'ed again, so pyramids cut (or re-cut, or
/// deleted) while the server runs are noticed without a restart.
public final class TileStore: @unchecked Sendable {
    public let configuration: ServerConfiguration
    /// Prepared responses: tiles, thumbnails and JSON documents.
    public let cache: ResponseCache<CachedItem>
    private let root: String
    private let lock = NSLock()
    private var loaded: [String: (pyramid: Pyramid, checkedAt: Int64)] = [:]
    private var nextGeneration: UInt64 = 1
    private let checkInterval: Int64

    public init(configuration: ServerConfiguration) {
        self.configuration = configuration
        var root = configuration.root
        while root.count > 1 && root.hasSuffix("/") { root.removeLast() }
        self.root = root
        cache = ResponseCache(capacity: configuration.cacheBytes)
        checkInterval = Int64(configuration.manifestCheckInterval * 1000)
    }

    /// The pyramid named `name`, or a 404 (or 500 for an unreadable manifest).
    public func pyramid(named name: String) throws(HTTPError) -> Pyramid {
        let now = SystemClock.monotonicMilliseconds()
        lock.lock()
        let entry = loaded[name]
        lock.unlock()
        if let entry, now - entry.checkedAt < checkInterval { return entry.pyramid }
        guard let id = PyramidID(name) else { throw HTTPError(404, "no image named '\(name.prefix(200))'") }
        return try load(id, previous: entry?.pyramid, now: now)
    }

    /// Every readable pyramid under ROOT, sorted by id. Folders without a manifest, and
    /// manifests that cannot be read, are skipped.
    public func allPyramids() -> [Pyramid] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        var found: [Pyramid] = []
        for name in names {
            guard PyramidID(name) != nil else { continue }
            if let p = try? pyramid(named: name) { found.append(p) }
        }
        return found.sorted { $0.id < $1.id }
    }

    /// A tile of `pyramid` as a response: from the cache, or from the page cache when the
    /// file is there, or else `.blocking` (read from disk on the blocking pool, so the
    /// event loop never waits for the disk). 404 if outside the pyramid or missing.
    public func tileResponse(_ coordinate: TileCoordinate, of pyramid: Pyramid) throws(HTTPError) -> HTTPResponse {
        let key = try tileKey(coordinate, of: pyramid)
        if let hit = cache.value(for: key) { return .prepared(hit) }
        switch RootedFiles.readIfCached(root: root, tilePath(coordinate, of: pyramid)) {
        case let .read(bytes, info):
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
        guard let response = prepareFile(tilePath(coordinate, of: pyramid), contentType: pyramid.manifest.format.mimeType) else {
            throw missingTile(coordinate, of: pyramid)
        }
        return keep(response, for: key)
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
        guard let response = prepareFile([pyramid.id.rawValue, name], contentType: contentType) else {
            throw HTTPError(404, "no file '\(name)' in image '\(pyramid.id)'")
        }
        return keep(response, for: key)
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

    // MARK: Loading

    private func load(_ id: PyramidID, previous: Pyramid?, now: Int64) throws(HTTPError) -> Pyramid {
        let directory = root + "/" + id.rawValue
        // Beneath ROOT nothing is followed: a pyramid folder or manifest that is a
        // symbolic link is not a pyramid (RootedFiles).
        let manifestPath = [id.rawValue, PyramidManifest.fileName]
        guard let info = RootedFiles.info(root: root, manifestPath), info.isRegularFile else {
            forget(id.rawValue)
            throw HTTPError(404, "no image named '\(id)'")
        }
        if let previous, previous.manifestInfo == info {
            lock.withLock { loaded[id.rawValue] = (previous, now) }
            return previous
        }
        guard let (bytes, readInfo) = RootedFiles.read(root: root, manifestPath, maximumBytes: 16 << 20) else {
            forget(id.rawValue)
            throw HTTPError(404, "no image named '\(id)'")
        }
        let manifest: PyramidManifest
        let geometry: PyramidGeometry
        do {
            manifest = try JSONDecoder().decode(PyramidManifest.self, from: Data(bytes))
            geometry = try manifest.geometry()
        } catch {
            forget(id.rawValue)
            throw HTTPError(500, "image '\(id)' has an unreadable pyramid.json: \(error)")
        }
        guard manifest.id == id else {
            forget(id.rawValue)
            throw HTTPError(500, "image '\(id)' has a pyramid.json for '\(manifest.id)'")
        }
        return lock.withLock {
            let p = Pyramid(id: id, manifest: manifest, geometry: geometry, directory: directory,
                            manifestInfo: readInfo, generation: nextGeneration)
            nextGeneration += 1
            loaded[id.rawValue] = (p, now)
            return p
        }
    }

    private func forget(_ name: String) {
        lock.withLock { _ = loaded.removeValue(forKey: name) }
    }

    /// `ROOT/path…` read without following any symbolic link below ROOT.
    private func prepareFile(_ path: [String], contentType: String) -> PreparedResponse? {
        guard let (bytes, info) = RootedFiles.read(root: root, path) else { return nil }
        return prepared(bytes, info, contentType: contentType)
    }

    private func prepared(_ bytes: [UInt8], _ info: FileInfo, contentType: String) -> PreparedResponse {
        PreparedResponse(body: bytes, contentType: contentType, etag: info.entityTag,
                         lastModified: info.modificationSeconds, cacheControl: configuration.cacheControl)
    }
}
