import Foundation
import PMTiles
import TilerCore
import TilerTestSupport
@testable import TilerStorage

/// The tiles, thumbnail and manifest of a made-up pyramid: random bytes, with about a
/// fifth of the tiles sharing one of three blobs (as blank margins would).
struct SyntheticPyramid {
    let id: PyramidID
    let geometry: PyramidGeometry
    let format: TileFormat
    var tiles: [TileCoordinate: [UInt8]] = [:]
    let thumbnail: [UInt8]
    let manifest: [UInt8]

    init(id: String = "sample", width: Int, height: Int, tileSize: Int = 256, format: TileFormat = .png, seed: UInt64 = 1) throws {
        self.id = PyramidID(id)!
        geometry = try PyramidGeometry(width: width, height: height, tileSize: tileSize)
        self.format = format
        var generator = SplitMix(seed: seed)
        let shared = (0..<3).map { n in (0..<(20 + n)).map { _ in UInt8(truncatingIfNeeded: generator.next()) } }
        for level in geometry.levels {
            for row in 0..<level.rows {
                for column in 0..<level.columns {
                    let tile = TileCoordinate(level: level.level, row: row, column: column)
                    if generator.next() % 5 == 0 {
                        tiles[tile] = shared[Int(generator.next() % 3)]
                    } else {
                        tiles[tile] = (0..<(1 + Int(generator.next() % 300))).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
                    }
                }
            }
        }
        thumbnail = (0..<777).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        let value = PyramidManifest(
            id: self.id, geometry: geometry, format: format,
            thumbnail: .init(file: "thumbnail.\(format.fileExtension)", width: 200, height: 100),
            quality: nil, bands: 3, created: "2026-01-01T00:00:00Z")
        manifest = try value.fileBytes()
    }

    /// Writes the pyramid through `sink`, tiles from many threads in a shuffled order, or
    /// from this thread in tile-id order (as `tiler pack` does).
    func write(to sink: any PyramidSink, replace: Bool = false, inTileIDOrder: Bool = false) throws -> Int {
        for level in geometry.levels {
            for row in 0..<level.rows { try sink.prepareRow(level: level.level, row: row) }
        }
        if inTileIDOrder {
            for tile in tiles.keys.sorted(by: { PyramidArchive.tileID($0) < PyramidArchive.tileID($1) }) {
                try sink.writeTile(tile, tiles[tile]!)
            }
        } else {
            var generator = SplitMix(seed: 42)
            let order = Array(tiles.keys).shuffled(using: &generator)
            let tiles = self.tiles
            let failures = Failures()
            DispatchQueue.concurrentPerform(iterations: order.count) { i in
                do { try sink.writeTile(order[i], tiles[order[i]]!) } catch { failures.add(error) }
            }
            if let error = failures.first { throw error }
        }
        try thumbnail.withUnsafeBytes { try sink.writeThumbnail(named: "thumbnail.\(format.fileExtension)", $0) }
        return try sink.commit(manifest: manifest, replace: replace)
    }

    /// Distinct tile blobs.
    var distinctTiles: Int { Set(tiles.values).count }
}
