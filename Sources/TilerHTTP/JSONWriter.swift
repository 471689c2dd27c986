/// Writes JSON into bytes in the order it is called, so documents come out with the keys
/// in the order the API documents them. Callers are responsible for the structure
/// (commas are added automatically within each object or array).
public struct JSONWriter: Sendable {
    public private(set) var bytes: [UInt8] = []
    private var needsComma = false

    public init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    public mutating func beginObject() { separate(); bytes.append(UInt8(ascii: "{")); needsComma = false }
    public mutating func endObject() { bytes.append(UInt8(ascii: "}")); needsComma = true }
    public mutating func beginArray() { separate(); bytes.append(UInt8(ascii: "[")); needsComma = false }
    public mutating func endArray() { bytes.append(UInt8(ascii: "]")); needsComma = true }

    /// Writes `"name":` inside an object; the value follows.
    public mutating func key(_ name: String) {
        separate()
        writeString(name)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    public mutating func value(_ s: String) { separate(); writeString(s); needsComma = true }
    public mutating func value(_ i: Int) { separate(); bytes += Array(String(i).utf8); needsComma = true }
    public mutating func value(_ d: Double) {
        separate()
        if d.isFinite {
            if d == d.rounded(), abs(d) < 1e15 { bytes += Array(String(Int(d)).utf8) } else { bytes += Array("\(d)".utf8) }
        } else {
            bytes += Array("null".utf8)
        }
        needsComma = true
    }
    public mutating func value(_ b: Bool) { separate(); bytes += Array((b ? "true" : "false").utf8); needsComma = true }
    public mutating func null() { separate(); bytes += Array("null".utf8); needsComma = true }

    /// Convenience: `"name": value`.
    public mutating func field(_ name: String, _ s: String) { key(name); value(s) }
    public mutating func field(_ name: String, _ i: Int) { key(name); value(i) }
    public mutating func field(_ name: String, _ d: Double) { key(name); value(d) }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    private mutating func writeString(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\""): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x0A: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0..<0x20, 0x7F:
                let hex = Array("0123456789abcdef".utf8)
                bytes += Array("\\u00".utf8)
                bytes.append(hex[Int(b >> 4)])
                bytes.append(hex[Int(b & 15)])
            default: bytes.append(b)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
