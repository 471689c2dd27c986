import CSystemShims
import Glibc

/// A TCP socket: a file descriptor with one throwing method per system call made on
/// sockets. Sockets are made non-blocking and close-on-exec.
public struct Socket: Sendable, Hashable {
    public let descriptor: FileDescriptor

    public init(descriptor: FileDescriptor) {
        self.descriptor = descriptor
    }

    /// A new non-blocking TCP socket for `family` (`AF_INET` or `AF_INET6`).
    public static func tcp(family: Int32) throws(SystemCallError) -> Socket {
        let type = Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue)
        return Socket(descriptor: FileDescriptor(rawValue: try systemCall("socket") { socket(family, type, 0) }))
    }

    public func close() { descriptor.close() }

    // MARK: Options

    /// `setsockopt` with an integer value.
    public func setOption(level: Int32, _ name: Int32, _ value: Int32, _ label: StaticString) throws(SystemCallError) {
        var value = value
        _ = try systemCall(label) { setsockopt(descriptor.rawValue, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) }
    }

    /// `getsockopt` of an integer value.
    public func option(level: Int32, _ name: Int32, _ label: StaticString) throws(SystemCallError) -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = try systemCall(label) { getsockopt(descriptor.rawValue, level, name, &value, &length) }
        return value
    }

    public func setNoDelay() throws(SystemCallError) {
        try setOption(level: Int32(IPPROTO_TCP), TCP_NODELAY, 1, "setsockopt(TCP_NODELAY)")
    }

    /// The kernel's send buffer size, `SO_SNDBUF` (it doubles what is asked).
    public func setSendBufferSize(_ bytes: Int) throws(SystemCallError) {
        try setOption(level: SOL_SOCKET, SO_SNDBUF, Int32(clamping: bytes), "setsockopt(SO_SNDBUF)")
    }

    /// The error a non-blocking `connect` ended with (`SO_ERROR`), 0 for none.
    public func pendingError() throws(SystemCallError) -> Int32 {
        try option(level: SOL_SOCKET, SO_ERROR, "getsockopt(SO_ERROR)")
    }

    // MARK: Addresses

    /// Binds to `address`.
    public func bind(to address: SocketAddress) throws(SystemCallError) {
        _ = try address.withSockaddr { pointer, length throws(SystemCallError) in
            try systemCall("bind") { Glibc.bind(descriptor.rawValue, pointer, length) }
        }
    }

    public func listen(backlog: Int) throws(SystemCallError) {
        _ = try systemCall("listen") { Glibc.listen(descriptor.rawValue, Int32(clamping: backlog)) }
    }

    /// The port the socket is bound to.
    public func localPort() throws(SystemCallError) -> Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = try withUnsafeMutablePointer(to: &storage) { pointer throws(SystemCallError) in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address throws(SystemCallError) in
                try systemCall("getsockname") { getsockname(descriptor.rawValue, address, &length) }
            }
        }
        return SocketAddress(storage)?.port ?? 0
    }

    /// Accepts one connection as a non-blocking, close-on-exec socket; `.wouldBlock` when
    /// none waits. A connection that was reset before it was accepted (`ECONNABORTED`) is
    /// skipped.
    public func accept() throws(SystemCallError) -> IOResult<Socket> {
        while true {
            do {
                switch try nonBlockingCall("accept4", { tsys_accept(descriptor.rawValue) }) {
                case .done(let fd): return .done(Socket(descriptor: FileDescriptor(rawValue: fd)))
                case .wouldBlock: return .wouldBlock
                }
            } catch  where error.errno == ECONNABORTED {
                continue
            }
        }
    }

    /// Starts connecting to `address`: `.done` when connected at once, `.wouldBlock` when
    /// the connection is under way (`EINPROGRESS`: wait until writable, then read
    /// `pendingError()`).
    public func connect(to address: SocketAddress) throws(SystemCallError) -> IOResult<Void> {
        let result = address.withSockaddr { pointer, length in Glibc.connect(descriptor.rawValue, pointer, length) }
        if result == 0 { return .done(()) }
        let code = Glibc.errno
        if code == EINPROGRESS || code == EINTR { return .wouldBlock }
        throw SystemCallError("connect", errno: code)
    }

    // MARK: Data

    /// Receives up to `buffer.count` bytes: `.done(0)` when the peer has closed its side.
    @inlinable @inline(__always)
    public func receive(into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> IOResult<Int> {
        try descriptor.read(into: buffer)
    }

    /// Sends up to `buffer.count` bytes, without SIGPIPE if the peer has gone.
    @inlinable
    public func send(_ buffer: UnsafeRawBufferPointer) throws(SystemCallError) -> IOResult<Int> {
        try nonBlockingCall("send") { Glibc.send(descriptor.rawValue, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Sends the buffers in order with one `sendmsg` (a gathering write), without SIGPIPE.
    /// `more`: more data follows at once (`MSG_MORE`: the kernel holds a partial packet
    /// for it, as before a `sendfile` body).
    @inlinable @inline(__always)
    public func send(_ vectors: UnsafeMutableBufferPointer<iovec>, more: Bool = false) throws(SystemCallError) -> IOResult<Int> {
        var message = msghdr()
        message.msg_iov = vectors.baseAddress
        message.msg_iovlen = vectors.count
        let flags = Int32(MSG_NOSIGNAL) | (more ? Int32(MSG_MORE) : 0)
        return try nonBlockingCall("sendmsg") { tsys_sendmsg(descriptor.rawValue, &message, flags) }
    }

    /// Sends up to `count` bytes of `file` from `offset` with `sendfile(2)` (the kernel
    /// copies from the page cache; nothing passes through user space). `.done(0)` means the
    /// file ends before `offset`. Blocks on the disk if the pages are not resident: callers
    /// hand only ranges they know to be cached.
    @inlinable
    public func send(file: FileDescriptor, offset: Int, count: Int) throws(SystemCallError) -> IOResult<Int> {
        var position = off_t(offset)
        return try nonBlockingCall("sendfile") { sendfile(descriptor.rawValue, file.rawValue, &position, count) }
    }

    /// Which direction `shutdown` closes.
    public enum Direction: Sendable {
        case write, both
    }

    /// Closes the write side (the peer reads the end of the stream) or both.
    @inlinable
    public func shutdown(_ direction: Direction) throws(SystemCallError) {
        let how = Int32(direction == .write ? SHUT_WR : SHUT_RDWR)
        _ = try systemCall("shutdown") { Glibc.shutdown(descriptor.rawValue, how) }
    }

    /// Bytes received and not yet read (`FIONREAD`).
    public func readableBytes() throws(SystemCallError) -> Int {
        var count: Int32 = 0
        _ = try systemCall("ioctl(FIONREAD)") { ioctl(descriptor.rawValue, UInt(FIONREAD), &count) }
        return Int(count)
    }
}

/// An IPv4 or IPv6 address and port.
public struct SocketAddress: Sendable, Hashable {
    private enum Storage: Sendable, Hashable {
        case v4(UInt32, UInt16)  // network byte order
        case v6([UInt8], UInt16)
    }
    private let storage: Storage

    /// Parses an IPv4 or IPv6 literal (`127.0.0.1`, `::1`); nil for anything else (host
    /// names are resolved elsewhere).
    public init?(literal host: String, port: Int) {
        guard let port = UInt16(exactly: port) else { return nil }
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            storage = .v4(v4.s_addr, port)
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 {
            storage = .v6(withUnsafeBytes(of: v6) { Array($0) }, port)
            return
        }
        return nil
    }

    /// The address in a `sockaddr_storage` (from `getsockname`, `getaddrinfo`).
    init?(_ s: sockaddr_storage) {
        var s = s
        switch Int32(s.ss_family) {
        case AF_INET:
            let a = withUnsafeBytes(of: &s) { $0.load(as: sockaddr_in.self) }
            storage = .v4(a.sin_addr.s_addr, UInt16(bigEndian: a.sin_port))
        case AF_INET6:
            let a = withUnsafeBytes(of: &s) { $0.load(as: sockaddr_in6.self) }
            storage = .v6(withUnsafeBytes(of: a.sin6_addr) { Array($0) }, UInt16(bigEndian: a.sin6_port))
        default:
            return nil
        }
    }

    /// The address `getaddrinfo` gave.
    public init?(_ address: UnsafePointer<sockaddr>, length: socklen_t) {
        var s = sockaddr_storage()
        guard Int(length) <= MemoryLayout<sockaddr_storage>.size else { return nil }
        withUnsafeMutableBytes(of: &s) { $0.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(length))) }
        self.init(s)
    }

    public var family: Int32 {
        switch storage {
        case .v4: AF_INET
        case .v6: AF_INET6
        }
    }

    public var port: Int {
        switch storage {
        case .v4(_, let port), .v6(_, let port): Int(port)
        }
    }

    func withSockaddr<R, E: Error>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws(E) -> R) throws(E) -> R {
        switch storage {
        case let .v4(address, port):
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = port.bigEndian
            a.sin_addr.s_addr = address
            return try withUnsafePointer(to: &a) { p throws(E) in
                try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { s throws(E) in
                    try body(s, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        case let .v6(address, port):
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            a.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &a.sin6_addr) { $0.copyBytes(from: address) }
            return try withUnsafePointer(to: &a) { p throws(E) in
                try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { s throws(E) in
                    try body(s, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
    }
}

extension SocketAddress {
    /// Why `resolve` found nothing: `getaddrinfo`'s own reason.
    public struct ResolutionError: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// The TCP addresses `host` resolves to (a name or a literal; IPv4 and IPv6), in
    /// `getaddrinfo`'s order.
    public static func resolve(host: String, port: Int) -> Result<[SocketAddress], ResolutionError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let first = list else {
            return .failure(ResolutionError(description: String(cString: gai_strerror(rc))))
        }
        defer { freeaddrinfo(first) }
        var found: [SocketAddress] = []
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let info = next?.pointee {
            next = info.ai_next
            if let address = info.ai_addr, let a = SocketAddress(address, length: info.ai_addrlen) { found.append(a) }
        }
        return .success(found)
    }
}
