import Foundation
import Logging
import Synchronization
import TilerSystem

/// A swift-log handler that writes each record as one JSON object on one line
/// (`tiler serve --log-format json`): `time` (RFC 3339, UTC, milliseconds), `level`,
/// `logger` (the label: `tiler`, `tiler.access`), `message`, then the metadata's fields.
/// Numbers stay numbers where the metadata holds them as numbers (`status`, `bytes`,
/// `duration_ms`), so `jq 'select(.status >= 500)'` works. Writes go to one file
/// descriptor under a lock, whole lines at a time, so lines from several threads never
/// interleave.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    private let label: String
    private let output: Output

    /// Where lines go: a descriptor and the lock that keeps lines whole.
    final class Output: Sendable {
        let descriptor: Int32
        let lock = Mutex(())
        init(descriptor: Int32) { self.descriptor = descriptor }

        func write(_ line: [UInt8]) {
            lock.withLock { _ in
                // Nowhere to report a log that cannot be written.
                try? FileDescriptor(rawValue: descriptor).writeAll(line)
            }
        }
    }

    static let standardError = Output(descriptor: 2)

    /// A handler writing to standard error.
    public static func standardError(label: String) -> JSONLogHandler {
        JSONLogHandler(label: label, output: standardError)
    }

    init(label: String, output: Output) {
        self.label = label
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        output.write(Self.line(event, label: label, handlerMetadata: metadata, date: Date()))
    }

    /// A record made without a logger (the start line, written on stdout), as a line.
    public static func line(message: String, label: String, level: Logger.Level, metadata: Logger.Metadata) -> [UInt8] {
        let event = LogEvent(
            level: level, message: "\(message)", metadata: metadata, source: "tiler", file: #fileID, function: #function,
            line: #line)
        return line(event, label: label, handlerMetadata: [:], date: Date())
    }

    /// The record as one line of JSON, newline included.
    static func line(_ event: LogEvent, label: String, handlerMetadata: Logger.Metadata, date: Date) -> [UInt8] {
        var json = JSONWriter(capacity: 256)
        json.beginObject()
        json.field("time", timestamp(date))
        json.field("level", event.level.rawValue)
        json.field("logger", label)
        json.field("message", event.message.description)
        var fields = handlerMetadata
        if let more = event.metadata { fields.merge(more) { $1 } }
        for key in fields.keys.sorted() where !["time", "level", "logger", "message"].contains(key) {
            json.key(key)
            write(fields[key]!, into: &json)
        }
        json.endObject()
        var bytes = json.bytes
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    private static func write(_ value: Logger.Metadata.Value, into json: inout JSONWriter) {
        switch value {
        case let .string(s): json.value(s)
        case let .stringConvertible(c):
            // Whole numbers stay numbers; anything else is its text.
            if let i = c as? any BinaryInteger, let n = Int(exactly: i) { json.value(n) } else { json.value(c.description) }
        case let .array(values):
            json.beginArray()
            for v in values { write(v, into: &json) }
            json.endArray()
        case let .dictionary(d):
            json.beginObject()
            for key in d.keys.sorted() {
                json.key(key)
                write(d[key]!, into: &json)
            }
            json.endObject()
        }
    }

    /// `2026-11-28T09:30:01.123Z`.
    static func timestamp(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        let milliseconds = Int((date.timeIntervalSince1970 - Double(seconds)) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let ms = milliseconds < 10 ? "00\(milliseconds)" : milliseconds < 100 ? "0\(milliseconds)" : "\(milliseconds)"
        return
            "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(ms)Z"
    }
}
