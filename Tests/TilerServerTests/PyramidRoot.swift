import Foundation
import Logging
import S3TestSupport
import Synchronization
import TilerCore
import TilerHTTP
import TilerImaging
import TilerServer
import TilerTestSupport

/// A temporary ROOT with pyramids written the way `tiler cut` lays them out: a manifest
/// from `PyramidManifest` and small tile files whose bytes name the tile.
final class PyramidRoot: Sendable {
    let path: String
    private let servedRoot = Mutex<ServedRoot?>(nil)
    /// What a running test server reads these pyramids from (`withTileServer(_:as:)`).
    var served: ServedRoot? { servedRoot.withLock { $0 } }

    /// A new folder in `parent` (default: the temporary folder).
    init(in parent: String = NSTemporaryDirectory()) throws {
        path = parent + (parent.hasSuffix("/") ? "" : "/") + "tiler-serve-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        // A root held by a `static let` (a suite's long-lived server) is never deinitialised.
        ProcessFolders.removeAtExit(path)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes a pyramid. Tiles are written for levels up to `tilesThrough` (all by default);
    /// each tile's bytes are unique to its id and coordinate.
    @discardableResult
    func addPyramid(
        _ id: String, width: Int, height: Int, tileSize: Int = 256, format: TileFormat = .png,
        tilesThrough: Int? = nil, writeManifest: Bool = true
    ) throws -> PyramidManifest {
        let geometry = try PyramidGeometry(width: width, height: height, tileSize: tileSize)
        let dir = path + "/" + id
        let fm = FileManager.default
        try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let manifest = PyramidManifest(
            id: PyramidID(id)!, geometry: geometry, format: format,
            thumbnail: .init(file: "thumbnail.\(format.fileExtension)", width: 200, height: 100))
        for level in geometry.levels where level.level <= (tilesThrough ?? geometry.maxLevel) {
            for row in 0..<level.rows {
                try fm.createDirectory(atPath: "\(dir)/\(level.level)/\(row)", withIntermediateDirectories: true)
                for column in 0..<level.columns {
                    let tile = TileCoordinate(level: level.level, row: row, column: column)
                    try Data(Self.tileBytes(id, tile, format: format))
                        .write(to: URL(fileURLWithPath: dir + "/" + manifest.tilePath(tile)))
                }
            }
        }
        try Data(Self.thumbnailBytes(id, format: format))
            .write(to: URL(fileURLWithPath: "\(dir)/thumbnail.\(format.fileExtension)"))
        if writeManifest { try write(manifest) }
        return manifest
    }

    func write(_ manifest: PyramidManifest) throws {
        let data = try JSONEncoder().encode(manifest)
        let dir = path + "/" + manifest.id.rawValue
        try data.write(to: URL(fileURLWithPath: dir + "/" + PyramidManifest.fileName), options: .atomic)
    }

    /// A tile's bytes: unique to its id and coordinate, in the wrapping of `format` that
    /// the server checks (`fakeFile`); not a decodable image.
    static func tileBytes(_ id: String, _ tile: TileCoordinate, format: TileFormat = .png) -> [UInt8] {
        var bytes = Array("tile \(id) \(tile)|".utf8)
        var x = UInt64(truncatingIfNeeded: (tile.level &* 1_000_003) ^ (tile.row &* 7919) ^ (tile.column &* 104_729))
        for _ in 0..<(300 + tile.column % 50) {
            x = x &* 6364136223846793005 &+ 1442695040888963407
            bytes.append(UInt8(truncatingIfNeeded: x >> 33))
        }
        return fakeFile(format, bytes)
    }

    static func thumbnailBytes(_ id: String, format: TileFormat = .png) -> [UInt8] {
        fakeFile(format, Array("thumbnail of \(id)".utf8))
    }

    /// `content` between the first and last bytes of a `format` file (signature, end
    /// marker, length), so that `TileFormat.looksComplete` accepts it: the server serves
    /// stored tiles without decoding them.
    static func fakeFile(_ format: TileFormat, _ content: [UInt8]) -> [UInt8] {
        switch format {
        case .png:
            return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + Array("IHDR".utf8) + [UInt8](repeating: 1, count: 17)
                + content + [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82]
        case .jpeg:
            return [0xFF, 0xD8, 0xFF, 0xE0] + content + [0xFF, 0xD9]
        case .webp:
            let body = Array("WEBP".utf8) + content + [UInt8](repeating: 0, count: max(0, 8 - content.count))
            let n = UInt32(body.count)
            return Array("RIFF".utf8) + [UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 24)] + body
        }
    }

