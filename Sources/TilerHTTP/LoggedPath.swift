/// A request target as the access log writes it: at most 512 bytes, with the value of
/// every credential in the query (`token`, `access_token`, `key`, `signature`, any case)
/// replaced by `REDACTED`, so that a link's token never reaches a log.
public enum LoggedPath {
    /// The longest target logged, in bytes (the rest is cut).
    public static let maximumBytes = 512
    /// Query parameters whose values are never logged (compared without case).
    static let secretNames: [[UInt8]] = ["token", "access_token", "key", "signature"].map { Array($0.utf8) }

    public static func text(of target: [UInt8]) -> String {
        guard let question = target.firstIndex(of: UInt8(ascii: "?")) else {
            return String(decoding: target.prefix(maximumBytes), as: UTF8.self)
        }
        var out = Array(target[...question])
        var first = true
        for pair in target[(question + 1)...].split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false) {
            if !first { out.append(UInt8(ascii: "&")) }
            first = false
            let equals = pair.firstIndex(of: UInt8(ascii: "=")) ?? pair.endIndex
            let name = pair[pair.startIndex..<equals]
            if equals < pair.endIndex, isSecret(name) {
                out += name
                out += Array("=REDACTED".utf8)
            } else {
                out += pair
            }
        }
        return String(decoding: out.prefix(maximumBytes), as: UTF8.self)
    }

    /// Whether a raw (undecoded) parameter name is a credential's: compared after
    /// percent-decoding, without case, so `%74oken` and `TOKEN` are caught too.
    private static func isSecret(_ raw: ArraySlice<UInt8>) -> Bool {
        let name = percentDecoded(raw).map { $0 | (($0 >= 0x41 && $0 <= 0x5A) ? 0x20 : 0) }
        return secretNames.contains(name)
    }

    private static func percentDecoded(_ raw: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        var i = raw.startIndex
        while i < raw.endIndex {
            if raw[i] == UInt8(ascii: "%"), i + 2 < raw.endIndex, let h = hex(raw[i + 1]), let l = hex(raw[i + 2]) {
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(raw[i])
                i += 1
            }
        }
        return out
    }

    private static func hex(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): b - 0x30
        case UInt8(ascii: "a")...UInt8(ascii: "f"): b - 0x61 + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): b - 0x41 + 10
        default: nil
        }
    }
}
