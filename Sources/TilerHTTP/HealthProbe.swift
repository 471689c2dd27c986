import Glibc
import TilerSystem

/// Why a health check failed, in one line that names the URL and the cause.
public enum HealthcheckError: Error, Sendable, CustomStringConvertible {
    /// The variable that sets the port (`TILER_PORT`) and its value, which is not a port
    /// of any server: the check fails, as it would for a server not answering.
    case badEnvironmentPort(variable: String, value: String)
    case unresolvable(host: String, reason: String)
    case cannotConnect(url: String, reason: String)
    case timedOut(url: String, seconds: Double, while: String)
    case io(url: String, operation: String, reason: String)
    case closedEarly(url: String)
    case notHTTP(url: String, firstLine: String)
    case notOK(url: String, status: Int)

    public var description: String {
        switch self {
        case .badEnvironmentPort(let variable, let value):
            "\(variable) is '\(value)', not a port number between \(HTTPConfiguration.Range.connectablePort.lowerBound) and \(HTTPConfiguration.Range.connectablePort.upperBound)"
        case .unresolvable(let host, let reason):
            "cannot resolve host '\(host)': \(reason)"
        case .cannotConnect(let url, let reason):
            "cannot connect to \(url): \(reason)"
        case .timedOut(let url, let seconds, let phase):
            "\(url) timed out after \(seconds) s while \(phase)"
        case .io(let url, let operation, let reason):
            "\(operation) failed for \(url): \(reason)"
        case .closedEarly(let url):
            "\(url) closed the connection before sending a status line"
        case .notHTTP(let url, let firstLine):
            "\(url) did not answer HTTP: '\(firstLine.prefix(80))'"
        case .notOK(let url, let status):
            "\(url) answered \(status), not 200"
        }
    }
}

/// One `GET /healthz` over a non-blocking TCP socket, bounded by a single deadline that
/// covers name lookup, connecting, sending and reading the status line. The client half
/// of `tiler healthcheck`, the container image's `HEALTHCHECK`: it needs neither curl nor
/// Foundation.
public struct HealthProbe: Sendable {
    /// An IP address or a host name. Default 127.0.0.1.
    public var host: String
    /// Default `HTTPConfiguration.defaultPort`, where `tiler serve` listens by default.
    public var port: Int
    /// Seconds for the whole exchange. Default 3.
    public var timeout: Double

    public init(host: String = "127.0.0.1", port: Int = HTTPConfiguration.defaultPort, timeout: Double = 3) {
        self.host = host
        self.port = port
        self.timeout = timeout
    }

    public var url: String {
        "http://\(authority):\(port)/healthz"
    }

    private var authority: String { host.contains(":") ? "[\(host)]" : host }

    /// The status code of the server's answer.
    public func status() throws(HealthcheckError) -> Int {
        let deadline = ContinuousClock.now + .milliseconds(Int((timeout * 1000).rounded(.up)))
        let socket = try connect(until: deadline)
        defer { socket.close() }
        let request =
            "GET /healthz HTTP/1.1\r\nHost: \(authority):\(port)\r\n"
            + "User-Agent: tiler-healthcheck\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        try send(Array(request.utf8), on: socket, until: deadline)
        return try parseStatus(try readStatusLine(from: socket, until: deadline))
    }

    /// The addresses `host` resolves to, in `getaddrinfo`'s order.
    private func addresses() throws(HealthcheckError) -> [SocketAddress] {
        switch SocketAddress.resolve(host: host, port: port) {
        case .success(let found): found
        case .failure(let reason): throw .unresolvable(host: host, reason: reason.description)
        }
    }

