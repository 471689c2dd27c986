/// `jpeg` with an EXIF APP1 segment right after SOI holding one tag: Orientation.
public func jpegWithOrientation(_ jpeg: [UInt8], _ orientation: UInt16) -> [UInt8] {
    func be16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
    func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }
    // Big-endian TIFF header, IFD0 at 8 with one entry: 0x0112 SHORT ×1, then no next IFD.
    let tiff =
        Array("MM".utf8) + be16(42) + be32(8) + be16(1)
        + be16(0x0112) + be16(3) + be32(1) + be16(orientation) + be16(0) + be32(0)
    let payload = Array("Exif".utf8) + [0, 0] + tiff
    let app1 = [0xFF, 0xE1] + be16(UInt16(payload.count + 2)) + payload
    return Array(jpeg[..<2]) + app1 + Array(jpeg[2...])
}
