import Synchronization
import TilerSystem

/// The clock an HTTP server reads: a monotonic one for its timeouts and the wall clock for
/// its `Date` headers. Tests pass a `ManualClock` to step through timeouts without
/// waiting for them.
public protocol ServerClock: Sendable {
    /// Milliseconds on a monotonic clock (any origin; only differences matter).
    func monotonicMilliseconds() -> Int64
    /// Seconds since 1970, for `Date` headers.
    func wallSeconds() -> Int64
}

extension SystemClock {
    /// The system's clocks as a `ServerClock` (the default).
    public static let system: any ServerClock = SystemServerClock()
}

/// `CLOCK_MONOTONIC_COARSE` and `CLOCK_REALTIME_COARSE`.
struct SystemServerClock: ServerClock {
    func monotonicMilliseconds() -> Int64 { SystemClock.monotonicMilliseconds() }
    func wallSeconds() -> Int64 { SystemClock.wallSeconds() }
}

/// A clock that moves only when told to: timeouts are tested by stepping it past them.
public final class ManualClock: ServerClock {
    private let milliseconds: Atomic<Int64>
    private let wall: Int64

    /// Starts at `milliseconds` on the monotonic clock; the wall clock follows it from
    /// `wallSeconds`.
    public init(milliseconds: Int64 = 1_000_000, wallSeconds: Int64 = 1_700_000_000) {
        self.milliseconds = Atomic(milliseconds)
        self.wall = wallSeconds - milliseconds / 1000
    }

    public func monotonicMilliseconds() -> Int64 { milliseconds.load(ordering: .acquiring) }
    public func wallSeconds() -> Int64 { wall + monotonicMilliseconds() / 1000 }

    /// Moves the clock forward.
    public func advance(milliseconds delta: Int64) {
        milliseconds.add(delta, ordering: .acquiringAndReleasing)
    }
}

/// The time as an event loop read it, handed to a connection with every event: the
/// monotonic milliseconds its timeouts compare, and the `Date` header its answers carry.
struct ServerTime {
    var milliseconds: Int64
    var date: ResponseDate

    init(milliseconds: Int64, date: ResponseDate) {
        self.milliseconds = milliseconds
        self.date = date
    }

    init(milliseconds: Int64, wallSeconds: Int64) {
        self.init(milliseconds: milliseconds, date: ResponseDate(wallSeconds: wallSeconds))
    }
}

/// The `Date` of the answers made within one second: its IMF-fixdate and, made once for
/// the second rather than per answer, the lines most answers start with.
struct ResponseDate {
    /// `HTTP/1.1 200 OK`, the `Date` line, then the serializer's common headers if
    /// `includesCommonHeaders`.
    let okHeadStart: [UInt8]
    /// Whether `okHeadStart` ends with the common headers of the serializer that made
    /// this date (`ResponseSerializer.date(wallSeconds:)`), for its answers only. One
    /// array and a flag: a connection is handed the time with every event, and each array
    /// in it is a retain and a release.
    let includesCommonHeaders: Bool
    private static let beforeDate: [UInt8] = {
        var bytes: [UInt8] = []
        bytes.append(HTTPStatus.staticStatusLine(200)!)
        bytes.append("Date: ")
        return bytes
    }()
    private static let dateStart = beforeDate.count

    /// A date whose head start ends with the `Date` line.
    init(wallSeconds: Int64) {
        okHeadStart = Self.beforeDate + HTTPDate.format(wallSeconds) + Array("\r\n".utf8)
        includesCommonHeaders = false
    }

    /// A date whose head start also holds `commonHeaders` (see `includesCommonHeaders`).
    init(wallSeconds: Int64, then commonHeaders: [UInt8]) {
        okHeadStart = Self.beforeDate + HTTPDate.format(wallSeconds) + Array("\r\n".utf8) + commonHeaders
        includesCommonHeaders = true
    }

    /// The 29 bytes of an IMF-fixdate.
    var imfFixdate: ArraySlice<UInt8> { okHeadStart[Self.dateStart..<(Self.dateStart + 29)] }
}
