// A tiny blocking HTTP/1.1 client on a raw socket, so tests control every byte sent.
import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// Why a test's client (or another helper) could not do its job.
public struct ClientError: Error, CustomStringConvertible {
    public let description: String
    public init(_ d: String) { description = d }
}

/// One parsed response.
public struct RawResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
    public var text: String { String(decoding: body, as: UTF8.self) }
    public var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }
    public var errorMessage: String? { (json["error"] as? [String: Any])?["message"] as? String }
}

/// One connection to a loopback port: requests written byte for byte, responses read
/// and parsed with a deadline.
public final class RawHTTPClient {
    public let fd: Int32
    public let timeout: Double
    private var buffer: [UInt8] = []
    /// Why the last `fill` got nothing.
    private var ending = "closed"

    /// Seconds `fetch` and a client made without a timeout wait for each answer.
    public static let defaultTimeout: Double = 60

    /// `timeout` bounds each wait for the server (a deadline for a hung server, not a
    /// timing: on a loaded 2-core machine making a tile can take more than 10 s).
    public init(port: Int, timeout: Double = RawHTTPClient.defaultTimeout) throws {
        self.timeout = timeout
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ClientError("socket: \(errno)") }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            // No close here: `deinit` runs when an initializer throws after every stored
            // property is set, and closing twice could close another thread's new socket.
            throw ClientError("connect to port \(port): errno \(errno)")
        }
    }

    deinit { Glibc.close(fd) }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    public func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw ClientError("send failed: errno \(errno)") }
            sent += n
        }
    }

    /// Sends a GET (or other method) with a Host header and optional extra header lines.
    public func request(_ path: String, method: String = "GET", headers: [String] = [], version: String = "HTTP/1.1") throws {
        var text = "\(method) \(path) \(version)\r\nHost: 127.0.0.1\r\n"
        for h in headers { text += h + "\r\n" }
        text += "\r\n"
        try send(text)
    }

    /// Reads more bytes into the buffer; false on EOF or error (reset, timeout), with
    /// `ending` saying which.
    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else {
            ending = n == 0 ? "closed" : errno == EAGAIN || errno == EWOULDBLOCK ? "silent for \(timeout) s" : "failed (errno \(errno))"
            return false
        }
        buffer.append(contentsOf: chunk[0..<n])
        return true
    }

    /// Reads one response. `bodyless` for answers to HEAD.
    public func readResponse(bodyless: Bool = false) throws -> RawResponse {
        var headEnd: Int?
        while headEnd == nil {
            if let r = find([13, 10, 13, 10]) { headEnd = r; break }
            guard fill() else { throw ClientError("connection \(ending) before a response head (\(buffer.count) bytes buffered)") }
        }
        let headText = String(decoding: buffer[0..<headEnd!], as: UTF8.self)
        buffer.removeFirst(headEnd! + 4)
        var lines = headText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0] == "HTTP/1.1", let status = Int(parts[1]) else {
            throw ClientError("malformed status line '\(statusLine)'")
        }
        var headers: [(String, String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { throw ClientError("malformed header '\(line)'") }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        var response = RawResponse(status: status, headers: headers, body: [])
        if bodyless || status == 204 || status == 304 { return response }
        guard let lengthText = response.header("Content-Length"), let length = Int(lengthText) else {
            throw ClientError("response \(status) without Content-Length")
        }
        while buffer.count < length {
            guard fill() else { throw ClientError("connection \(ending) inside a body") }
        }
        response.body = Array(buffer[0..<length])
        buffer.removeFirst(length)
        return response
    }

    /// Whether the server closes (EOF or reset) within the receive timeout, discarding data.
    public func waitForClose() -> Bool {
        while true {
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return true }
            if n < 0 { return errno == ECONNRESET }
        }
    }

    private func find(_ needle: [UInt8]) -> Int? {
        guard buffer.count >= needle.count else { return nil }
        for i in 0...(buffer.count - needle.count) where buffer[i] == needle[0] {
            if Array(buffer[i..<(i + needle.count)]) == needle { return i }
        }
        return nil
    }
}

/// One request on a fresh connection.
public func fetch(_ port: Int, _ path: String, method: String = "GET", headers: [String] = []) throws -> RawResponse {
    let c = try RawHTTPClient(port: port)
    try c.request(path, method: method, headers: headers)
    return try c.readResponse(bodyless: method == "HEAD")
}
