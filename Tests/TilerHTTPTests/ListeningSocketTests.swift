import Glibc
import Testing
import TilerSystem
import TilerTestSupport
@testable import TilerHTTP

@Suite struct ListeningSocketTests {
    /// Every loop binds the port with SO_REUSEPORT; a second server on a port that is
    /// already served must fail loudly instead of silently taking half the traffic.
    @Test func aSecondServerOnTheSamePortIsRefused() throws {
        try withServer { port, _ in
            var config = HTTPConfiguration()
            config.port = port
            config.threads = 2
            let second = HTTPServer(configuration: config, handler: TestHandler())
            do throws(SocketError) {
                try second.start()
                Issue.record("a second server started on port \(port), which is already served")
                second.stop()
                second.wait()
            } catch {
                #expect(error.errno == EADDRINUSE)
                #expect(error.description.contains("\(port)"))
            }
        }
    }

    /// A server that stopped frees its port: a new server binds the same port at once
    /// and serves it, and once that one stops too, the port is free.
    @Test func aFreedPortCanBeServedAgain() throws {
        let port = try freePort()
        var config = HTTPConfiguration()
        config.port = port
        config.threads = 2
        for round in 0..<2 {
            let server = HTTPServer(configuration: config, handler: TestHandler())
            try server.start()
            #expect(server.port == port)
            #expect(try fetch(port, "/round/\(round)").text == "/round/\(round)")
            server.stop()
            server.wait()
        }
        #expect(throws: Never.self) { try ListeningSocket.checkPortIsFree(host: "127.0.0.1", port: port) }
    }
}
