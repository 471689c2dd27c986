import TilerCore
import TilerHTTP
import TilerImaging

/// A stored tile as DeepZoom and IIIF clients expect it: clipped at the image's edge.
///
/// A padded pyramid (`tiler cut --pad`) stores its edge tiles at the full tile size, for
/// XYZ clients; for DeepZoom and IIIF such a tile is cropped to its rectangle (the same
/// pixels as an unpadded cut's tile), drawn once on the blocking pool and cached like a
/// document. Every other tile is the stored file, as `TileStore.tileResponse` serves it.
func clippedTileResponse(_ tile: TileCoordinate, of pyramid: Pyramid, store: TileStore) throws(HTTPError) -> HTTPResponse {
    let geometry = pyramid.geometry
    guard pyramid.manifest.isPadded, geometry.contains(tile) else { return try store.tileResponse(tile, of: pyramid) }
    let rect = geometry.rectInLevel(tile)
    guard rect.width < geometry.tileSize || rect.height < geometry.tileSize else {
        return try store.tileResponse(tile, of: pyramid)
    }
    let format = pyramid.manifest.format
    return try drawnResponse(
        "clipped/\(tile)", of: pyramid, store: store, contentType: format.mimeType,
        quality: pyramid.manifest.quality
    ) { _ in
        RegionRenderer.Job(level: tile.level, rect: rect, width: rect.width, height: rect.height, format: IIIFFormat(format))
    }
}
