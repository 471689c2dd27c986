import Glibc
import Testing
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

    @Test func aFreedPortCanBeServedAgain() throws {
        var freed = 0
        try withServer { port, _ in freed = port }
        var config = HTTPConfiguration()
        config.port = freed
        config.threads = 2
        let again = HTTPServer(configuration: config, handler: TestHandler())
        try again.start()
        again.stop()
        again.wait()
    }
}
