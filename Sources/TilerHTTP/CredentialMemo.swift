import Glibc
import Synchronization

/// A handler's note about a credential a connection sends with each of its requests (its
/// `Authorization`, its token cookie), kept while the connection sends the same bytes: a
/// token judged on one request need not be looked up again on the next, as a browser
/// sends it with every tile.
///
/// The parser numbers each new value a connection sends (`HTTPRequestHead.authorizationSerial`
/// and `cookieTokenSerial`, from 1; the same bytes again keep their number) and makes the
/// memo with the connection's first credential. A note is about one number: `recalls`
/// finds it for that number only, so a changed value never reads the last one's note, and
/// a note of the header is never one of the cookie. What a note says is the handler's:
/// a `scope` (for `tiler serve`, the access policy's generation), a `subject` (what the
/// credential was found to open; 0 for everything) and when it holds.
///
/// A connection's requests are answered one at a time (on its loop or on the pool, which
/// hands over with a lock), never two at once, so one note is read or written at a time;
/// its words are atomics all the same, so that a read always sees whole words.
public final class CredentialMemo: Sendable {
    @usableFromInline let serial = Atomic<UInt64>(0)
    @usableFromInline let scope = Atomic<UInt64>(0)
    @usableFromInline let subject = Atomic<UInt64>(0)
    /// `Double` bits, seconds since 1970.
    @usableFromInline let validFrom = Atomic<UInt64>(0)
    @usableFromInline let validUntil = Atomic<UInt64>(0)

    /// The share link's token (`?token=`) the connection sent last, as a handler kept it
    /// (`keep(queryToken:)`): its bytes, their count, the room for them, and its number. A
    /// query is not the parser's to read, so the handler compares the bytes itself. At
    /// most a request line's bytes; made with the first, grown when a longer one comes.
    private let keptBytes = Atomic<Int>(0)  // the address, 0 for none
    private let keptCount = Atomic<Int>(0)
    private let keptCapacity = Atomic<Int>(0)
    private let keptNumber = Atomic<UInt64>(0)
    /// The last number given to a kept token (from 2^63, so never one of the parser's).
    private let keptSerials = Atomic<UInt64>(1 << 63)

    init() {}

    deinit { UnsafeMutableRawPointer(bitPattern: keptBytes.load(ordering: .acquiring))?.deallocate() }

    /// The number of `token` when it is the query token kept (`keep(queryToken:)`), byte
    /// for byte, else 0.
    public func number(ofQueryToken token: UnsafeRawBufferPointer) -> UInt64 {
        let number = keptNumber.load(ordering: .acquiring)
        guard number != 0, keptCount.load(ordering: .relaxed) == token.count, let base = token.baseAddress,
            let kept = UnsafeRawPointer(bitPattern: keptBytes.load(ordering: .relaxed)),
            memcmp(kept, base, token.count) == 0
        else { return 0 }
        return number
    }

    /// Keeps `token` as the connection's query token, with a new number for `note`: the
    /// numbers of query tokens have the top bit set, the parser's never do.
    public func keep(queryToken token: UnsafeRawBufferPointer) -> UInt64 {
        keptNumber.store(0, ordering: .relaxed)
        var storage = UnsafeMutableRawPointer(bitPattern: keptBytes.load(ordering: .relaxed))
        if storage == nil || keptCapacity.load(ordering: .relaxed) < token.count {
            storage?.deallocate()
            let capacity = max(token.count, 256)
            storage = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
            keptBytes.store(Int(bitPattern: storage), ordering: .relaxed)
            keptCapacity.store(capacity, ordering: .relaxed)
        }
        if let base = token.baseAddress { storage!.copyMemory(from: base, byteCount: token.count) }
        keptCount.store(token.count, ordering: .relaxed)
        let number = keptSerials.wrappingAdd(1, ordering: .relaxed).newValue
        keptNumber.store(number, ordering: .releasing)
        return number
    }

    /// Notes that the credential numbered `serial` holds for `subject` under `scope` from
    /// `validFrom` until before `validUntil` (wall-clock seconds since 1970).
    public func note(_ serial: UInt64, scope: UInt64, subject: UInt64, validFrom: Double, validUntil: Double) {
        self.serial.store(0, ordering: .relaxed)
        self.scope.store(scope, ordering: .relaxed)
        self.subject.store(subject, ordering: .relaxed)
        self.validFrom.store(validFrom.bitPattern, ordering: .relaxed)
        self.validUntil.store(validUntil.bitPattern, ordering: .relaxed)
        self.serial.store(serial, ordering: .releasing)
    }

    /// Whether the note is about one of the credentials numbered `a`, `b` and `c` (0 is
    /// none: a request's header, cookie and query token, each it sends) and says it holds
    /// for `subject` (or everything) under `scope` at `now`.
    @inlinable
    public func recalls(
        oneOf a: UInt64, _ b: UInt64, _ c: UInt64, scope: UInt64, subject: UInt64, at now: Double
    ) -> Bool {
        let noted = serial.load(ordering: .acquiring)
        guard noted != 0, noted == a || noted == b || noted == c, self.scope.load(ordering: .relaxed) == scope else {
            return false
        }
        let what = self.subject.load(ordering: .relaxed)
        return (what == 0 || what == subject)
            && now >= Double(bitPattern: validFrom.load(ordering: .relaxed))
            && now < Double(bitPattern: validUntil.load(ordering: .relaxed))
    }
}
