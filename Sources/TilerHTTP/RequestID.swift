/// The ids of requests, sent back in `X-Request-Id` and named by the access log, so that
/// a client's report, a proxy's log and this server's log can be matched.
///
/// A client (or a proxy in front) that sends a sane `X-Request-Id` gets it back; any other
/// request gets one the server makes: its connection's id, 16 hex digits made once per
/// connection from a random seed per event loop, then `-` and the request's number on
/// that connection (`5c1e0a9b3f2d7e41-3`). Per request, only the number is formatted.
public enum RequestID {
    /// The longest id a client may send and get back.
    public static let maximumSentBytes = 128

    /// Whether a client's `X-Request-Id` is kept: 1 to `maximumSentBytes` bytes of
    /// letters, digits and `-._:+/=@` (UUIDs, hex, base64 and the ids of common proxies),
    /// so that it can go into a header and a log line as it is.
    public static func isSane(_ value: some Collection<UInt8>) -> Bool {
        guard !value.isEmpty, value.count <= maximumSentBytes else { return false }
        return value.allSatisfy { b in
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                true
            case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "+"),
                UInt8(ascii: "/"), UInt8(ascii: "="), UInt8(ascii: "@"):
                true
            default: false
            }
        }
    }

    /// A connection's id: the `number`th connection of a loop whose seed is `seed`, mixed
    /// (SplitMix64's finalizer) so that ids do not tell how many connections came before.
    static func connection(seed: UInt64, number: UInt64) -> UInt64 {
        var z = seed &+ number &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The start of the `X-Request-Id` line of the connection's requests, made once per
    /// connection: `X-Request-Id: ` then its id as 16 lowercase hex digits and `-` (the
    /// request's number and CRLF follow).
    static func tag(of connection: UInt64) -> [UInt8] {
        let digits: StaticString = "0123456789abcdef"
        var bytes = Array("X-Request-Id: ".utf8) + [UInt8](repeating: UInt8(ascii: "-"), count: 17)
        for i in 0..<16 { bytes[headerStart + i] = digits.utf8Start[Int((connection >> UInt64(60 - 4 * i)) & 0xF)] }
        return bytes
    }

    /// Where the id starts in a tag (after `X-Request-Id: `).
    static let headerStart = 14

    /// The id of the `number`th request of the connection tagged `tag`, as text; empty
    /// for no tag.
    static func text(tag: [UInt8], number: Int) -> String {
        tag.isEmpty ? "" : String(decoding: tag[headerStart...], as: UTF8.self) + String(number)
    }
}

extension HTTPRequestHead {
    /// The id this request's answer carries: the client's when it sent a sane one, else
    /// the connection's tag and the request's number; empty for a head that no
    /// connection read (tests).
    public var requestID: String {
        if !sentRequestID.isEmpty { return String(decoding: sentRequestID, as: UTF8.self) }
        return RequestID.text(tag: connectionTag, number: requestNumber)
    }
}
