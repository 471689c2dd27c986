import Foundation
import TilerCore
import TilerHTTP
import TilerServer

/// A temporary ROOT with pyramids written the way `tiler cut` lays them out: a manifest
/// from `PyramidManifest` and small tile files whose bytes name the tile.
final class PyramidRoot: @unchecked Sendable {
    let path: String

    /// A new folder in `parent` (default: the temporary folder).
    init(in parent: String = NSTemporaryDirectory()) throws {
        path = parent + (parent.hasSuffix("/") ? "" : "/") + "tiler-serve-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes a pyramid. Tiles are written for levels up to `tilesThrough` (all by default);
    /// each tile's bytes are unique to its id and coordinate.
    @discardableResult
    func addPyramid(_ id: String, width: Int, height: Int, tileSize: Int = 256, format: TileFormat = .png,
                    tilesThrough: Int? = nil, writeManifest: Bool = true) throws -> PyramidManifest {
        let geometry = try PyramidGeometry(width: width, height: height, tileSize: tileSize)
        let dir = path + "/" + id
        let fm = FileManager.default
        try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let manifest = PyramidManifest(id: PyramidID(id)!, geometry: geometry, format: format,
                                       thumbnail: .init(file: "thumbnail.\(format.fileExtension)", width: 200, height: 100))
        for level in geometry.levels where level.level <= (tilesThrough ?? geometry.maxLevel) {
            for row in 0..<level.rows {
                try fm.createDirectory(atPath: "\(dir)/\(level.level)/\(row)", withIntermediateDirectories: true)
                for column in 0..<level.columns {
                    let tile = TileCoordinate(level: level.level, row: row, column: column)
                    try Data(Self.tileBytes(id, tile)).write(to: URL(fileURLWithPath: dir + "/" + manifest.tilePath(tile)))
                }
            }
        }
        try Data("thumbnail of \(id)".utf8).write(to: URL(fileURLWithPath: "\(dir)/thumbnail.\(format.fileExtension)"))
        if writeManifest { try write(manifest) }
        return manifest
    }

    func write(_ manifest: PyramidManifest) throws {
        let data = try JSONEncoder().encode(manifest)
        let dir = path + "/" + manifest.id.rawValue
        try data.write(to: URL(fileURLWithPath: dir + "/" + PyramidManifest.fileName), options: .atomic)
    }

    static func tileBytes(_ id: String, _ tile: TileCoordinate) -> [UInt8] {
        var bytes = Array("tile \(id) \(tile)|".utf8)
        var x = UInt64(truncatingIfNeeded: (tile.level &* 1_000_003) ^ (tile.row &* 7919) ^ (tile.column &* 104_729))
        for _ in 0..<(300 + tile.column % 50) {
            x = x &* 6364136223846793005 &+ 1442695040888963407
            bytes.append(UInt8(truncatingIfNeeded: x >> 33))
        }
        return bytes
    }

    func file(_ relative: String) -> [UInt8] {
        (try? Array(Data(contentsOf: URL(fileURLWithPath: path + "/" + relative)))) ?? []
    }
}

/// A running in-process `TileServer` on a free loopback port.
func withTileServer(_ root: PyramidRoot, _ configure: (inout ServerConfiguration) -> Void = { _ in },
                    _ body: (Int) throws -> Void) throws {
    try withRunningTileServer(root, configure) { server in try body(server.port) }
}

/// The same, handing over the server itself (its connection count, its pool).
func withRunningTileServer(_ root: PyramidRoot, _ configure: (inout ServerConfiguration) -> Void = { _ in },
                           _ body: (TileServer) throws -> Void) throws {
    var config = ServerConfiguration(root: root.path)
    config.http.port = 0
    config.http.threads = 2
    config.manifestCheckInterval = 0.2
    configure(&config)
    let server = TileServer(configuration: config)
    try server.start()
    defer {
        server.stop()
        server.wait()
    }
    try body(server)
}
