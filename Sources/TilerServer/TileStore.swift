import Foundation
import Logging
import ObjectStorage
import Synchronization
import TilerCore
import TilerHTTP
import TilerImaging
import TilerSystem

/// What the cache holds, per pyramid generation.
public enum CachedItem: ClockCacheKey {
    case tile(generation: UInt64, level: Int32, row: Int32, column: Int32)
    case file(generation: UInt64, name: String)
    case document(generation: UInt64, name: String)

    /// Set in the generation of a private pyramid's entries (`TileStore.cacheGeneration`);
    /// generations are counted from 1 and never reach it.
    static let privateBit: UInt64 = 1 << 63

    /// The generation the entry is kept under.
    var generation: UInt64 {
        switch self {
        case let .tile(generation, _, _, _), let .file(generation, _), let .document(generation, _): generation
        }
    }

    /// The fields of a tile in one word (the cache's index mixes it): the generation
    /// spread by a multiplier, the level, row and column laid beside it. Files and
    /// documents are rare and add their name's hash.
    public var cacheKeyBits: UInt64 {
        switch self {
        case let .tile(generation, level, row, column):
            generation &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(UInt32(bitPattern: level)) << 58
                ^ UInt64(UInt32(bitPattern: row)) << 29 ^ UInt64(UInt32(bitPattern: column))
        case let .file(generation, name):
            (generation &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(bitPattern: Int64(name.hashValue))) &+ 1
        case let .document(generation, name):
            (generation &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(bitPattern: Int64(name.hashValue))) &+ 2
        }
    }
}

/// The pyramids under ROOT (a `PyramidCatalog`, kept in memory and re-scanned in the
/// background) and their bytes through a bounded response cache. ROOT is a folder of
/// pyramid folders and archives, or `s3://BUCKET/PREFIX` (archives only). Routes ask for
/// pyramids by name and for their parts (tiles, the thumbnail) through here; the part is
/// read from the pyramid's `PyramidSource`, never from a path a route builds.
///
/// Reading never blocks an event loop: a source answers at once when it can (a file in
/// the page cache), else the read becomes `.blocking` work on the lane the source names
/// (the disk's read lane, the network's storage lane). Storage reads are bounded by
/// `storageTimeout` from the moment the request is taken (`StorageDeadline`), and while
/// storage is down (`StorageHealth`) requests that need it get a 503 at once, one of them
/// at a time trying the store again, so that the server recovers by itself.
///
/// Tiles are checked before they are served or cached: bytes that do not look like a
/// whole image of the pyramid's format (`TileFormat.looksComplete`: empty, cut short,
/// another format) are a 500 with a short message, not cached, and logged once.
public final class TileStore: Sendable {
    public let configuration: ServerConfiguration
    /// Prepared responses: tiles, thumbnails and JSON documents.
    public let cache: ResponseCache<CachedItem>
    /// The memory drawn images may take at once.
    let renderBudget: RenderBudget
    /// Tiles drawings decoded, kept for the next drawing of the same area in room of the
    /// render budget no drawing is using (`decodedTileBytes`).
    let decodedTiles: PixelCache
    /// Identical drawings asked for at once are drawn once.
    let drawings = SingleFlight<CachedItem, HTTPResponse>()
    /// Drawings made so far, for tests.
    var drawingsMade: Int { drawingCount.load(ordering: .relaxed) }
    let drawingCount = Atomic(0)
    let catalog: PyramidCatalog
    let log: Logger
    /// Faults already logged: damaged files and failed drawings, per pyramid generation.
    let faults: OnceLog
    /// Whether object storage answers (bucket roots only).
    let health: StorageHealth
    /// Folder tiles kept open and sent with `sendfile`; nil when `openTiles` is 0.
    let openTiles: OpenTiles?
    /// Counts cache hits, storage reads and scans (`--metrics-port`), or nil.
    let metrics: ServerMetrics?
    /// Private images (`--access`), or nil when every image is public.
    public let access: AccessControl?

