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
    [
        Route("deepzoom", firstSegments: ["images"]) { request throws(HTTPError) in
            let s = request.segments
            guard s.first == "images" else { return nil }
            if s.count == 2, s[1].hasSuffix(".dzi") {
                // An id may itself end in .dzi: then this is the image API's manifest.
                if try store.pyramidIfVisible(named: s[1], for: request) != nil { return nil }
                let pyramid = try store.pyramid(named: String(s[1].dropLast(4)), for: request)
                return .prepared(
                    store.document("dzi", of: pyramid, contentType: "application/xml; charset=utf-8") { p in
                        Array(DeepZoomGeometry(pyramid: p.geometry).descriptorXML(format: p.manifest.format.fileExtension).utf8)
                    })
            }
            guard s.count == 4, s[1].hasSuffix("_files") else { return nil }
            let pyramid = try store.pyramid(named: String(s[1].dropLast("_files".count)), for: request)
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
                return try drawnResponse("dz-\(level)", of: pyramid, store: store, contentType: format.mimeType) {
                    $0.shrunkLevelZeroJob(width: width, height: height)
                }
            }
        }
    ]
}
