/// The one percent-decoder (RFC 3986 §2.1) of URL paths and queries: every `%XX` (hex
/// digits in either case) becomes its byte, every other byte stays; `+` is not a space.
/// Nil for a `%` without two hex digits after it. What the bytes may then hold (NUL, `/`,
/// valid UTF-8) is for the caller to decide.
public func percentDecodedBytes<C: Collection<UInt8>>(_ encoded: C) -> [UInt8]? {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(encoded.count)
    var iterator = encoded.makeIterator()
    while let b = iterator.next() {
        if b == UInt8(ascii: "%") {
            guard let hi = iterator.next().flatMap(hexValue), let lo = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(hi << 4 | lo)
        } else {
            bytes.append(b)
        }
    }
    return bytes
}

@inline(__always)
private func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
    default: nil
    }
}
