import Foundation
import TilerSystem
import TilerTestSupport
@testable import TilerHTTP

/// A handler that answers `/file` with a prepared response, `/big` with 3 MB, and echoes
/// every other target as the body.
struct TestHandler: HTTPHandler {
    static let file = PreparedResponse(
        body: Array("file body".utf8), contentType: "text/plain", etag: "\"v1\"",
        lastModified: 1_000_000_000, cacheControl: "public, max-age=60")
    static let big = PreparedResponse(
        body: (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 7) },
        contentType: "application/octet-stream", etag: nil, lastModified: nil, cacheControl: nil)

    static let huge = PreparedResponse(
        body: [UInt8](repeating: 7, count: 64 << 20), contentType: "application/octet-stream",
        etag: nil, lastModified: nil, cacheControl: nil)

    func respond(to head: HTTPRequestHead) -> HTTPResponse {
        let target = String(decoding: head.target, as: UTF8.self)
        switch target {
        case "/file": return .prepared(Self.file)
        case "/big": return .prepared(Self.big)
        case "/huge": return .prepared(Self.huge)
        case "/missing": return .error(HTTPError(404, "no such thing"))
        case "/slowfile":
            return .withHeaders(
                [("X-Made", "on the pool")],
                .blocking {
                    usleep(100_000)
                    return .prepared(Self.file)
                })
        case _ where target.hasPrefix("/slow/"):
            // `/slow/MS`: made on the blocking pool after MS milliseconds.
            let ms = UInt32(target.dropFirst("/slow/".count)) ?? 0
            return .blocking {
                usleep(ms * 1000)
                return .bytes(status: 200, contentType: "text/plain", body: Array(target.utf8), cacheControl: nil)
            }
        case _ where target.hasPrefix("/hold/"):
            // `/hold/NAME`: holds the event loop's thread itself at gate NAME (no real
            // handler may do this; tests use it to order events deterministically).
            Gates.shared[String(target.dropFirst("/hold/".count))].pass()
            return .bytes(status: 200, contentType: "text/plain", body: Array(target.utf8), cacheControl: nil)
        case _ where target.hasPrefix("/render/") || target.hasPrefix("/read/"):
            // `/render/NAME`, `/read/NAME`: made in that lane of the pool, once gate NAME
            // opens (see `Gates`).
            let kind: BlockingKind = target.hasPrefix("/read/") ? .read : .render
            let name = String(target.split(separator: "/").last ?? "")
            return .blocking(kind) {
                Gates.shared[name].pass()
                return .bytes(status: 200, contentType: "text/plain", body: Array(target.utf8), cacheControl: nil)
            }
        default: return .bytes(status: 200, contentType: "text/plain", body: Array(target.utf8), cacheControl: nil)
        }
    }
}

func withServer(
    clock: any ServerClock = SystemClock.system, _ configure: (inout HTTPConfiguration) -> Void = { _ in },
    _ body: (Int, HTTPServer) throws -> Void
) throws {
    var config = HTTPConfiguration()
    config.port = 0
    config.threads = 2
    configure(&config)
    let server = HTTPServer(configuration: config, clock: clock, makeHandler: { TestHandler() })
    try server.start()
    defer {
        server.stop()
        server.wait()
    }
    try body(server.port, server)
}

/// Runs `body(i)` on `count` real threads at once and rethrows the first failure.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws {
    let group = DispatchGroup()
    let failures = Failures()
    for i in 0..<count {
        group.enter()
        Thread {
            do { try body(i) } catch { failures.add("\(error)") }
            group.leave()
        }.start()
    }
    group.wait()
    if let first = failures.first { throw first }
}
