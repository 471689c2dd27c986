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
    public mutating func value(_ i: Int) { separate(); appendDecimal(i); needsComma = true }
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

    /// Writes one string value from pieces without building an intermediate `String`:
    /// `writer.stringValue { $0.appendEscaped("/images/"); $0.appendDecimal(3) }`.
    public mutating func stringValue(_ build: (inout JSONWriter) -> Void) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        build(&self)
        bytes.append(UInt8(ascii: "\""))
        needsComma = true
    }

    /// Inside `stringValue`: appends `s` with JSON escaping.
    public mutating func appendEscaped(_ s: String) { writeEscaped(s) }

    /// Appends `i` in decimal, with no allocation.
    public mutating func appendDecimal(_ i: Int) { bytes.appendDecimal(i) }

    /// Convenience: `"name": value`.
    public mutating func field(_ name: String, _ s: String) { key(name); value(s) }
    public mutating func field(_ name: String, _ i: Int) { key(name); value(i) }
    public mutating func field(_ name: String, _ d: Double) { key(name); value(d) }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    private mutating func writeString(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        writeEscaped(s)
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func writeEscaped(_ s: String) {
        // Fast path: most strings (keys, ids, URLs) need no escaping.
        let copied: Bool? = s.utf8.withContiguousStorageIfAvailable { raw in
            for b in raw where b < 0x20 || b == 0x7F || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { return false }
            bytes.append(contentsOf: raw)
            return true
        }
        if copied == true { return }
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
    }
}
