import Foundation
import TilerCore
import TilerHTTP
import TilerServer

/// A ROOT made once per process: a real pyramid `a` (1000 × 700, PNG, every tile file a
/// few bytes), a pyramid `j` with JPEG tiles and a missing tile, a folder without a
/// manifest, a folder with a corrupt manifest, and a file outside ROOT that no request may
/// reach (`secret`, next to ROOT).
let router: Router = {
    let base = NSTemporaryDirectory() + "tiler-fuzz-router-\(getpid())"
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
                    try! Data("tile \(t)".utf8).write(to: URL(fileURLWithPath: path))
                }
            }
        }
        try! Data("thumb".utf8).write(to: URL(fileURLWithPath: dir + "/thumbnail.\(format.fileExtension)"))
        try! JSONEncoder().encode(m).write(to: URL(fileURLWithPath: dir + "/pyramid.json"))
    }
    pyramid("a", 1000, 700, .png)
    pyramid("j.v2", 300, 300, .jpeg, skip: TileCoordinate(level: 1, row: 1, column: 1))
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
        // Every file under ROOT that a route may return starts with "tile", "thumb" or "{";
        // documents are JSON or DZI XML; the rest are the viewer's compiled-in assets.
        precondition(!p.body.starts(with: Array("SECRET".utf8)), "a file outside ROOT was served")
        precondition(p.body.starts(with: Array("tile".utf8)) || p.body.starts(with: Array("thumb".utf8))
                     || p.body.first == UInt8(ascii: "{") || p.body.starts(with: Array("<?xml".utf8))
                     || viewerAssets.contains(p.body), "unexpected body")
    case let .bytes(status, _, body, _):
        precondition(allowed.contains(status), "status \(status)")
        precondition(!body.starts(with: Array("SECRET".utf8)))
    case .error(let e):
        precondition(allowed.contains(e.status), "error status \(e.status): \(e.message)")
        precondition(e.status != 500 || e.message.contains("'bad'"), "500 for a good pyramid: \(e.message)")
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