    private func connect(until deadline: ContinuousClock.Instant) throws(HealthcheckError) -> Socket {
        var lastFailure = "no address to try"
        for address in try addresses() {
            let socket: Socket
            do {
                socket = try Socket.tcp(family: address.family)
            } catch {
                lastFailure = "socket: \(reason(error.errno))"
                continue
            }
            let outcome: IOResult<Void>
            do {
                outcome = try socket.connect(to: address)
            } catch {
                lastFailure = reason(error.errno)
                socket.close()
                continue
            }
            if case .wouldBlock = outcome {
                do {
                    try wait(for: Int16(POLLOUT), on: socket, until: deadline, while: "connecting")
                } catch {
                    socket.close()
                    throw error
                }
                let failure: Int32
                do {
                    failure = try socket.pendingError()
                } catch {
                    failure = error.errno
                }
                if failure != 0 {
                    lastFailure = reason(failure)
                    socket.close()
                    continue
                }
            }
            return socket
        }
        throw .cannotConnect(url: url, reason: lastFailure)
    }

    private func send(_ bytes: [UInt8], on socket: Socket, until deadline: ContinuousClock.Instant)
        throws(HealthcheckError)
    {
        var sent = 0
        while sent < bytes.count {
            let attempt = bytes[sent...].withUnsafeBytes { b in Result { () throws(SystemCallError) in try socket.send(b) } }
            let result: IOResult<Int>
            switch attempt {
            case .success(let r): result = r
            case .failure(let error): throw .io(url: url, operation: "send", reason: reason(error.errno))
            }
            switch result {
            case .done(let n): sent += n
            case .wouldBlock: try wait(for: Int16(POLLOUT), on: socket, until: deadline, while: "sending the request")
            }
        }
    }

    /// Reads until the first line ends; a status line longer than 4 KiB is not HTTP.
    private func readStatusLine(from socket: Socket, until deadline: ContinuousClock.Instant)
        throws(HealthcheckError) -> String
    {
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while received.count < 4096 {
            if let end = received.firstIndex(of: UInt8(ascii: "\n")) {
                return String(decoding: received[..<end], as: UTF8.self)
            }
            try wait(for: Int16(POLLIN), on: socket, until: deadline, while: "waiting for the answer")
            let attempt = chunk.withUnsafeMutableBytes { b in Result { () throws(SystemCallError) in try socket.receive(into: b) } }
            let result: IOResult<Int>
            switch attempt {
            case .success(let r): result = r
            case .failure(let error): throw .io(url: url, operation: "recv", reason: reason(error.errno))
            }
            switch result {
            case .done(0):
                if received.isEmpty { throw .closedEarly(url: url) }
                return String(decoding: received, as: UTF8.self)
            case .done(let n):
                received += chunk[..<n]
            case .wouldBlock:
                continue
            }
        }
        throw .notHTTP(url: url, firstLine: String(decoding: received, as: UTF8.self))
    }

    /// `HTTP/1.1 200 OK` gives 200; anything else that is not `HTTP/x.y DDD ...` is an error.
    public func parseStatus(_ line: String) throws(HealthcheckError) -> Int {
        let trimmed = line.hasSuffix("\r") ? String(line.dropLast()) : line
        let parts = trimmed.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), parts[1].count == 3,
            parts[1].allSatisfy({ $0.isASCII && $0.isNumber }), let status = Int(parts[1])
        else {
            throw .notHTTP(url: url, firstLine: trimmed)
        }
        return status
    }

    private func wait(
        for events: Int16, on socket: Socket, until deadline: ContinuousClock.Instant,
        while phase: String
    ) throws(HealthcheckError) {
        while true {
            let left = deadline - .now
            guard left > .zero else { throw .timedOut(url: url, seconds: timeout, while: phase) }
            let (seconds, attoseconds) = left.components
            let milliseconds = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            do {
                // Readable, writable, or an error the next call reports.
                if try socket.descriptor.poll(for: events, timeoutMilliseconds: milliseconds) { return }
            } catch {
                throw .io(url: url, operation: "poll", reason: reason(error.errno))
            }
        }
    }

    private func reason(_ code: Int32) -> String { SystemCallError.reason(code) }
}
