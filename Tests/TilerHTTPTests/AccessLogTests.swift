import Foundation
import Logging
import Synchronization
import Testing
import TilerTestSupport
@testable import TilerHTTP

/// Keeps every log record.
final class RecordedLog: Sendable {
    private let records = Mutex<[(message: String, metadata: Logger.Metadata)]>([])
    func add(_ message: String, _ metadata: Logger.Metadata) { records.withLock { $0.append((message, metadata)) } }
    var all: [(message: String, metadata: Logger.Metadata)] { records.withLock { $0 } }
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
        let server = HTTPServer(
            configuration: config, handler: TestHandler(),
            accessLog: Logger(label: "test.access") { _ in RecordingHandler(log: recorded) })
        try server.start()
        defer { server.stop(); server.wait() }
        let c = try RawHTTPClient(port: server.port)
        try c.request("/logged")
        _ = try c.readResponse()
        try c.request("/missing", method: "HEAD")
        _ = try c.readResponse(bodyless: true)
        // Made on the blocking pool after 50 ms: its duration counts that time.
        try c.request("/slow/50")
        _ = try c.readResponse()
        #expect(eventually { recorded.all.count == 3 })
        var records = recorded.all
        let slow = records.removeLast()
        #expect(slow.metadata["path"]?.description == "/slow/50")
        // (The loop's clock is CLOCK_MONOTONIC_COARSE: it may lag a few ms at either end.)
        #expect((Double(slow.metadata["duration_ms"]?.description ?? "") ?? 0) >= 40, "\(slow.metadata)")
        #expect(records.count == 2)
        #expect(records.first?.metadata["path"]?.description == "/logged")
        #expect(records.first?.metadata["status"]?.description == "200")
        #expect(records.first?.metadata["method"]?.description == "GET")
        #expect(records.first?.metadata["bytes"]?.description == "7")
        #expect(records.last?.metadata["status"]?.description == "404")
        #expect(records.last?.metadata["method"]?.description == "HEAD")
        // The client's address (this test's socket) and the request's duration.
        for record in records + [slow] {
            let client = record.metadata["client"]?.description ?? ""
            #expect(client.hasPrefix("127.0.0.1:") && Int(client.dropFirst("127.0.0.1:".count)) != nil, "client '\(client)'")
            let duration = Double(record.metadata["duration_ms"]?.description ?? "")
            #expect(duration != nil && duration! >= 0, "duration_ms '\(String(describing: record.metadata["duration_ms"]))'")
        }
    }
}
