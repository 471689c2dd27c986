// Shared by the DeepZoom, IIIF and viewer tests: pyramids cut once per test run into a
// temporary root, a live server on a loopback port, and small HTTP helpers.
import Foundation
import Testing
import TilerCore
import TilerHTTP
import TilerImaging
import TilerTestSupport
@testable import TilerServer

/// The repository's root folder (the checkout).
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// The IIIF validator's test image: 1000 × 1000, 10 × 10 squares of known colours.
enum ValidatorImage {
    static let id = "67352ccc-d1b0-11e1-89ae-279075081939"
    static var path: String {
        repositoryRoot.appendingPathComponent("Tests/Fixtures/\(id).png").path
    }
}

/// Pyramids for the route and browser tests, cut once per process:
/// - the validator's image (PNG tiles);
/// - `panorama`: 2400 × 600, JPEG tiles (wraps sideways in the viewer);
/// - `odd-123`: 1537 × 997, WebP tiles, and `tiny`: 3 × 2, PNG;
/// - `film.dzi`: a pyramid whose id itself ends in `.dzi`.
enum ViewerPyramids {
    static let root: Result<String, Error> = Result {
        let root = try ProcessFolders.fresh(named: "viewer-tests")
        let sources = root.appendingPathComponent("sources")
        try FileManager.default.createDirectory(at: sources, withIntermediateDirectories: true)
        func cut(_ input: String, _ id: String, _ format: TileFormat) throws {
            _ = try PyramidCutter(root: root, options: CutOptions(format: format)).cut(input, id: PyramidID(id)!)
        }
        try cut(ValidatorImage.path, ValidatorImage.id, .png)
        guard let vips = findExecutable(["vips"]) else { throw ClientError("the vips command is missing: run scripts/install-deps") }
        for (name, w, h, format) in [
            ("panorama", 2400, 600, TileFormat.jpeg), ("odd-123", 1537, 997, .webp),
            ("tiny", 3, 2, .png), ("film.dzi", 300, 200, .png),
        ] {
            let file = sources.appendingPathComponent("\(name).png").path
            let step = { (i: Int) in sources.appendingPathComponent("\(name)-\(i).v").path }
            // x and y (mod 256) as red and green, blue constant.
            try runTool(vips, ["xyz", step(0), "\(w)", "\(h)"])
            try runTool(vips, ["remainder_const", step(0), step(1), "256"])
            try runTool(vips, ["cast", step(1), step(2), "uchar"])
            try runTool(vips, ["bandjoin_const", step(2), file, "128"])
            try cut(file, name, format)
        }
        try FileManager.default.removeItem(at: sources)
        return root.path
    }

    /// The one tile format a `--sources` server makes these pictures in: their pyramids
    /// have three (PNG, JPEG, WebP), a `--sources` server makes one (`--sources-format`).
    static let sourcesFormat = TileFormat.png

    /// A server over the root on a free loopback port, started once per process; and
    /// one over the same pyramids as archives, as archives in the S3 test server, and as
    /// source files (pyramidal TIFF, JPEG) served on the fly.
    private static let folderServer: Result<Served, Error> = Result { try start(.folders) }
    private static let archiveServer: Result<Served, Error> = Result { try start(.archives) }
    private static let bucketServer: Result<Served, Error> = Result { try start(.bucket) }
    private static let tiffSourcesServer: Result<Served, Error> = Result { try start(.sources(.pyramidalTIFF)) }
    private static let jpegSourcesServer: Result<Served, Error> = Result { try start(.sources(.jpeg)) }

    /// A running server and the copy of the pyramids it serves, kept as long as the process.
    struct Served: Sendable {
        let server: TileServer
        let root: ServedRoot
    }

    private static func start(_ kind: RootKind) throws -> Served {
        var configuration = ServerConfiguration(root: try root.get())
        configuration.http.port = 0
        configuration.http.threads = 2
        // Deeper than a photo's 200 %: these tests zoom past the image's own pixels (a
        // double-click doubling the scale there); the cap itself is `LightboxTests`'.
        configuration.viewerMaxZoomPercent = 800
        let served = try ServedRoot(kind, folders: try root.get(), sourcesFormat: sourcesFormat)
        served.configure(&configuration)
        let server = TileServer(configuration: configuration)
        try server.start()
        ProcessFolders.beforeRemoving { server.stop() }
        return Served(server: server, root: served)
    }

    private static func served(_ kind: RootKind) throws -> Served {
        switch kind {
        case .folders: try folderServer.get()
        case .archives: try archiveServer.get()
        case .bucket: try bucketServer.get()
        case .sources(.pyramidalTIFF): try tiffSourcesServer.get()
        case .sources(.jpeg): try jpegSourcesServer.get()
        case let .sources(other): throw ClientError("no viewer server over \(other) sources")
        }
    }

    static func port(_ kind: RootKind = .folders) throws -> Int { try served(kind).server.port }

    /// What the server of `kind` serves: its files and manifests as a client should get them.
    static func expected(_ kind: RootKind) throws -> ServedRoot { try served(kind).root }
}

/// Runs a tool and fails with its output unless it exits 0.
@discardableResult
func runTool(_ path: String, _ arguments: [String], timeout: Double = 300) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    guard process.terminationStatus == 0 else {
        throw ClientError("\(path) \(arguments.joined(separator: " ")) exited \(process.terminationStatus): \(text.suffix(4000))")
    }
    return text
}

/// One request with any method, body and headers (Host is sent unless given), on a fresh
/// connection.
func request(
    _ port: Int, _ method: String, _ path: String, body: [UInt8] = [], headers: [String] = [],
    timeout: Double = 30
) throws -> RawResponse {
    let c = try RawHTTPClient(port: port, timeout: timeout)
    var text = "\(method) \(path) HTTP/1.1\r\nConnection: close\r\n"
    if !headers.contains(where: { $0.lowercased().hasPrefix("host:") }) { text += "Host: 127.0.0.1:\(port)\r\n" }
    for h in headers { text += h + "\r\n" }
    if method != "GET" && method != "HEAD" || !body.isEmpty {
        text += "Content-Type: application/json; charset=utf-8\r\nContent-Length: \(body.count)\r\n"
    }
    text += "\r\n"
    try c.send(Array(text.utf8) + body)
    return try c.readResponse(bodyless: method == "HEAD")
}

/// The first executable of `names` on PATH (or at an absolute path).
func findExecutable(_ names: [String]) -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
    for name in names {
        if name.hasPrefix("/") { if FileManager.default.isExecutableFile(atPath: name) { return name } else { continue } }
        for dir in path.split(separator: ":") {
            let candidate = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
    }
    return nil
}

/// Where tests leave files worth looking at (screenshots): `.build/test-artifacts/`.
let testArtifacts: URL = {
    let url = repositoryRoot.appendingPathComponent(".build/test-artifacts")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}()
