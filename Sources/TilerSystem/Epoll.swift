import CSystemShims
import Glibc

/// What a descriptor is watched for.
public struct Interest: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    @inlinable public init(rawValue: UInt32) { self.rawValue = rawValue }

    // Computed and inlinable, not stored: a module's stored globals are reached from
    // another through an accessor, which kept the loop's interest check out of line (and
    // the connection's state machine copied around it, bench-instructions).

    /// Bytes to read, or the end of the stream (`EPOLLIN`).
    @inlinable public static var read: Interest { Interest(rawValue: EPOLLIN.rawValue) }
    /// The peer closed its sending side (`EPOLLRDHUP`), reported without reading.
    @inlinable public static var hangUp: Interest { Interest(rawValue: EPOLLRDHUP.rawValue) }
    /// Room to write (`EPOLLOUT`).
    @inlinable public static var write: Interest { Interest(rawValue: EPOLLOUT.rawValue) }
}

/// One readiness report from `Epoll.wait`: a descriptor, the tag it was watched with,
/// and what happened to it.
public struct Readiness: Sendable {
    public let descriptor: Int32
    /// The `tag` given to `add` or `modify`.
    public let tag: UInt32
    public let events: UInt32

    @usableFromInline
    init(descriptor: Int32, tag: UInt32, events: UInt32) {
        self.descriptor = descriptor
        self.tag = tag
        self.events = events
    }

    public var isReadable: Bool { events & EPOLLIN.rawValue != 0 }
    public var isWritable: Bool { events & EPOLLOUT.rawValue != 0 }
    /// The peer closed its sending side.
    public var peerClosedInput: Bool { events & EPOLLRDHUP.rawValue != 0 }
    /// Both directions are closed (`EPOLLHUP`).
    public var hungUp: Bool { events & EPOLLHUP.rawValue != 0 }
    /// An error is pending on the socket (`EPOLLERR`).
    public var failed: Bool { events & EPOLLERR.rawValue != 0 }
}

/// An epoll instance (level-triggered): descriptors added with an `Interest`, then
/// `wait` for the ready ones.
///
/// epoll watches an open file, not a number: a descriptor closed while a copy of it lives
/// on (in a child being started, between its fork and its exec) stays watched, and its
/// events keep coming under its old number, which a new descriptor may have taken. So a
/// descriptor is watched with a tag (the owner's serial number) that comes back with
/// each event, and is removed before it is closed.
/// One event epoll reports (`struct epoll_event`), for the buffers `Epoll.wait` fills.
public typealias EpollEvent = epoll_event

public struct Epoll: Sendable {
    public let descriptor: FileDescriptor

    public static func make() throws(SystemCallError) -> Epoll {
        Epoll(descriptor: FileDescriptor(rawValue: try systemCall("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }))
    }

    public func close() { descriptor.close() }

    @inlinable
    public func add(_ fd: FileDescriptor, _ interest: Interest, tag: UInt32 = 0) throws(SystemCallError) {
        try control(EPOLL_CTL_ADD, fd, interest, tag, "epoll_ctl(ADD)")
    }

    @inlinable
    public func modify(_ fd: FileDescriptor, _ interest: Interest, tag: UInt32 = 0) throws(SystemCallError) {
        try control(EPOLL_CTL_MOD, fd, interest, tag, "epoll_ctl(MOD)")
    }

    /// Stops watching `fd`. (Closing it does so only when no copy of it is left.)
    @inlinable
    public func remove(_ fd: FileDescriptor) throws(SystemCallError) {
        try control(EPOLL_CTL_DEL, fd, [], 0, "epoll_ctl(DEL)")
    }

    @usableFromInline
    func control(
        _ operation: Int32, _ fd: FileDescriptor, _ interest: Interest, _ tag: UInt32, _ name: StaticString
    ) throws(SystemCallError) {
        var event = epoll_event()
        event.events = interest.rawValue
        event.data.u64 = UInt64(UInt32(bitPattern: fd.rawValue)) | UInt64(tag) << 32
        _ = try systemCall(name) { epoll_ctl(descriptor.rawValue, operation, fd.rawValue, &event) }
    }

    /// Waits up to `timeoutMilliseconds` (-1: forever) for ready descriptors, fills
    /// `buffer` and returns how many; 0 on timeout or when a signal interrupted the wait.
    @inlinable
    public func wait(into buffer: UnsafeMutableBufferPointer<EpollEvent>, timeoutMilliseconds: Int32)
        throws(SystemCallError) -> Int
    {
        let n = epoll_wait(descriptor.rawValue, buffer.baseAddress, Int32(clamping: buffer.count), timeoutMilliseconds)
        if n >= 0 { return Int(n) }
        let code = Glibc.errno
        if code == EINTR { return 0 }
        throw SystemCallError("epoll_wait", errno: code)
    }

    /// The readiness report at `index` of a buffer `wait` filled.
    @inlinable
    public static func readiness(_ buffer: UnsafeMutableBufferPointer<EpollEvent>, _ index: Int) -> Readiness {
        let data = buffer[index].data.u64
        return Readiness(
            descriptor: Int32(bitPattern: UInt32(truncatingIfNeeded: data)), tag: UInt32(truncatingIfNeeded: data >> 32),
            events: buffer[index].events)
    }
}

/// A non-blocking eventfd: a counter another thread bumps to wake an event loop.
public struct EventFD: Sendable {
    public let descriptor: FileDescriptor

    public static func make() throws(SystemCallError) -> EventFD {
        EventFD(
            descriptor: FileDescriptor(
                rawValue: try systemCall("eventfd") {
                    eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
                }))
    }

    public func close() { descriptor.close() }

    /// Wakes whoever waits on it. A counter already at its maximum (`EAGAIN`) has a
    /// wake-up pending anyway.
    public func signal() throws(SystemCallError) {
        var one: UInt64 = 1
        _ = try withUnsafeBytes(of: &one) { bytes throws(SystemCallError) in try descriptor.write(bytes) }
    }

    /// Resets the counter after a wake-up (`.wouldBlock` when it was already zero is fine).
    public func drain() throws(SystemCallError) {
        var count: UInt64 = 0
        _ = try withUnsafeMutableBytes(of: &count) { bytes throws(SystemCallError) in try descriptor.read(into: bytes) }
    }
}