    /// Scans ROOT once (so every pyramid there is known before the first request), then
    /// keeps scanning it every `configuration.rescanInterval` seconds on a background
    /// thread until `stopRescanning`. Faults (unreadable pyramids, damaged tiles, failed
    /// drawings, storage going down and coming back) go to `log`.
    ///
    /// With `loadingFirst` false (`tiler serve`), the first scan runs on that thread too,
    /// and `init` returns at once, so that the server listens (and honours SIGTERM) while
    /// ROOT is read: until that scan ends (`catalogIsLoading`), `/images` and images not
    /// known yet in a bucket wait for it on the read lane, at most `storageTimeout`
    /// (10 s at most), then get a 503 with `Retry-After`.
    public init(
        configuration: ServerConfiguration, log: Logger = Logger(label: "tiler"), loadingFirst: Bool = true,
        metrics: ServerMetrics? = nil, access: AccessControl? = nil
    ) {
        self.configuration = configuration
        self.log = log
        self.metrics = metrics
        self.access = access
        cache = ResponseCache(capacity: configuration.cacheBytes)
        renderBudget = RenderBudget(capacity: configuration.renderMemoryBytes, wait: configuration.renderWait)
        decodedTiles = PixelCache(capacity: Self.decodedTileBytes(renderMemory: configuration.renderMemoryBytes), lender: renderBudget)
        renderBudget.lend(to: decodedTiles)
        faults = OnceLog(log: log)
        health = StorageHealth(retryAfter: configuration.storageTimeout, log: log)
        let openTileLimit = configuration.openTileLimit(fileLimit: HTTPConfiguration.raisedFileLimit())
        openTiles = openTileLimit > 0 ? OpenTiles(capacity: openTileLimit, revalidateAfter: configuration.rescanInterval) : nil
        catalog = PyramidCatalog(
            configuration: configuration, health: health, renderBudget: renderBudget, log: log, metrics: metrics)
        if loadingFirst { catalog.rescan() }
        catalog.startRefreshing(every: configuration.rescanInterval, scanningFirst: !loadingFirst)
    }

    /// Whether the first scan of ROOT is still under way (only with `loadingFirst` false).
    public var catalogIsLoading: Bool { !catalog.isLoaded }

    /// Throws unless the first scan of ROOT has ended: on an event loop
    /// `lookupMustBlock` (the router runs the request again on the read lane), there a
    /// wait of at most `storageTimeout` (10 s at most), then `stillLoading`.
    func awaitCatalog(for request: Request) throws(HTTPError) {
        guard catalogIsLoading else { return }
        guard request.mayBlock else { throw Self.lookupMustBlock }
        guard catalog.waitUntilLoaded(seconds: min(configuration.storageTimeout, 10)) else { throw Self.stillLoading }
    }

    /// The 503 for a request that needs the catalog while its first scan is under way.
    static let stillLoading = HTTPError(503, "the server is still reading its images; retry shortly")

    /// Stops the background scan of ROOT.
    public func stopRescanning() { catalog.stopRefreshing() }

    /// Scans ROOT now, on the calling thread (it may block).
    public func rescan() { catalog.rescan() }

    /// Whether ROOT is object storage (`s3://`).
    public var servesBucket: Bool { catalog.bucket != nil }

    /// nil when the server is ready to serve (`/readyz`): ROOT has been scanned once and,
    /// for a bucket, storage answers. Else why it is not.
    public var readiness: String? {
        if catalogIsLoading { return "the first scan of ROOT has not finished" }
        if servesBucket, let outage = health.outage {
            return "object storage has not answered for \(Int(outage.seconds.rounded())) s"
        }
        return nil
    }

    /// How many images are served from each layout: folder, archive (local), bucket and
    /// sources (`tiler_images`).
    func imagesByLayout() -> [(String, Int)] {
        var counts = ["folder": 0, "archive": 0, "bucket": 0, "sources": 0]
        for pyramid in pyramids {
            let layout =
                switch pyramid.source {
                case is FolderSource: "folder"
                case is BucketArchiveSource: "bucket"
                case is SourceFileSource: "sources"
                default: "archive"
                }
            counts[layout, default: 0] += 1
        }
        return counts.sorted { $0.key < $1.key }
    }

