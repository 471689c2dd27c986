import ArgumentParser

import Glibc  // tiler is Linux-only (epoll); the probe needs only POSIX sockets

extension Tiler {
    /// `tiler healthcheck`: asks a running `tiler serve` for `GET /healthz` and exits 0 on
    /// 200, else 1 with one line saying why. It is the container image's `HEALTHCHECK`, so
    /// it speaks HTTP over a plain socket and needs neither curl nor Foundation.
    struct Healthcheck: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check that a tiler server answers GET /healthz with 200.",
            discussion: """
                Exits 0 when the server answers 200 and 1 otherwise (refused, timed out, \
                another status, not HTTP), with a one-line reason on stderr. Made for \
                container health checks: HEALTHCHECK CMD ["tiler", "healthcheck"].
                """
        )

        @Option(help: "The server's address (an IP address or a host name).")
        var host = "127.0.0.1"

        @Option(help: ArgumentHelp(
            "The server's port.",
            discussion: "Default: the TILER_PORT environment variable, else 8080."
        ))
        var port: Int?

        @Option(help: "Seconds to wait for the whole exchange before giving up.")
        var timeout: Double = 3

        func validate() throws {
            if let port, !(1...65535).contains(port) {
                throw ValidationError("--port must be between 1 and 65535, not \(port).")
            }
            guard timeout.isFinite, timeout > 0, timeout <= 3600 else {
                throw ValidationError("--timeout must be a number of seconds above 0 and at most 3600.")
            }
        }

        func run() throws {
            do {
                let probe = HealthProbe(host: host, port: try resolvedPort(), timeout: timeout)
                let status = try probe.status()
                guard status == 200 else {
                    throw HealthcheckError.notOK(url: probe.url, status: status)
                }
                print("healthy: \(probe.url) answered 200")
            } catch let error as HealthcheckError {
                printToStandardError("unhealthy: \(error.description)")
                throw ExitCode.failure
            }
        }

        /// `--port`, else `TILER_PORT` (the variable `tiler serve` reads), else 8080.
        private func resolvedPort() throws(HealthcheckError) -> Int {
            if let port { return port }
            guard let raw = getenv("TILER_PORT").map({ String(cString: $0) }), !raw.isEmpty else {
                return 8080
            }
            guard let port = Int(raw), (1...65535).contains(port) else {
                throw .badEnvironmentPort(raw)
            }
            return port
        }
    }
}

/// Why a health check failed, in one line that names the URL and the cause.
enum HealthcheckError: Error, CustomStringConvertible {
    case badEnvironmentPort(String)
    case unresolvable(host: String, reason: String)
    case cannotConnect(url: String, reason: String)
    case timedOut(url: String, seconds: Double, while: String)
    case io(url: String, operation: String, reason: String)
    case closedEarly(url: String)
    case notHTTP(url: String, firstLine: String)
    case notOK(url: String, status: Int)