    /// Serves this root's pyramids as `kind` from now on.
    func serve(as kind: RootKind, on storage: S3TestServer? = nil) throws -> ServedRoot {
        let served = try ServedRoot(kind, folders: path, storage: storage)
        servedRoot.withLock { $0 = served }
        return served
    }

    /// After a change to the folders, brings the served copy (archives, bucket) in line.
    func publish() throws { try served?.publish() }

    func file(_ relative: String) -> [UInt8] {
        (try? Array(Data(contentsOf: URL(fileURLWithPath: path + "/" + relative)))) ?? []
    }
}

extension PyramidRoot {
    /// Cuts a real pyramid (decodable tiles) from an image file into this root.
    @discardableResult
    func cut(_ input: String, as id: String, format: TileFormat = .png) throws -> PyramidManifest {
        try PyramidCutter(root: URL(fileURLWithPath: path), options: CutOptions(format: format, force: true))
            .cut(input, id: PyramidID(id)!).manifest
    }

    /// Writes a `width × height` image of one colour with the `vips` command, for `cut`.
    func solidImage(_ name: String, width: Int, height: Int, rgb: (Int, Int, Int)) throws -> String {
        guard let vips = findExecutable(["vips"]) else { throw ClientError("the vips command is missing: run scripts/install-deps") }
        let black = path + "/\(name)-black.v", file = path + "/\(name).png"
        try runTool(vips, ["black", black, "\(width)", "\(height)", "--bands", "3"])
        try runTool(vips, ["linear", black, file, "1 1 1", "\(rgb.0) \(rgb.1) \(rgb.2)", "--uchar"])
        try FileManager.default.removeItem(atPath: black)
        return file
    }
}

/// Standard error, for faults at `critical` only: the faults tests cause on purpose (a
/// damaged tile, an unreadable pyramid) are `error`s and stay quiet.
let criticalOnly = Logger(label: "tiler-test") { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = .critical
    return handler
}

/// What a server logged, for tests that check faults are logged (and only once).
final class CollectedLog: Sendable {
    private let lines = Mutex<(messages: [String], withMetadata: [String])>(([], []))

    var messages: [String] { lines.withLock { $0.messages } }
    /// Each message with its metadata (an access log's fields), as logged.
    var linesWithMetadata: [String] { lines.withLock { $0.withMetadata } }

    /// A logger whose messages land here.
    var logger: Logger {
        Logger(label: "tiler-test") { _ in Handler(log: self) }
    }

    private struct Handler: LogHandler {
        let log: CollectedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            log.lines.withLock {
                $0.messages.append("\(event.level): \(event.message)")
                $0.withMetadata.append("\(event.level): \(event.message) \(metadata.merging(event.metadata ?? [:]) { $1 })")
            }
        }
    }
}

/// A running in-process `TileServer` on a free loopback port, serving `root`'s pyramids
/// as `kind` (the folders themselves, archives, or archives in the S3 test server).
func withTileServer(
    _ root: PyramidRoot, as kind: RootKind = .folders, log: CollectedLog? = nil,
    access: AccessControl? = nil, accessLog: CollectedLog? = nil,
    _ configure: (inout ServerConfiguration) -> Void = { _ in }, _ body: (Int) throws -> Void
) throws {
    try withRunningTileServer(root, as: kind, log: log, access: access, accessLog: accessLog, configure) { server in
        try body(server.port)
    }
}

/// The same, handing over the server itself (its connection count, its pool, its store).
func withRunningTileServer(
    _ root: PyramidRoot, as kind: RootKind = .folders, log: CollectedLog? = nil,
    access: AccessControl? = nil, accessLog: CollectedLog? = nil,
    _ configure: (inout ServerConfiguration) -> Void = { _ in },
    _ body: (TileServer) throws -> Void
) throws {
    var config = ServerConfiguration(root: root.path)
    config.http.port = 0
    config.http.threads = 2
    config.rescanInterval = 0.2
    // A test's client sends its request as soon as it connects, but a loaded machine (the
    // container suite) can stall it for seconds: 10 s would close connections under it.
    // Tests of the head timeout set their own.
    config.http.requestHeadTimeout = 60
    try root.serve(as: kind).configure(&config)
    configure(&config)
    // Without a log of its own, a test still shows what would break every test after it
    // (an event loop that stopped) on standard error.
    let server = TileServer(
        configuration: config, accessLog: accessLog?.logger, log: log?.logger ?? criticalOnly, access: access)
    try server.start()
    defer {
        server.stop()
        server.wait()
    }
    try body(server)
}