    /// The pyramid named `name`, or a 404 (or 500 for an unreadable manifest).
    ///
    /// Known pyramids come from memory. A name the last scan did not see is looked up in
    /// ROOT, which only a request that may block does (`request.mayBlock`): on an event
    /// loop this throws `TileStore.lookupMustBlock`, and the router runs the request again
    /// on the blocking pool. In a bucket, names are only found by the listing (no request
    /// can make the server query storage for names that do not exist).
    public func pyramid(named name: String, for request: Request) throws(HTTPError) -> Pyramid {
        guard let p = try pyramidIfPresent(named: name, for: request) else {
            throw HTTPError(404, "no image named '\(name.prefix(200))'")
        }
        return p
    }

    /// Like `pyramid(named:for:)`, but nil when there is no pyramid of that name.
    public func pyramidIfPresent(named name: String, for request: Request) throws(HTTPError) -> Pyramid? {
        try pyramidIfPresent(named: name, for: request, checkingAccess: true)
    }

    /// `checkingAccess` false only where the caller's access was decided otherwise (the
    /// IIIF probe, with an access token of the token service).
    func pyramidIfPresent(named name: String, for request: Request, checkingAccess: Bool) throws(HTTPError) -> Pyramid? {
        // Before anything is looked up: a private id, known or not, is 401 without a token.
        if checkingAccess, let access { try access.authorize(name, request.head) }
        var entry = catalog.entry(name)
        if entry == nil {
            guard catalog.looksUpUnknownNames, let id = PyramidID(name) else {
                // A bucket's names come from its listing, which may not be read yet.
                guard catalogIsLoading, PyramidID(name) != nil else { return nil }
                try awaitCatalog(for: request)
                return try pyramidIfPresent(named: name, for: request, checkingAccess: false)
            }
            guard request.mayBlock else { throw Self.lookupMustBlock }
            entry = catalog.load(id)
        }
        switch entry {
        case let .pyramid(p)?: return p
        case let .broken(message, _)?: throw HTTPError(500, message)
        case nil: return nil
        }
    }

    /// Like `pyramidIfPresent(named:for:)`, but nil also when the caller may not see it:
    /// for a route that only asks whether a name is an image's before it reads it as
    /// something else (`/images/ID.dzi`).
    func pyramidIfVisible(named name: String, for request: Request) throws(HTTPError) -> Pyramid? {
        if let access, !access.visibility(for: request.head)(name) { return nil }
        return try pyramidIfPresent(named: name, for: request)
    }

    /// The generation a pyramid's cached responses are kept under: its own, marked when
    /// the pyramid is private under the policy in force, so that a private response (sent
    /// `Cache-Control: private`) and a public one are never each other's cache entry,
    /// whatever the policy says from one request to the next.
    func cacheGeneration(of pyramid: Pyramid, isPrivate: Bool? = nil) -> UInt64 {
        pyramid.generation | ((isPrivate ?? self.isPrivate(pyramid)) ? CachedItem.privateBit : 0)
    }

    /// Whether `pyramid` is private under the access policy in force (its answers then
    /// depend on the caller's token).
    func isPrivate(_ pyramid: Pyramid) -> Bool { access?.isPrivate(pyramid) ?? false }

    /// `Cache-Control` and `Vary` of a response kept under `generation`: a private image's
    /// may be kept by the caller's browser only, and revalidated (with its token) each time.
    func cacheHeaders(generation: UInt64) -> (cacheControl: String?, vary: String?) {
        if generation & CachedItem.privateBit != 0 { return (Self.privateCacheControl, Self.privateVary) }
        return (configuration.cacheControl, nil)
    }

    /// The `Cache-Control` and `Vary` of every private image's response, and of listings
    /// under `--access` (what they list depends on the caller).
    static let privateCacheControl = "private, no-cache"
    static let privateVary = "Authorization, Cookie"

    /// Thrown by lookups that would have to read the disk on an event loop; `Router`
    /// catches it and answers the request from the blocking pool instead. Never sent.
    public static let lookupMustBlock = HTTPError(0, "the lookup must run where blocking is allowed")

    /// Every servable pyramid, in listing order (`Pyramid.inListingOrder`), as of the
    /// last scan (or lookup): no I/O.
    public var pyramids: [Pyramid] { catalog.snapshot.sorted }

    /// The same snapshot's other orders and its albums (`Listings`): no I/O.
    var listings: Listings { catalog.snapshot.listings }

