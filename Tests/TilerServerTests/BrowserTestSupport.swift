// Shared by the browser tests: starting Chromium, reading the page's state, serving test
// pages, and running nginx as a reverse proxy.
import Foundation
import Testing
import TilerCore
import TilerHTTP
import TilerImaging
import TilerTestSupport
@testable import TilerServer
#if canImport(Glibc)
    import Glibc
#endif

/// Headless Chromium of `width × height` CSS pixels through chromedriver, or nil (with
/// an issue recorded) when they are not installed.
func startBrowser(width: Int = 900, height: Int = 700, sourceLocation: SourceLocation = #_sourceLocation) throws -> WebDriver? {
    guard let chromium = findExecutable(["chromium", "chromium-browser", "google-chrome"]),
        let chromedriver = findExecutable(["chromedriver", "/usr/lib/chromium/chromedriver"])
    else {
        Issue.record(
            "chromium and chromedriver are missing: run scripts/install-deps test (apt: chromium chromium-driver)",
            sourceLocation: sourceLocation)
        return nil
    }
    return try WebDriver(chromedriver: chromedriver, chromium: chromium, width: width, height: height)
}

extension WebDriver {
    /// Fails the test if the page collected any script error (`window.tilerErrors`, or
    /// `window.pageErrors` on the tests' own pages).
    func expectNoScriptErrors(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let errors = try execute("return window.tilerErrors || window.pageErrors || null") as? [Any]
        #expect(errors != nil && errors!.isEmpty, "script errors: \(String(describing: errors))", sourceLocation: sourceLocation)
    }

    /// An element's rectangle in CSS pixels of the viewport: x, y, width, height.
    func rect(_ css: String) throws -> Rect {
        let value =
            try execute(
                """
                const e = document.querySelector(arguments[0]); if (!e) return null;
                const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]
                """, [css]) as? [Double]
        guard let value, value.count == 4 else { throw ClientError("no element \(css)") }
        return Rect(x: value[0], y: value[1], width: value[2], height: value[3])
    }

    /// The viewport's size in CSS pixels.
    func viewportSize() throws -> (width: Double, height: Double) {
        let v = try execute("return [document.documentElement.clientWidth, document.documentElement.clientHeight]") as? [Double]
        guard let v, v.count == 2 else { throw ClientError("no viewport size") }
        return (v[0], v[1])
    }
}

struct Rect: Equatable, CustomStringConvertible {
    var x, y, width, height: Double
    var description: String { "(\(x), \(y), \(width) × \(height))" }

    /// Whether the rectangle has an area and lies wholly inside `0…width × 0…height`.
    func isVisible(within size: (width: Double, height: Double)) -> Bool {
        width > 0 && height > 0 && x >= 0 && y >= 0 && x + width <= size.width + 0.5 && y + height <= size.height + 0.5
    }
}

/// Fixed files over HTTP, for pages the tests write (Leaflet, OpenSeadragon): the
/// repository's own HTTP server with a handler that serves a dictionary.
final class StaticSite: Sendable {
    let server: HTTPServer
    var port: Int { server.port }

    init(_ files: [String: (body: [UInt8], contentType: String)]) throws {
        var configuration = HTTPConfiguration()
        configuration.port = 0
        configuration.threads = 1
        server = HTTPServer(configuration: configuration, handler: Handler(files: files))
        try server.start()
    }

    func stop() {
        server.stop()
        server.wait()
    }

    private struct Handler: HTTPHandler {
        let files: [String: (body: [UInt8], contentType: String)]
        func respond(to head: HTTPRequestHead) -> HTTPResponse {
            let path = String(decoding: head.target.prefix(head.pathLength), as: UTF8.self)
            guard let file = files[path] else { return .error(HTTPError(404, "no file \(path)")) }
            return .bytes(status: 200, contentType: file.contentType, body: file.body, cacheControl: "no-cache")
        }
    }
}

