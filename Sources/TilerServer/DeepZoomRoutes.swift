import TilerCore
import TilerImaging

/// DeepZoom for OpenSeadragon and other DZI clients:
/// - `/images/ID.dzi`: the descriptor;
/// - `/images/ID_files/L/COLUMN_ROW.EXT`: tiles of DeepZoom level `L`, for every level
///   `0…ceil(log2(max(W, H)))`. Levels that are pyramid levels are the pyramid's own tile
///   files; the smaller ones (down to 1 × 1) are drawn by shrinking level 0.
public struct DeepZoomRoutes: Sendable {
    public let pyramids: any PyramidLookup

    public init(pyramids: any PyramidLookup) {
        self.pyramids = pyramids
    }

    /// The answer for `path` (percent-encoded, without the query), or nil when the path is
    /// not a DeepZoom URL, so that other routes may take it.
    public func answer(path: Substring) -> RouteAnswer? {
        guard path.hasPrefix("/images/") else { return nil }
        let rest = path.dropFirst("/images/".count)
        let segments = rest.split(separator: "/", omittingEmptySubsequences: false)
        if segments.count == 1, rest.hasSuffix(".dzi") {
            let name = rest.dropLast(4)
            // An id may itself end in ".dzi": such a pyramid keeps its own route.
            if let literal = PyramidID(String(rest)), pyramids.pyramid(literal) != nil { return nil }
            guard let id = PyramidID(String(name)), let found = pyramids.pyramid(id) else {
                return .noImage(String(name))
            }
            let xml = DeepZoomGeometry(pyramid: found.geometry).descriptorXML(format: found.manifest.format.fileExtension)
            return .bytes(status: 200, contentType: "application/xml; charset=utf-8", body: Array(xml.utf8), headers: [])
        }
        guard segments.count == 3, segments[0].hasSuffix("_files") else { return nil }
        let name = segments[0].dropLast("_files".count)
        guard let id = PyramidID(String(name)), let found = pyramids.pyramid(id) else {
            return .noImage(String(name))
        }
        guard let (level, column, row, ext) = DeepZoomGeometry.parseTilePath(level: String(segments[1]), file: String(segments[2])) else {
            return .error(status: 400, message: "'\(segments[1].prefix(20))/\(segments[2].prefix(40))' is not LEVEL/COLUMN_ROW.EXT")
        }
        let format = found.manifest.format
        guard TileFormat(fileExtension: ext) == format else {
            return .error(status: 404, message: "'\(id)' has \(format.fileExtension) tiles, not \(ext.prefix(10))")
        }
        let dz = DeepZoomGeometry(pyramid: found.geometry)
        switch dz.source(level: level, column: column, row: row) {
        case nil:
            return .error(status: 404, message: "no DeepZoom tile \(level)/\(column)_\(row) in '\(id)' (levels 0…\(dz.maxLevel))")
        case let .pyramidTile(tile)?:
            return .file(path: found.directory + "/" + found.manifest.tilePath(tile), contentType: format.mimeType, headers: [])
        case let .shrunkLevelZero(width, height)?:
            do {
                let renderer = try RegionRenderer(directory: found.directory, manifest: found.manifest)
                let bytes = try renderer.render(renderer.shrunkLevelZeroJob(width: width, height: height))
                return .bytes(status: 200, contentType: format.mimeType, body: bytes, headers: [])
            } catch {
                return .error(status: 500, message: "cannot draw DeepZoom level \(level) of '\(id)': \(error)")
            }
        }
    }
}
