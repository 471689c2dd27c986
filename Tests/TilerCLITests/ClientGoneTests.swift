import Foundation
import Testing
import TilerTestSupport
#if canImport(Glibc)
    import Glibc
#endif

/// Clients that leave while their answer is being sent: the server carries on.
@Suite(.serialized) struct ClientGoneTests {
    /// A client asks for a large tile and closes its socket at once (a tab closed while
    /// tiles load; wrk at the end of a run). The server's write then meets the reset the
    /// client's kernel sends back, and `sendfile` (unlike `sendmsg`, which takes
    /// MSG_NOSIGNAL) raises SIGPIPE: unless the server ignores it, the process dies.
    /// `--cache-mb 0` sends every tile from its open file with `sendfile`.
    @Test func clientsClosingMidAnswerDoNotStopTheServer() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let input = scratch.path("noise.v")
        // Three bands of noise: a 256 px PNG tile of about 200 KB.
        for band in 0..<3 { try vips("gaussnoise", scratch.path("band\(band).v"), "512", "512") }
        try vips("bandjoin", (0..<3).map { scratch.path("band\($0).v") }.joined(separator: " "), scratch.path("noise-f.v"))
        try vips("cast", scratch.path("noise-f.v"), input, "uchar")
        let root = scratch.path("tiles")
        let cut = try run(try tilerBinary(), ["cut", input, "--format", "png", "-o", root, "--quiet"])
        #expect(cut.status == 0, "\(cut.stderr)")
        let tile = "/images/noise/tiles/1/0/0.png"
        let size = try FileManager.default.attributesOfItem(atPath: "\(root)/noise/1/0/0.png")[.size] as? Int ?? 0
        #expect(size > 128 * 1024, "the tile must be large enough to take more than one write: \(size) bytes")

        let server = try ServeProcess([root, "--port", "0", "--threads", "1", "--cache-mb", "0"])
        defer { server.stop() }
        for _ in 0..<2 { #expect(try fetch(server.port, tile).status == 200) }  // now open, sent with sendfile

        let request = Array("GET \(tile) HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        for round in 0..<20 {
            for _ in 0..<16 {
                let client = try RawHTTPClient(port: server.port)
                try client.send(request + request + request + request)
            }  // each client closes (deinit) without reading
            let health = try? fetch(server.port, "/healthz")
            guard server.process.isRunning, health?.status == 200 else {
                server.process.waitUntilExit()
                Issue.record(
                    "tiler serve stopped in round \(round): \(server.process.terminationReason == .uncaughtSignal ? "signal" : "exit status") \(server.process.terminationStatus)"
                )
                return
            }
        }
        #expect(try fetch(server.port, tile).body.count == size)
    }
}