    /// A tile of `pyramid` as a response: from the cache, or from its source when that
    /// has it at once, or else `.blocking` on the lane the source names. 404 if outside
    /// the pyramid or missing.
    /// `isPrivate`, when the caller has just decided it (`AccessControl.authorize`), spares
    /// asking again.
    public func tileResponse(_ coordinate: TileCoordinate, of pyramid: Pyramid, isPrivate: Bool? = nil) throws(HTTPError)
        -> HTTPResponse
    {
        try partResponse(
            .tile(coordinate), of: pyramid, key: try tileKey(coordinate, of: pyramid, isPrivate: isPrivate),
            contentType: pyramid.manifest.format.mimeType)
    }

    /// The thumbnail of `pyramid` as a response, read like a tile. 404 if the manifest
    /// names none.
    public func thumbnailResponse(of pyramid: Pyramid, contentType: String) throws(HTTPError) -> HTTPResponse {
        guard let file = pyramid.thumbnailFile else { throw HTTPError(404, "image '\(pyramid.id)' has no thumbnail") }
        return try partResponse(
            .thumbnail, of: pyramid, key: .file(generation: cacheGeneration(of: pyramid), name: file),
            contentType: contentType)
    }

    private func partResponse(
        _ part: PyramidPart, of pyramid: Pyramid, key: CachedItem,
        contentType: String
    ) throws(HTTPError) -> HTTPResponse {
        if let hit = cache.value(for: key) {
            if let metrics, case .tile = part { metrics.tileAnswered(fromCache: true) }
            return .prepared(hit)
        }
        let read: SourceRead
        // The largest body kept in memory. A folder tile goes to `openTiles` (once its pages
        // are resident), and a large one is then sent from its file, not kept in memory too.
        var cachedUpTo = configuration.maximumCachedFileBytes
        if let openTiles, case let .tile(t) = part, let folder = pyramid.folderSource {
            cachedUpTo = min(cachedUpTo, Self.sendFromFileAbove)
            switch openTiles.answer(for: key) {
            case .ready(let response):
                metrics?.tileAnswered(fromCache: true)
                return .prepared(response)
            case .notResident: read = .mustWait(.read)
            case .notOpen: read = try openAndRead(t, of: pyramid, folder, in: openTiles, key: key, contentType: contentType)
            }
        } else {
            do throws(SourceError) {
                read = try pyramid.source.readIfReady(part, maximumBytes: pyramid.maximumBytes(part))
            } catch {
                if let metrics, case .tile = part { metrics.tileAnswered(fromCache: false) }
                throw httpError(error, part, of: pyramid)
            }
        }
        if let metrics, case .tile = part { metrics.tileAnswered(fromCache: false) }
        switch read {
        case let .read(stored):
            return .prepared(try keep(stored, part, of: pyramid, key: key, contentType: contentType, cachedUpTo: cachedUpTo))
        case .absent:
            throw httpError(.absent, part, of: pyramid)
        case let .mustWait(lane):
            return try blockingRead(lane) { [self, cachedUpTo] () throws(HTTPError) -> HTTPResponse in
                if let hit = cache.value(for: key) { return .prepared(hit) }
                let stored = try readBlocking(part, of: pyramid)
                return .prepared(try keep(stored, part, of: pyramid, key: key, contentType: contentType, cachedUpTo: cachedUpTo))
            }
        }
    }

    /// Folder tiles larger than this are not kept in the response cache when tiles are
    /// kept open (`OpenTiles`): they go out with `sendfile` from the open file, which
    /// costs a large tile less CPU than a copy from memory (88 KB PNG tiles: 25.8 against
    /// 28.5 µs per response), and the cache's room goes to small tiles, for which the copy
    /// wins (15 KB JPEG tiles: 13.7 against 19.3 µs; `docs/benchmarks.md`, session 9). A
    /// large tile read on the blocking pool (its pages were not resident) is opened again
    /// at its next request, from the page cache, and kept open then.
    static let sendFromFileAbove = 64 << 10

