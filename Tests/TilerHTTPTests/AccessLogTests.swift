import Foundation
import Logging
import Testing
@testable import TilerHTTP

/// Keeps every log record.
final class RecordedLog: @unchecked Sendable {
    private let lock = NSLock()
    private var records: [(message: String, metadata: Logger.Metadata)] = []
    func add(_ message: String, _ metadata: Logger.Metadata) { lock.withLock { records.append((message, metadata)) } }
    var all: [(message: String, metadata: Logger.Metadata)] { lock.withLock { records } }
}

struct RecordingHandler: LogHandler {
    let log: RecordedLog
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        log.add(event.message.description, event.metadata ?? [:])
    }
}

@Suite struct AccessLogTests {
    @Test func oneStructuredRecordPerRequest() throws {
        let recorded = RecordedLog()
        var config = HTTPConfiguration()
        config.port = 0
        config.threads = 1
        let server = HTTPServer(configuration: config, handler: TestHandler(),
                                accessLog: Logger(label: "test.access") { _ in RecordingHandler(log: recorded) })
        try server.start()
        defer { server.stop(); server.wait() }
        let c = try RawHTTPClient(port: server.port)
        try c.request("/logged")
        _ = try c.readResponse()
        try c.request("/missing", method: "HEAD")
        _ = try c.readResponse(bodyless: true)
        let records = recorded.all
        #expect(records.count == 2)
        #expect(records.first?.metadata["target"]?.description == "/logged")
        #expect(records.first?.metadata["status"]?.description == "200")
        #expect(records.first?.metadata["method"]?.description == "GET")
        #expect(records.first?.metadata["bytes"]?.description == "7")
        #expect(records.last?.metadata["status"]?.description == "404")
        #expect(records.last?.metadata["method"]?.description == "HEAD")
    }
}