    var description: String {
        switch self {
        case .badEnvironmentPort(let raw):
            "TILER_PORT is '\(raw)', not a port number between 1 and 65535"
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
/// covers name lookup, connecting, sending and reading the status line.
struct HealthProbe {
    let host: String
    let port: Int
    let timeout: Double

    var url: String {
        let authority = host.contains(":") ? "[\(host)]" : host
        return "http://\(authority):\(port)/healthz"
    }

    /// The status code of the server's answer.
    func status() throws(HealthcheckError) -> Int {
        let deadline = ContinuousClock.now + .milliseconds(Int((timeout * 1000).rounded(.up)))
        let fd = try connect(until: deadline)
        defer { close(fd) }
        let authority = host.contains(":") ? "[\(host)]" : host
        let request = "GET /healthz HTTP/1.1\r\nHost: \(authority):\(port)\r\n"
            + "User-Agent: tiler-healthcheck\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        try send(Array(request.utf8), on: fd, until: deadline)
        return try parseStatus(try readStatusLine(from: fd, until: deadline))
    }

    private func connect(until deadline: ContinuousClock.Instant) throws(HealthcheckError) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = socketType(SOCK_STREAM)
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let first = list else {
            throw .unresolvable(host: host, reason: String(cString: gai_strerror(rc)))
        }
        defer { freeaddrinfo(first) }

        var lastFailure = "no address to try"
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let info = next?.pointee {
            next = info.ai_next
            let fd = socket(info.ai_family, socketType(SOCK_STREAM) | socketType(SOCK_NONBLOCK) | socketType(SOCK_CLOEXEC), info.ai_protocol)
            guard fd >= 0 else {
                lastFailure = "socket: \(errorText(errno))"
                continue
            }
            if Glibc.connect(fd, info.ai_addr, info.ai_addrlen) == 0 { return fd }
            guard errno == EINPROGRESS else {
                lastFailure = errorText(errno)
                close(fd)
                continue
            }
            do {
                try wait(for: Int16(POLLOUT), on: fd, until: deadline, while: "connecting")
            } catch {
                close(fd)
                throw error
            }
            var failure: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &failure, &length)
            if failure == 0 { return fd }
            lastFailure = errorText(failure)
            close(fd)
        }
        throw .cannotConnect(url: url, reason: lastFailure)
    }

    private func send(_ bytes: [UInt8], on fd: Int32, until deadline: ContinuousClock.Instant) throws(HealthcheckError) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                sent += n
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                try wait(for: Int16(POLLOUT), on: fd, until: deadline, while: "sending the request")
            } else if errno != EINTR {
                throw .io(url: url, operation: "send", reason: errorText(errno))
            }
        }
    }

    /// Reads until the first line ends; a status line longer than 4 KiB is not HTTP.
    private func readStatusLine(from fd: Int32, until deadline: ContinuousClock.Instant) throws(HealthcheckError) -> String {
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while received.count < 4096 {
            if let end = received.firstIndex(of: UInt8(ascii: "\n")) {
                return String(decoding: received[..<end], as: UTF8.self)
            }
            try wait(for: Int16(POLLIN), on: fd, until: deadline, while: "waiting for the answer")
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                received += chunk[..<n]
            } else if n == 0 {
                if received.isEmpty { throw .closedEarly(url: url) }
                return String(decoding: received, as: UTF8.self)
            } else if errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR {
                throw .io(url: url, operation: "recv", reason: errorText(errno))
            }
        }
        throw .notHTTP(url: url, firstLine: String(decoding: received, as: UTF8.self))
    }

    /// `HTTP/1.1 200 OK` gives 200; anything else that is not `HTTP/x.y DDD ...` is an error.
    func parseStatus(_ line: String) throws(HealthcheckError) -> Int {
        let trimmed = line.hasSuffix("\r") ? String(line.dropLast()) : line
        let parts = trimmed.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), parts[1].count == 3,
              parts[1].allSatisfy({ $0.isASCII && $0.isNumber }), let status = Int(parts[1])
        else {
            throw .notHTTP(url: url, firstLine: trimmed)
        }
        return status
    }

    private func wait(for events: Int16, on fd: Int32, until deadline: ContinuousClock.Instant, while phase: String) throws(HealthcheckError) {
        while true {
            let left = deadline - .now
            guard left > .zero else { throw .timedOut(url: url, seconds: timeout, while: phase) }
            let (seconds, attoseconds) = left.components
            let milliseconds = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            var poller = pollfd(fd: fd, events: events, revents: 0)
            let ready = poll(&poller, 1, milliseconds)
            if ready > 0 { return }  // readable, writable, or an error the next call reports
            if ready < 0 && errno != EINTR {
                throw .io(url: url, operation: "poll", reason: errorText(errno))
            }
        }
    }
}

private func socketType(_ type: __socket_type) -> Int32 { Int32(type.rawValue) }

private func errorText(_ code: Int32) -> String { String(cString: strerror(code)) }

private func printToStandardError(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { _ = write(STDERR_FILENO, $0.baseAddress, $0.count) }
}
