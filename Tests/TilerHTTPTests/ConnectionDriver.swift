import Foundation
import Glibc
import Testing
import TilerTestSupport
@testable import TilerHTTP

/// Plays the event loop for one connection, against a simulated socket and a clock that
/// moves only when the test says: every timeout is tested at its exact edge, without
/// waiting for it.
struct ConnectionDriver {
    var machine: ConnectionStateMachine
    var time = ServerTime(milliseconds: 1_000_000, wallSeconds: 1_700_000_000)
    /// The handler: the response to each GET or HEAD.
    var handler: (HTTPRequestHead) -> HTTPResponse = { head in
        .bytes(status: 200, contentType: "text/plain", body: head.target, cacheControl: nil)
    }
    /// Targets the handler was asked for, in order.
    var handled: [String] = []
    /// Bytes the socket takes before it blocks; nil: as many as offered.
    var room: Int?
    /// What the client has received.
    var received: [UInt8] = []
    /// Work handed to the pool and not yet finished.
    var pool: [@Sendable () -> HTTPResponse] = []
    /// Whether the pool takes work (false: its queue is full).
    var poolTakesWork = true
    /// What `cancelWork` finds: true, the job was still queued and is dropped.
    var jobStillQueued = true
    var writeShut = false
    var closed = false
    /// The number of write system calls made.
    var writes = 0

    init(_ configure: (inout HTTPConfiguration) -> Void = { _ in }) {
        var configuration = HTTPConfiguration()
        configure(&configuration)
        let settings = ConnectionSettings(configuration: configuration, recordsAnswers: true)
        machine = ConnectionStateMachine(settings: settings, at: 1_000_000)
    }

    var now: Int64 { time.milliseconds }

    // MARK: Events

    mutating func send(_ text: String) { send(Array(text.utf8)) }

    mutating func send(_ bytes: [UInt8]) {
        let action = bytes.withUnsafeBytes { machine.received($0, at: time) }
        perform(action)
    }

    mutating func sendEndOfInput() { perform(machine.receivedEndOfInput(at: time)) }

    mutating func hangUp() { perform(machine.peerClosedInput()) }

    /// The clock moves on by `milliseconds`, and the loop's sweep looks at the connection;
    /// `unreadInput`: input has arrived on the socket that the loop has not read yet.
    mutating func advance(_ milliseconds: Int64, unreadInput: Bool = false) {
        time = ServerTime(milliseconds: now + milliseconds, date: time.date)
        perform(machine.tick(at: time, hasUnreadInput: { unreadInput }))
    }

    /// The client reads: the socket has room for `bytes` more, and epoll says writable.
    mutating func clientReads(_ bytes: Int? = nil) {
        room = bytes
        if machine.interest.contains(.write) { perform(.write) }
    }

    /// The pool runs the oldest piece of work and hands its answer back.
    mutating func finishWork() {
        let make = pool.removeFirst()
        perform(machine.workFinished(make(), at: time))
    }

    mutating func stop(unreadInput: Bool = false) {
        perform(machine.serverStopping(hasUnreadInput: { unreadInput }))
    }

    mutating func endGracePeriod() { perform(machine.gracePeriodEnded(at: time)) }

    // MARK: The loop's side

    mutating func perform(_ first: ConnectionAction) {
        var action = first
        while true {
            switch action {
            case .none:
                return
            case .handle:
                let head = machine.requestHead
                handled.append(String(decoding: head.target, as: UTF8.self))
                action = machine.respond(handler(head), at: time)
            case .submit(let kind, let make):
                if poolTakesWork {
                    pool.append(make)
                    action = machine.submitted()
                } else {
                    action = machine.queueFull(kind, at: time)
                }
            case .write:
                action = write()
            case .cancelWork:
                action = machine.workCancelled(jobStillQueued)
            case .shutWrite:
                writeShut = true
                return
            case .close:
                closed = true
                return
            }
        }
    }

    /// One write: what the socket has room for, of the leading bytes or file range.
    private mutating func write() -> ConnectionAction {
        writes += 1
        let limit = room ?? Int.max
        guard limit > 0 else { return machine.writeWouldBlock(at: time) }
        var chunk: [UInt8] = []
        switch machine.output.nextWrite {
        case nil:
            return machine.wrote(0, at: time)
        case .bytes:
            machine.output.withLeadingBytes { vectors in
                for v in vectors {
                    let n = min(v.iov_len, limit - chunk.count)
                    chunk += UnsafeRawBufferPointer(start: v.iov_base, count: n)
                    if chunk.count == limit { break }
                }
            }
        case let .file(file, offset, count):
            chunk = [UInt8](repeating: 0, count: min(count, limit))
            let n = chunk.withUnsafeMutableBytes { pread(file.rawValue, $0.baseAddress, $0.count, off_t(offset)) }
            guard n > 0 else { return machine.writeFailed() }
            chunk.removeLast(chunk.count - n)
        }
        if room != nil { room! -= chunk.count }
        received += chunk
        return machine.wrote(chunk.count, at: time)
    }

    // MARK: Reading what the client received

    /// Takes the next response off what the client received (nil if none is complete).
    /// `bodyless`: the answer to HEAD, whose Content-Length announces a body not sent.
    mutating func nextResponse(bodyless: Bool = false) -> RawResponse? {
        guard let end = received.firstRange(of: Array("\r\n\r\n".utf8)) else { return nil }
        let lines = String(decoding: received[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let status = Int(lines[0].split(separator: " ")[1]) ?? 0
        let headers = lines.dropFirst().map { line -> (name: String, value: String) in
            let parts = line.split(separator: ":", maxSplits: 1)
            return (String(parts[0]), parts[1].trimmingCharacters(in: .whitespaces))
        }
        var response = RawResponse(status: status, headers: headers, body: [])
        let length = bodyless || status == 304 || status == 204 ? 0 : Int(response.header("Content-Length") ?? "0") ?? 0
        guard received.count >= end.upperBound + length else { return nil }
        response.body = Array(received[end.upperBound..<(end.upperBound + length)])
        received.removeFirst(end.upperBound + length)
        return response
    }

    var state: ConnectionStateMachine.State { machine.state }
}

extension ConnectionDriver: CustomTestStringConvertible {
    var testDescription: String {
        "connection \(state.name), \(received.count) bytes received, handled \(handled)"
    }
}

extension ConnectionStateMachine.State {
    var name: String {
        switch self {
        case .readingHead: "readingHead"
        case .waitingOnPool: "waitingOnPool"
        case .writing: "writing"
        case .draining: "draining"
        case .lingering: "lingering"
        case .closed: "closed"
        }
    }
}

/// A GET request for `target`, with `headers` (each line ending in CRLF) after its Host.
func get(_ target: String, _ headers: String = "") -> String {
    "GET \(target) HTTP/1.1\r\nHost: x\r\n\(headers)\r\n"
}
