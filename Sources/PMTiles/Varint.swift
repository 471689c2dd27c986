/// Unsigned LEB128 varints, the integer encoding of PMTiles directories: seven bits per
/// byte, least significant first, the high bit set on every byte but the last.
public enum Varint {
    /// The most bytes a `UInt64` takes (ten: 9 × 7 + 1 bits).
    public static let maximumBytes = 10

    /// Appends `value` to `bytes`.
    @inlinable
    public static func append(_ value: UInt64, to bytes: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    /// Reads one varint at `position` and moves `position` past it; nil when the bytes
    /// end first or the value does not fit in 64 bits.
    @inlinable
    public static func read(_ bytes: UnsafeRawBufferPointer, at position: inout Int) -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        var i = position
        while i < bytes.count {
            let byte = bytes[i]
            i += 1
            let payload = UInt64(byte & 0x7F)
            // The tenth byte may only carry the top bit of a UInt64.
            if shift == 63, payload > 1 { return nil }
            result |= payload << shift
            if byte & 0x80 == 0 {
                position = i
                return result
            }
            shift += 7
            if shift > 63 { return nil }
        }
        return nil
    }
}
