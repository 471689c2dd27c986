import TilerCore
import TilerHTTP
import TilerImaging

/// DeepZoom for OpenSeadragon and other DZI clients:
/// - `/images/ID.dzi`: the descriptor (TileSize = the pyramid's tile size, Overlap 0,
///   Format = its tile format);
/// - `/images/ID_files/L/COLUMN_ROW.EXT`: tiles of DeepZoom level `L`, for every level
///   `0…ceil(log2(max(W, H)))`. Levels that are pyramid levels are the pyramid's own tile
///   files (through the store's cache); the smaller ones, down to 1 × 1, are drawn once
///   by shrinking level 0 and then cached like documents.
///
/// Must come before `imageRoutes`: `/images/ID.dzi` would otherwise be read as the
/// manifest of an image named `ID.dzi` (a pyramid really named so keeps its manifest).
func deepZoomRoutes(store: TileStore) -> [Route] {
    [Route("deepzoom") { request throws(HTTPError) in
        let s = request.segments
        guard s.first == "images" else { return nil }
        if s.count == 2, s[1].hasSuffix(".dzi") {
            if (try? store.pyramid(named: s[1])) != nil { return nil }
            let pyramid = try store.pyramid(named: String(s[1].dropLast(4)))
            return .prepared(store.document("dzi", of: pyramid, contentType: "application/xml; charset=utf-8") { p in
                Array(DeepZoomGeometry(pyramid: p.geometry).descriptorXML(format: p.manifest.format.fileExtension).utf8)
            })
        }
        guard s.count == 4, s[1].hasSuffix("_files") else { return nil }
        let pyramid = try store.pyramid(named: String(s[1].dropLast("_files".count)))
        guard let (level, column, row, ext) = DeepZoomGeometry.parseTilePath(level: s[2], file: s[3]) else {
            throw HTTPError(400, "'\(s[2].prefix(20))/\(s[3].prefix(40))' is not a DeepZoom LEVEL/COLUMN_ROW.EXT")
        }
        let format = pyramid.manifest.format
        guard TileFormat(fileExtension: ext) == format else {
            throw HTTPError(404, "image '\(pyramid.id)' has .\(format.fileExtension) tiles, not .\(ext.prefix(16))")
        }
        let dz = DeepZoomGeometry(pyramid: pyramid.geometry)
        switch dz.source(level: level, column: column, row: row) {
        case nil:
            throw HTTPError(404, "no DeepZoom tile \(level)/\(column)_\(row) in image '\(pyramid.id)' (levels 0...\(dz.maxLevel))")
        case let .pyramidTile(tile)?:
            return try clippedTileResponse(tile, of: pyramid, store: store)
        case let .shrunkLevelZero(width, height)?:
            return renderedResponse("dz-\(level)", of: pyramid, store: store, contentType: format.mimeType) {
                let renderer = try RegionRenderer(directory: pyramid.directory, manifest: pyramid.manifest)
                return try renderer.render(renderer.shrunkLevelZeroJob(width: width, height: height))
            }
        }
    }]
}

/// A drawn image as a response: from the cache when it was drawn before, else drawn on
/// the blocking pool (drawing reads tiles and runs libvips; no event loop waits for it).
func renderedResponse(_ name: String, of pyramid: Pyramid, store: TileStore, contentType: String,
                      draw: @escaping @Sendable () throws -> [UInt8]) -> HTTPResponse {
    if let hit = store.cache.value(for: .document(generation: pyramid.generation, name: name)) { return .prepared(hit) }
    return .blocking(.render) {
        do throws(HTTPError) {
            return .prepared(try renderedDocument(name, of: pyramid, store: store, contentType: contentType, draw: draw))
        } catch {
            return .error(error)
        }
    }
}

/// A drawn image cached like a document of the pyramid: drawn on the first request, then
/// served from the store's cache with validators until the pyramid is re-cut.
func renderedDocument(_ name: String, of pyramid: Pyramid, store: TileStore, contentType: String,
                      draw: () throws -> [UInt8]) throws(HTTPError) -> PreparedResponse {
    if let hit = store.cache.value(for: .document(generation: pyramid.generation, name: name)) { return hit }
    let bytes: [UInt8]
    do {
        bytes = try draw()
    } catch {
        throw HTTPError(500, "cannot draw \(name.prefix(200)) of image '\(pyramid.id)': \(error)")
    }
    // Large drawings (a big IIIF region) are sent once and not kept, like large files.
    guard bytes.count <= store.configuration.maximumCachedFileBytes else {
        return PreparedResponse(body: bytes, contentType: contentType, etag: nil,
                                lastModified: pyramid.manifestInfo.modificationSeconds,
                                cacheControl: store.configuration.cacheControl)
    }
    return store.document(name, of: pyramid, contentType: contentType) { _ in bytes }
}
