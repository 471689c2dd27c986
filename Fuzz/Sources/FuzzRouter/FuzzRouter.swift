import Foundation
import TilerCore
import TilerHTTP
import TilerServer

/// The folder holding ROOT and the secret.
let base = NSTemporaryDirectory() + "tiler-fuzz-router-\(getpid())"

/// Every file under ROOT that a route may return as stored.
nonisolated(unsafe) var storedFiles: Set<[UInt8]> = []

/// `content` between the first and last bytes of a `format` file, which is all the server
/// checks of a tile it serves as stored (`TileFormat.looksComplete`).
func fakeFile(_ format: TileFormat, _ content: String) -> [UInt8] {
    let c = Array(content.utf8)
    switch format {
    case .png:
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: 0, count: 25) + c
            + [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82]
    case .jpeg:
        return [0xFF, 0xD8, 0xFF, 0xE0] + c + [0xFF, 0xD9]
    case .webp:
        let body = Array("WEBP".utf8) + c + [UInt8](repeating: 0, count: 8)
        let n = body.count
        return Array("RIFF".utf8) + [UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 24)] + body
    }
}

/// A ROOT made once per process: a pyramid `a` (1000 × 700, PNG, every tile file a few
/// bytes between a PNG's first and last bytes), a pyramid `j` with JPEG tiles, a missing
/// tile and an empty one, a folder without a manifest, a folder with a corrupt manifest,
/// and a file outside ROOT that no request may reach (`secret`, next to ROOT).
let router: Router = {
    let root = base + "/root"
    let fm = FileManager.default
    try? fm.removeItem(atPath: base)
    try! fm.createDirectory(atPath: root, withIntermediateDirectories: true)
    try! Data("SECRET".utf8).write(to: URL(fileURLWithPath: base + "/secret"))
    func pyramid(_ id: String, _ w: Int, _ h: Int, _ format: TileFormat, skip: TileCoordinate? = nil) {
        let g = try! PyramidGeometry(width: w, height: h)
        let m = PyramidManifest(id: PyramidID(id)!, geometry: g, format: format,
                                thumbnail: .init(file: "thumbnail.\(format.fileExtension)", width: 256, height: 179))
        let dir = root + "/" + id
        for l in g.levels {
            for r in 0..<l.rows {
                for c in 0..<l.columns where TileCoordinate(level: l.level, row: r, column: c) != skip {
                    let t = TileCoordinate(level: l.level, row: r, column: c)
                    let path = dir + "/" + m.tilePath(t)
                    try! fm.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                    let bytes = fakeFile(format, "tile \(t)")
                    storedFiles.insert(bytes)
                    try! Data(bytes).write(to: URL(fileURLWithPath: path))
                }
            }
        }
        let thumbnail = fakeFile(format, "thumb")
        storedFiles.insert(thumbnail)
        try! Data(thumbnail).write(to: URL(fileURLWithPath: dir + "/thumbnail.\(format.fileExtension)"))
        try! JSONEncoder().encode(m).write(to: URL(fileURLWithPath: dir + "/pyramid.json"))
    }
    pyramid("a", 1000, 700, .png)
    pyramid("j.v2", 300, 300, .jpeg, skip: TileCoordinate(level: 1, row: 1, column: 1))
    try! Data().write(to: URL(fileURLWithPath: root + "/j.v2/1/0/0.jpg"))
    try! fm.createDirectory(atPath: root + "/empty", withIntermediateDirectories: true)
    try! fm.createDirectory(atPath: root + "/bad", withIntermediateDirectories: true)
    try! Data("{\"id\": \"bad\", \"width\": -1".utf8).write(to: URL(fileURLWithPath: root + "/bad/pyramid.json"))
    var configuration = ServerConfiguration(root: root)
    configuration.cacheBytes = 1 << 20
    return Router(store: TileStore(configuration: configuration))
}()

let allowed: Set<Int> = [200, 304, 400, 404, 500]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0, size <= 4096 else { return 0 }
    var request = Array("GET ".utf8)
    request += UnsafeRawBufferPointer(start: data, count: size)
    request += Array(" HTTP/1.1\r\nHost: fuzz\r\n\r\n".utf8)
    var parser = HTTPRequestParser()
    let result = request.withUnsafeBytes { parser.parse($0) }
    guard case .complete = result.status else { return 0 }
    check(router.respond(to: parser.head))
    return 0
}

/// What every answer must satisfy, through header wrappers and blocking work (run here).
func check(_ response: HTTPResponse) {
    switch response {
    case .prepared(let p):
        // A file under ROOT served as stored, a JSON or DZI XML document, or one of the
        // viewer's compiled-in assets.
        precondition(!p.body.starts(with: Array("SECRET".utf8)), "a file outside ROOT was served")
        precondition(storedFiles.contains(p.body)
                     || p.body.first == UInt8(ascii: "{") || p.body.starts(with: Array("<?xml".utf8))
                     || viewerAssets.contains(p.body), "unexpected body")
    case let .bytes(status, _, body, _):
        precondition(allowed.contains(status), "status \(status)")
        precondition(!body.starts(with: Array("SECRET".utf8)))
    case .error(let e):
        precondition(allowed.contains(e.status), "error status \(e.status): \(e.message)")
        // 500 only for the corrupt manifest, the empty tile, and drawings (the tiles are
        // not images); never a path or a library's message.
        precondition(e.status != 500 || e.message.contains("'bad'") || e.message.contains("tile 1/0/0 of image 'j.v2'")
                     || e.message.hasSuffix("cannot be drawn; the server log has details"), "500 for a good pyramid: \(e.message)")
        precondition(!e.message.contains(base), "a server path in an error: \(e.message)")
    case let .withHeaders(_, inner):
        check(inner)
    case .blocking(_, let make):
        check(make())
    }
}

/// The viewer's page, style sheet and script, as the router serves them.
let viewerAssets: Set<[UInt8]> = {
    var bodies: Set<[UInt8]> = []
    for path in ["/", "/viewer/viewer.css", "/viewer/viewer.js"] {
        var parser = HTTPRequestParser()
        let request = Array("GET \(path) HTTP/1.1\r\nHost: fuzz\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { parser.parse($0) }
        if case .prepared(let p) = router.respond(to: parser.head) { bodies.insert(p.body) }
    }
    precondition(bodies.count == 3, "the viewer's assets were not found")
    return bodies
}()