/// A `width × height` PNG whose pixel (x, y) is (x mod 256, y mod 256, 128): every
/// pixel of a row or column says where it is, so a stretched tile shows at once.
func writeCoordinateImage(_ path: String, width: Int, height: Int) throws {
    guard let vips = findExecutable(["vips"]) else { throw ClientError("the vips command is missing: run scripts/install-deps") }
    let step = { (i: Int) in "\(path)-\(i).v" }
    try runTool(vips, ["xyz", step(0), "\(width)", "\(height)"])
    try runTool(vips, ["remainder_const", step(0), step(1), "256"])
    try runTool(vips, ["cast", step(1), step(2), "uchar"])
    try runTool(vips, ["bandjoin_const", step(2), path, "128"])
    for i in 0..<3 { try? FileManager.default.removeItem(atPath: step(i)) }
}

/// A temporary folder, removed by `remove()`.
func temporaryFolder(_ name: String) throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("tiler-\(name)-\(getpid())-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// nginx in the foreground on a loopback port, with the configuration the test gives
/// (the `http { server { … } }` part), logging every request to `accessLog`.
final class Nginx {
    let port: Int
    let folder: URL
    private let process: Process
    var accessLog: URL { folder.appendingPathComponent("access.log") }

    /// Starts nginx with `locations` inside a `server` listening on 127.0.0.1:`port`, and
    /// waits until it answers.
    init(port: Int, locations: String) throws {
        guard let nginx = findExecutable(["nginx", "/usr/sbin/nginx"]) else {
            throw ClientError("nginx is missing: run scripts/install-deps test (apt: nginx)")
        }
        self.port = port
        folder = try temporaryFolder("nginx")
        let f = folder.path
        // One process, in the foreground, as the user running the tests: nothing to clean
        // up but this process, and no worker that must read the test's files as another user.
        let configuration = """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(f)/nginx.pid;
            error_log \(f)/error.log info;
            events { worker_connections 256; }
            http {
                log_format tiler '$status $request_method $request_uri';
                access_log \(f)/access.log tiler;
                client_body_temp_path \(f)/client_body;
                proxy_temp_path \(f)/proxy;
                fastcgi_temp_path \(f)/fastcgi;
                uwsgi_temp_path \(f)/uwsgi;
                scgi_temp_path \(f)/scgi;
                types { text/html html; text/javascript js; text/css css; }
                server {
                    listen 127.0.0.1:\(port);
                    location = /nginx-is-up { access_log off; return 204; }
            \(locations)
                }
            }
            """
        try configuration.write(to: folder.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: nginx)
        process.arguments = ["-p", f, "-c", "\(f)/nginx.conf", "-e", "\(f)/error.log"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let started = eventually(within: 20) {
            !process.isRunning || (try? request(port, "GET", "/nginx-is-up")) != nil
        }
        guard started, process.isRunning else {
            let log = (try? String(contentsOf: folder.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
            stop()
            throw ClientError("nginx did not start on port \(port): \(log.suffix(2000))")
        }
    }

    /// The access log's lines: `STATUS METHOD URI`.
    func requests() throws -> [(status: Int, method: String, uri: String)] {
        let text = (try? String(contentsOf: accessLog, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ", maxSplits: 2)
            guard parts.count == 3, let status = Int(parts[0]) else { return nil }
            return (status, String(parts[1]), String(parts[2]))
        }
    }

    /// The error log's lines about upstreams and failures (nginx's reason for a 502 or
    /// 504: refused, reset, closed early, timed out), the last `limit` of them.
    func upstreamErrors(limit: Int = 20) -> String {
        let text = (try? String(contentsOf: folder.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
        let lines = text.split(separator: "\n").filter { $0.contains("[error]") || $0.contains("[crit]") || $0.contains("upstream") }
        return lines.suffix(limit).joined(separator: "\n")
    }

    func stop() {
        if process.isRunning {
            process.terminate()  // SIGTERM: nginx's fast shutdown
            if !eventually(within: 10, { !process.isRunning }) { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
        // Kept for a look after a failure.
        for log in ["access.log", "error.log"] {
            let kept = testArtifacts.appendingPathComponent("nginx-\(log)")
            try? FileManager.default.removeItem(at: kept)
            try? FileManager.default.copyItem(at: folder.appendingPathComponent(log), to: kept)
        }
        try? FileManager.default.removeItem(at: folder)
    }
}
