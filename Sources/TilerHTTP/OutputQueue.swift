import Glibc
import TilerSystem

/// Part of a file to send as a response body: `count` bytes from `offset`. The file stays
/// open while any response holds the range (`OpenFile` closes it with the last reference).
///
/// The event loop sends it with `sendfile(2)`, which waits for the disk if the pages are
/// not in the page cache: hand only ranges known to be resident (the tile store checks).
public struct FileRange: Sendable {
    public let file: OpenFile
    public let offset: Int
    public let count: Int

    public init(file: OpenFile, offset: Int = 0, count: Int) {
        precondition(offset >= 0 && count >= 0, "a file range needs a non-negative offset and count")
        self.file = file
        self.offset = offset
        self.count = count
    }
}

/// The bytes a connection still has to send, in order: response heads and small bodies
/// copied into one reused buffer, bodies shared with a cache (not copied), and file
/// ranges (sent with `sendfile`). Writing consumes it from the front.
///
/// A keep-alive connection answering one request at a time reuses the same buffer and
/// segment array from response to response: nothing is allocated per response.
struct OutputQueue {
    enum Segment {
        /// `staged[range]`.
        case staged(Range<Int>)
        /// Bytes owned elsewhere (a cached response's), from `from` on, sent without a copy.
        case shared([UInt8], from: Int)
        case file(FileRange)

        var count: Int {
            switch self {
            case .staged(let range): range.count
            case .shared(let bytes, let from): bytes.count - from
            case .file(let range): range.count
            }
        }
    }

    /// Bytes of heads and copied bodies; segments refer to ranges of it.
    private(set) var staged: [UInt8] = []
    private(set) var segments: [Segment] = []
    /// The first segment not completely sent, and how much of it was.
    private(set) var first = 0
    private(set) var sentOfFirst = 0
    /// Bytes not yet sent.
    private(set) var count = 0
    /// Where the last segment starts in `staged` when it is a staged one ending at
    /// `staged.count` (more staged bytes extend it); nil otherwise.
    private var openStagedStart: Int?

    /// Bodies up to this size are copied after their head (one contiguous write) rather
    /// than referenced.
    static let copyLimit = 1024

    init() {
        staged.reserveCapacity(4096)
        segments.reserveCapacity(4)
    }

    var isEmpty: Bool { count == 0 }

    /// Appends bytes, copying them.
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        appendStaged { $0.append(contentsOf: bytes) }
    }

    mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Appends `body[from...]`: copied when small, else shared.
    mutating func append(body: [UInt8], from: Int = 0) {
        let length = body.count - from
        if length <= Self.copyLimit {
            body.withUnsafeBytes { append(UnsafeRawBufferPointer(rebasing: $0[from...])) }
        } else {
            segments.append(.shared(body, from: from))
            openStagedStart = nil
            count += length
        }
    }

    mutating func append(file range: FileRange) {
        guard range.count > 0 else { return }
        segments.append(.file(range))
        openStagedStart = nil
        count += range.count
    }

    /// Appends what `write` adds to the staged bytes (a response head, a small body).
    mutating func appendStaged(_ write: (inout [UInt8]) -> Void) {
        let start = staged.count
        write(&staged)
        let end = staged.count
        guard end > start else { return }
        if let open = openStagedStart {
            segments[segments.count - 1] = .staged(open..<end)
        } else {
            segments.append(.staged(start..<end))
            openStagedStart = start
        }
        count += end - start
    }

    /// Marks `n` bytes from the front as sent.
    mutating func consume(_ n: Int) {
        precondition(n >= 0 && n <= count, "consumed \(n) of \(count) queued bytes")
        count -= n
        if count == 0 {
            reset()
            return
        }
        var left = n
        while left > 0 {
            let remaining = segments[first].count - sentOfFirst
            if left < remaining {
                sentOfFirst += left
                return
            }
            left -= remaining
            if first == segments.count - 1 { openStagedStart = nil }
            segments[first] = .staged(0..<0)  // drop the reference (a shared body, a file)
            first += 1
            sentOfFirst = 0
        }
    }

    /// Forgets everything queued (the connection is closing).
    mutating func reset() {
        count = 0
        first = 0
        sentOfFirst = 0
        openStagedStart = nil
        // One at a time: there are one or two, and `removeAll` is a generic replacement
        // that costs ten times as much.
        while !segments.isEmpty { segments.removeLast() }
        if staged.capacity > 256 * 1024 {
            staged = []
            staged.reserveCapacity(4096)
        } else {
            staged.removeAll(keepingCapacity: true)
        }
    }

    /// What the next write sends.
    enum NextWrite {
        /// Up to `limit` leading byte segments: gather them into one `sendmsg`.
        case bytes
        /// The leading segment is a file range: `sendfile` this part of it.
        case file(FileDescriptor, offset: Int, count: Int)
    }

    var nextWrite: NextWrite? {
        guard count > 0 else { return nil }
        if case .file(let range) = segments[first] {
            return .file(range.file.descriptor, offset: range.offset + sentOfFirst, count: range.count - sentOfFirst)
        }
        return .bytes
    }

    /// Whether a file range comes right after the leading byte segments (a head before
    /// its `sendfile` body): their write then says more is coming (`MSG_MORE`), so the
    /// head and the start of the body leave in one packet.
    var fileFollowsLeadingBytes: Bool {
        var i = first
        while i < segments.count && i - first < 16 {
            if case .file = segments[i] { return true }
            i += 1
        }
        return false
    }

    /// Calls `body` with I/O vectors for the leading byte segments (at most `limit`, and
    /// none past a file range), valid only during the call.
    @inline(__always)
    func withLeadingBytes<R>(limit: Int = 16, _ body: (UnsafeMutableBufferPointer<iovec>) -> R) -> R {
        withUnsafeTemporaryAllocation(of: iovec.self, capacity: limit) { vectors in
            staged.withUnsafeBytes { stagedBytes in
                gather(segment: first, into: vectors, filled: 0, staged: stagedBytes, body)
            }
        }
    }

    /// Fills `vectors` one segment at a time; a shared body is only readable inside its
    /// own `withUnsafeBytes`, so each one adds a level of recursion (at most `limit`).
    private func gather<R>(
        segment index: Int, into vectors: UnsafeMutableBufferPointer<iovec>, filled: Int,
        staged: UnsafeRawBufferPointer, _ body: (UnsafeMutableBufferPointer<iovec>) -> R
    ) -> R {
        guard filled < vectors.count, index < segments.count else {
            return body(UnsafeMutableBufferPointer(rebasing: vectors[..<filled]))
        }
        let skip = index == first ? sentOfFirst : 0
        switch segments[index] {
        case .staged(let range):
            vectors[filled] = iovec(
                iov_base: UnsafeMutableRawPointer(mutating: staged.baseAddress! + range.lowerBound + skip),
                iov_len: range.count - skip)
            return gather(segment: index + 1, into: vectors, filled: filled + 1, staged: staged, body)
        case .shared(let bytes, let from):
            return bytes.withUnsafeBytes { b in
                vectors[filled] = iovec(
                    iov_base: UnsafeMutableRawPointer(mutating: b.baseAddress! + from + skip),
                    iov_len: b.count - from - skip)
                return gather(segment: index + 1, into: vectors, filled: filled + 1, staged: staged, body)
            }
        case .file:
            return body(UnsafeMutableBufferPointer(rebasing: vectors[..<filled]))
        }
    }
}