    /// A folder tile opened by name and read if the page cache has it; checked, it is
    /// answered and its descriptor kept in `openTiles` (sent with `sendfile` next time).
    private func openAndRead(
        _ t: TileCoordinate, of pyramid: Pyramid, _ folder: FolderSource, in openTiles: OpenTiles,
        key: CachedItem, contentType: String
    ) throws(HTTPError) -> SourceRead {
        let started = metrics == nil ? nil : ContinuousClock.now
        func count(_ outcome: StorageOutcome) {
            if let started { countStorageRead(of: pyramid, outcome, since: started) }
        }
        let opened: FolderSource.OpenedTile?
        do throws(SourceError) {
            opened = try folder.openTile(t, maximumBytes: pyramid.maximumTileBytes)
        } catch {
            count(StorageOutcome(error))
            throw httpError(error, .tile(t), of: pyramid)
        }
        guard let opened else {
            count(.missing)
            return .absent
        }
        let fd = opened.descriptor
        switch RootedFiles.read(fd, opened.info, onlyIfCached: true) {
        case let .read(bytes, info):
            count(pyramid.manifest.format.looksComplete(bytes) ? .ok : .error)
            let stored = StoredBytes(bytes: bytes, validators: Validators(info))
            guard pyramid.manifest.format.looksComplete(bytes), let folderInfo = opened.folder else {
                fd.close()
                return .read(stored)  // `keep` answers 500 and logs a damaged one
            }
            let headers = cacheHeaders(generation: key.generation)
            openTiles.keep(
                fd, info, in: folderInfo, root: folder.root, path: opened.path, contentType: contentType,
                validators: stored.validators, cacheControl: headers.cacheControl, vary: headers.vary, for: key)
            return .read(stored)
        case .unavailable, .tooLarge:  // it shrank or failed since it was opened and checked
            fd.close()
            count(.missing)
            return .absent
        case .wouldBlock:
            fd.close()
            return .mustWait(.read)
        }
    }

    /// `work` as `.blocking` work on `lane`. On the storage lane: refused at once (503)
    /// while storage is down and another request is already trying it, and bounded by
    /// `storageTimeout` from now, the wait for a thread included.
    private func blockingRead(
        _ lane: BlockingKind,
        _ work: @escaping @Sendable () throws(HTTPError) -> HTTPResponse
    ) throws(HTTPError) -> HTTPResponse {
        guard lane == .storage else {
            return .blocking(lane) {
                do throws(HTTPError) { return try work() } catch {
                    return error.status == 503 ? Self.retryLater(error) : .error(error)
                }
            }
        }
        if let refusal = health.admit() { return Self.retryLater(refusal) }
        let deadline = StorageDeadline(seconds: configuration.storageTimeout)
        return .blocking(.storage) {
            guard !deadline.hasPassed else {
                return Self.retryLater(
                    HTTPError(503, "object storage is too busy to answer within \(Self.seconds(deadline.seconds)) s; retry later"))
            }
            do throws(HTTPError) {
                return try deadline.run { () throws(HTTPError) -> HTTPResponse in try work() }
            } catch {
                return error.status == 503 || error.status == 504 ? Self.retryLater(error) : .error(error)
            }
        }
    }

    private static func retryLater(_ error: HTTPError) -> HTTPResponse {
        .withHeaders([("Retry-After", "1")], .error(error))
    }

    static func seconds(_ value: Double) -> String { String(format: "%g", value) }

    /// `part` read from the source (may block), with storage outcomes reported to
    /// `health` and a replaced object re-opened once.
    private func readBlocking(_ part: PyramidPart, of pyramid: Pyramid) throws(HTTPError) -> StoredBytes {
        do throws(SourceError) {
            return try readRecording(part, of: pyramid)
        } catch let .replaced(why) {
            // The object changed since it was listed: open the new version (new generation)
            // and answer from it; the old generation's cached parts are never mixed in.
            log.info("\(why); opening the new version of image '\(pyramid.id)'")
            guard let fresh = catalog.reopen(pyramid) else { throw httpError(.absent, part, of: pyramid) }
            do throws(SourceError) {
                return try readRecording(part, of: fresh)
            } catch {
                throw httpError(error, part, of: fresh)
            }
        } catch {
            throw httpError(error, part, of: pyramid)
        }
    }

