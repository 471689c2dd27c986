import Foundation
import Testing
import TilerTestSupport
@testable import TilerHTTP
@testable import TilerSystem

@Suite struct HTTPServerTests {
    @Test func keepAliveServesManyRequestsOnOneConnection() throws {
        try withServer { port, _ throws in
            let c = try RawHTTPClient(port: port)
            for i in 0..<200 {
                try c.request("/n/\(i)")
                let r = try c.readResponse()
                #expect(r.status == 200)
                #expect(r.text == "/n/\(i)")
                #expect(r.header("Date") != nil)
                #expect(r.header("Connection") == nil)
            }
        }
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() throws {
        try withServer { port, _ throws in
            let c = try RawHTTPClient(port: port)
            try c.send((0..<100).map { "GET /p/\($0) HTTP/1.1\r\nHost: x\r\n\r\n" }.joined())
            for i in 0..<100 {
                let r = try c.readResponse()
                #expect(r.text == "/p/\(i)")
            }
        }
    }

    /// A response made on the blocking pool holds only its own connection: on a single
    /// event loop, another client is answered 100 times while it is being made.
    @Test func blockingResponseDoesNotStallTheLoop() throws {
        try withServer({ $0.threads = 1 }) { port, _ throws in
            let gate = Gates.unique()
            let slow = try RawHTTPClient(port: port)
            try slow.request("/render/\(gate)")
            #expect(Gates.shared[gate].waitForArrivals(1))
            let other = try RawHTTPClient(port: port)
            for i in 0..<100 {
                try other.request("/o/\(i)")
                #expect(try other.readResponse().text == "/o/\(i)")
            }
            // The slow answer has not arrived (its gate is shut), and then it does.
            var pending = pollfd(fd: slow.fd, events: Int16(POLLIN), revents: 0)
            #expect(poll(&pending, 1, 0) == 0)
            Gates.shared[gate].open()
            #expect(try slow.readResponse().text == "/render/\(gate)")
        }
    }

    /// Requests pipelined behind a blocking one wait for it: answers keep their order.
    @Test func pipelinedRequestsAroundBlockingOnesKeepTheirOrder() throws {
        try withServer { port, _ throws in
            let c = try RawHTTPClient(port: port)
            let paths = ["/a", "/slow/200", "/b", "/slow/1", "/slow/50", "/c", "/missing", "/slowfile", "/d"]
            try c.send(paths.map { "GET \($0) HTTP/1.1\r\nHost: x\r\n\r\n" }.joined())
            for path in paths {
                let r = try c.readResponse()
                switch path {
                case "/missing": #expect(r.status == 404)
                case "/slowfile":
                    #expect(r.text == "file body")
                    #expect(r.header("X-Made") == "on the pool")
                default: #expect(r.text == path)
                }
            }
            // Validators and HEAD work on a response made on the pool too.
            try c.request("/slowfile", headers: ["If-None-Match: \"v1\""])
            let notModified = try c.readResponse(bodyless: true)
            #expect(notModified.status == 304)
            #expect(notModified.header("X-Made") == "on the pool")
            try c.request("/slowfile", method: "HEAD")
            let head = try c.readResponse(bodyless: true)
            #expect(head.status == 200 && head.header("Content-Length") == "9")
            try c.request("/after")
            #expect(try c.readResponse().text == "/after")
        }
    }

    /// A client that leaves while its response is being made costs nothing; a stop
    /// during one still delivers it before the loops exit.
    @Test func blockingResponsesSurviveDisconnectsAndShutdown() throws {
        var config = HTTPConfiguration()
        config.port = 0
        config.threads = 1
        let server = HTTPServer(configuration: config, handler: TestHandler())
        try server.start()
        for _ in 0..<20 {
            let gone = try RawHTTPClient(port: server.port)
            try gone.request("/slow/20")
        }
        let c = try RawHTTPClient(port: server.port)
        try c.request("/slow/1")
        #expect(try c.readResponse().text == "/slow/1")
        let gate = Gates.unique()
        try c.request("/render/\(gate)")
        #expect(Gates.shared[gate].waitForArrivals(1))  // being made now
        server.stop()
        Gates.shared[gate].open()
        let r = try c.readResponse()
        #expect(r.text == "/render/\(gate)")
        #expect(r.header("Connection") == "close")
        server.wait()
    }

    @Test func pipelinedLargeResponsesApplyBackpressureAndArriveWhole() throws {
        try withServer { port, _ throws in
            let c = try RawHTTPClient(port: port)
            try c.send((0..<10).map { _ in "GET /big HTTP/1.1\r\nHost: x\r\n\r\n" }.joined() + "GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
            for _ in 0..<10 {
                let r = try c.readResponse()
                #expect(r.status == 200)
                #expect(r.body == TestHandler.big.body)
            }
            #expect(try c.readResponse().text == "/after")
        }
    }

    @Test func thirtyTwoConcurrentKeepAliveClients() throws {
        try withServer { port, _ throws in
            try onThreads(32) { t in
                let c = try RawHTTPClient(port: port)
                for i in 0..<150 {
                    let path = i % 3 == 0 ? "/file" : "/c/\(t)/\(i)"
                    try c.request(path)
                    let r = try c.readResponse()
                    let expected = path == "/file" ? "file body" : path
                    guard r.status == 200, r.text == expected else {
                        throw ClientError("client \(t) request \(i): \(r.status) '\(r.text)'")
                    }
                }
            }
        }
    }

    @Test func http10ClosesUnlessKeepAliveIsAsked() throws {
        try withServer { port, _ throws in
            let c = try RawHTTPClient(port: port)
            try c.send("GET /old HTTP/1.0\r\n\r\n")
            let r = try c.readResponse()
            #expect(r.status == 200 && r.text == "/old")
            #expect(r.header("Connection") == "close")
            #expect(c.waitForClose())

            let k = try RawHTTPClient(port: port)
            for i in 0..<3 {
                try k.send("GET /k\(i) HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                let r = try k.readResponse()
                #expect(r.text == "/k\(i)")
                #expect(r.header("Connection") == "keep-alive")
            }
        }
    }

    @Test func connectionCloseIsHonoured() throws {
        try withServer { port, _ throws in
            let c = try RawHTTPClient(port: port)
            try c.request("/x", headers: ["Connection: close"])
            #expect(try c.readResponse().header("Connection") == "close")
            #expect(c.waitForClose())
        }
    }

    @Test func headSendsTheSameHeadersWithoutABody() throws {
        try withServer { port, _ throws in
            let c = try RawHTTPClient(port: port)
            try c.request("/file")
            let get = try c.readResponse()
            // HEAD then GET pipelined: if HEAD carried a body the GET would misparse.
            try c.send("HEAD /file HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try c.readResponse(bodyless: true)
            #expect(head.status == 200)
            for name in ["Content-Type", "Content-Length", "ETag", "Last-Modified", "Cache-Control", "Access-Control-Allow-Origin"] {
                #expect(head.header(name) == get.header(name), "\(name)")
            }
            #expect(head.header("Content-Length") == "9")
            #expect(try c.readResponse().text == "/after")
        }
    }

    @Test func optionsIs204WithCORS() throws {
        try withServer { port, _ throws in
            let c = try RawHTTPClient(port: port)
            try c.request("/anything", method: "OPTIONS", headers: ["Origin: http://a.example", "Access-Control-Request-Method: GET"])
            let r = try c.readResponse()
            #expect(r.status == 204)
            #expect(r.header("Access-Control-Allow-Origin") == "*")
            #expect(r.header("Access-Control-Allow-Methods")?.contains("GET") == true)
            #expect(r.header("Content-Length") == nil)
            try c.request("/still")
            #expect(try c.readResponse().text == "/still")
        }
    }

    @Test func corsCanBeConfiguredOrTurnedOff() throws {
        try withServer({ $0.corsAllowOrigin = "https://maps.example" }) { port, _ throws in
            let r = try fetch(port, "/x")
            #expect(r.header("Access-Control-Allow-Origin") == "https://maps.example")
        }
        try withServer({ $0.corsAllowOrigin = nil }) { port, _ throws in
            let r = try fetch(port, "/x")
            #expect(r.header("Access-Control-Allow-Origin") == nil)
        }
    }

    @Test func otherMethodsAre405WithAllow() throws {
        try withServer { port, _ throws in
            let c = try RawHTTPClient(port: port)
            for method in ["POST", "PUT", "DELETE", "PATCH", "BREW"] {
                try c.request("/file", method: method)
                let r = try c.readResponse()
                #expect(r.status == 405)
                #expect(r.header("Allow") == "GET, HEAD, OPTIONS")
                #expect(r.header("Content-Type") == "application/json")
                #expect((r.json["error"] as? [String: Any])?["status"] as? Int == 405)
            }
        }
    }

    @Test func conditionalRequestsGet304() throws {
        try withServer { port, _ throws in
            let c = try RawHTTPClient(port: port)
            func status(_ headers: [String]) throws -> RawResponse {
                try c.request("/file", headers: headers)
                return try c.readResponse()
            }
            let notModified = try status(["If-None-Match: \"v1\""])
            #expect(notModified.status == 304)
            #expect(notModified.header("ETag") == "\"v1\"")
            #expect(notModified.header("Cache-Control") == "public, max-age=60")
            #expect(notModified.body.isEmpty)
            #expect(try status(["If-None-Match: W/\"v1\""]).status == 304)
            #expect(try status(["If-None-Match: \"a\", \"v1\""]).status == 304)
            #expect(try status(["If-None-Match: *"]).status == 304)
            #expect(try status(["If-None-Match: \"v2\""]).status == 200)
            let lastModified = try status([]).header("Last-Modified")!
            #expect(lastModified == "Sun, 09 Sep 2001 01:46:40 GMT")
            #expect(try status(["If-Modified-Since: \(lastModified)"]).status == 304)
            #expect(try status(["If-Modified-Since: Mon, 10 Sep 2001 00:00:00 GMT"]).status == 304)
            #expect(try status(["If-Modified-Since: Sat, 08 Sep 2001 00:00:00 GMT"]).status == 200)
            #expect(try status(["If-Modified-Since: garbage"]).status == 200)
            // If-None-Match wins over If-Modified-Since.
            #expect(try status(["If-None-Match: \"v2\"", "If-Modified-Since: \(lastModified)"]).status == 200)
        }
    }

    @Test func errorsAreJSON() throws {
        try withServer { port, _ throws in
            let r = try fetch(port, "/missing")
            #expect(r.status == 404)
            #expect(r.header("Content-Type") == "application/json")
            #expect(r.text == #"{"error":{"status":404,"message":"no such thing"}}"#)
        }
    }

    /// After each bad request the server still answers a fresh connection.
    func expectStillServing(_ port: Int) throws {
        #expect(try fetch(port, "/alive").text == "/alive")
    }
}
