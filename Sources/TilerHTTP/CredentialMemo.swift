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

    init() {}

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

    /// Whether the note is about the credential numbered `serial` (not 0) and says it holds
    /// for `subject` (or everything) under `scope` at `now`.
    @inlinable
    public func recalls(_ serial: UInt64, scope: UInt64, subject: UInt64, at now: Double) -> Bool {
        guard serial != 0, self.serial.load(ordering: .acquiring) == serial,
            self.scope.load(ordering: .relaxed) == scope
        else { return false }
        let noted = self.subject.load(ordering: .relaxed)
        return (noted == 0 || noted == subject)
            && now >= Double(bitPattern: validFrom.load(ordering: .relaxed))
            && now < Double(bitPattern: validUntil.load(ordering: .relaxed))
    }
}