    private func readRecording(_ part: PyramidPart, of pyramid: Pyramid) throws(SourceError) -> StoredBytes {
        let isStorage = pyramid.source is BucketArchiveSource
        let started = metrics == nil ? nil : ContinuousClock.now
        do throws(SourceError) {
            let stored = try pyramid.source.read(part, maximumBytes: pyramid.maximumBytes(part))
            if isStorage { health.succeeded() }
            if let started {
                // A tile that is not a whole file of its format is answered 500 (`keep`): an error.
                let damaged: Bool
                if case .tile = part { damaged = !pyramid.manifest.format.looksComplete(stored.bytes) } else { damaged = false }
                countStorageRead(of: pyramid, damaged ? .error : .ok, since: started)
            }
            return stored
        } catch {
            if isStorage {
                if case let .unavailable(why, _) = error { health.failed(why) } else { health.succeeded() }
            }
            if let started { countStorageRead(of: pyramid, StorageOutcome(error), since: started) }
            throw error
        }
    }

    /// Counts a read from `pyramid`'s storage (not a drawing made from `--sources`).
    private func countStorageRead(of pyramid: Pyramid, _ outcome: StorageOutcome, since started: ContinuousClock.Instant) {
        guard let metrics else { return }
        let backend: StorageBackend
        switch pyramid.source {
        case is FolderSource: backend = .folder
        case is BucketArchiveSource: backend = .s3
        case is any ArchiveBackedSource: backend = .archive
        default: return
        }
        let elapsed = ContinuousClock.now - started
        metrics.storageRead(backend, outcome, seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18)
    }

    /// A tile's bytes for drawing: from the cache, or read from the source (this blocks;
    /// it runs on the render lane) without taking cache room from the tiles clients fetch.
    func tileForDrawing(_ coordinate: TileCoordinate, of pyramid: Pyramid) throws(RenderError) -> [UInt8] {
        let key = CachedItem.tile(
            generation: cacheGeneration(of: pyramid), level: Int32(coordinate.level),
            row: Int32(coordinate.row), column: Int32(coordinate.column))
        if let hit = cache.value(for: key) { return hit.body }
        let where_ = pyramid.source.location(of: .tile(coordinate))
        let bytes: [UInt8]
        do {
            if pyramid.source is BucketArchiveSource {
                if let refusal = health.admit() { throw SourceError.unavailable(refusal.message, timedOut: false) }
                let deadline = StorageDeadline(seconds: configuration.storageTimeout)
                bytes = try deadline.run { () throws(SourceError) -> [UInt8] in
                    try readRecording(.tile(coordinate), of: pyramid).bytes
                }
            } else {
                bytes = try pyramid.source.read(.tile(coordinate), maximumBytes: pyramid.maximumTileBytes).bytes
            }
        } catch let error as SourceError {
            switch error {
            case .absent: throw .missingTile("\(where_) is missing")
            case let .unavailable(why, timedOut): throw .unavailable(why, timedOut: timedOut)
            case let .refused(why), let .damaged(why), let .replaced(why), let .busy(why): throw .missingTile(why)
            }
        } catch {
            throw .missingTile("\(where_): \(error)")
        }
        guard pyramid.manifest.format.looksComplete(bytes) else {
            throw .badTile("\(where_) is not a complete \(pyramid.manifest.format.rawValue) file (\(bytes.count) bytes)")
        }
        return bytes
    }

    /// A renderer of `pyramid` that reads its tiles through `tileForDrawing`.
    func renderer(for pyramid: Pyramid) throws(RenderError) -> RegionRenderer {
        var renderer = try RegionRenderer(manifest: pyramid.manifest) {
            [self] (tile: TileCoordinate) throws(RenderError) -> [UInt8] in
            try tileForDrawing(tile, of: pyramid)
        }
        // By the pyramid's serial: unique to it as loaded, so a re-cut image (or another
        // with the same id) never draws with these pixels.
        renderer.decodedTiles = DecodedTiles(cache: decodedTiles, owner: pyramid.serial)
        return renderer
    }

    /// The most decoded tiles drawings keep: a quarter of the render memory, at most 128
    /// MiB (and only while no drawing needs that room).
    static func decodedTileBytes(renderMemory: Int) -> Int { min(renderMemory / 4, 128 << 20) }

    /// The HTTP answer for a source's failure: 404 for a missing part; 500 (logged once
    /// per generation) for a damaged one; 503 or 504 (with `Retry-After`) when storage
    /// did not answer; 503 when an object was replaced under the read.
    private func httpError(_ error: SourceError, _ part: PyramidPart, of pyramid: Pyramid) -> HTTPError {
        switch error {
        case .absent, .refused:
            return HTTPError(404, "\(part.subject(pyramid)) of image '\(pyramid.id)' is missing")
        case let .damaged(why):
            faults.once("\(pyramid.generation)/\(part)", "\(why): image '\(pyramid.id)' answers 500 for \(part) until it is replaced")
            return HTTPError(500, "\(part.subject(pyramid)) of image '\(pyramid.id)' is damaged on the server")
        case .unavailable(_, timedOut: true):
            return HTTPError(504, "object storage did not answer within \(Self.seconds(configuration.storageTimeout)) s; retry later")
        case .unavailable:
            return HTTPError(503, "object storage is unavailable; retry later")
        case .replaced:
            return HTTPError(503, "image '\(pyramid.id)' is being replaced; retry later")
        case .busy:
            return HTTPError(503, "the server is busy making other tiles; retry later")
        }
    }

    /// Checks a part, stores its response in the cache unless its body is larger than
    /// `cachedUpTo` (by default `maximumCachedFileBytes`), returns it. 500 (logged once)
    /// unless it looks like a whole file of its format.
    private func keep(
        _ stored: StoredBytes, _ part: PyramidPart, of pyramid: Pyramid, key: CachedItem,
        contentType: String, cachedUpTo: Int? = nil
    ) throws(HTTPError) -> PreparedResponse {
        let format: TileFormat? =
            switch part {
            case .tile: pyramid.manifest.format
            case .thumbnail: pyramid.thumbnailFile.flatMap { TileFormat(fileExtension: String($0.split(separator: ".").last ?? "")) }
            }
        if let format, !format.looksComplete(stored.bytes) {
            let what = "\(pyramid.source.location(of: part)) is not a complete \(format.rawValue) file (\(stored.bytes.count) bytes)"
            throw httpError(.damaged(what), part, of: pyramid)
        }
        let headers = cacheHeaders(generation: key.generation)
        let response = PreparedResponse(
            body: stored.bytes, contentType: contentType, etag: stored.validators.etag,
            lastModified: stored.validators.lastModified, cacheControl: headers.cacheControl, vary: headers.vary)
        if response.contentLength <= cachedUpTo ?? configuration.maximumCachedFileBytes { cache.insert(response, for: key) }
        return response
    }

    /// The cache key of a tile; 404 if the pyramid has no such tile.
    private func tileKey(_ coordinate: TileCoordinate, of pyramid: Pyramid, isPrivate: Bool? = nil) throws(HTTPError)
        -> CachedItem
    {
        guard pyramid.grids.contains(coordinate) else {
            throw HTTPError(404, "no tile \(coordinate) in image '\(pyramid.id)' (levels 0...\(pyramid.geometry.maxLevel))")
        }
        return .tile(
            generation: cacheGeneration(of: pyramid, isPrivate: isPrivate), level: Int32(coordinate.level),
            row: Int32(coordinate.row), column: Int32(coordinate.column))
    }

    /// A document derived from the manifest (JSON, DZI XML, …), built once per pyramid
    /// generation by `make` and cached, with validators taken from the pyramid's.
    public func document(
        _ name: String, of pyramid: Pyramid, contentType: String,
        make: (Pyramid) -> [UInt8]
    ) -> PreparedResponse {
        let key = CachedItem.document(generation: cacheGeneration(of: pyramid), name: name)
        if let hit = cache.value(for: key) { return hit }
        let validators = pyramid.validators
        // A distinct tag per document kind, still tied to the pyramid's identity.
        let tag = "\"\(name)-" + validators.etag.dropFirst()
        let headers = cacheHeaders(generation: key.generation)
        let response = PreparedResponse(
            body: make(pyramid), contentType: contentType, etag: tag,
            lastModified: validators.lastModified, cacheControl: headers.cacheControl, vary: headers.vary)
        cache.insert(response, for: key)
        return response
    }
}

extension PyramidPart {
    /// How error messages name it: `tile 2/0/1`, `'thumbnail.png'`.
    func subject(_ pyramid: Pyramid) -> String {
        switch self {
        case let .tile(t): "tile \(t)"
        case .thumbnail: "'\(pyramid.manifest.thumbnail.file)'"
        }
    }
}
