import TilerCore

/// The EXIF fields tiler keeps, read from an EXIF block (a TIFF structure, as libvips
/// hands it in `exif-data`, with or without JPEG's `Exif\0\0` prefix): IFD0, its EXIF
/// sub-IFD and its GPS IFD, nothing else (no thumbnails, no maker notes).
///
/// Every offset and count the block states is checked against its length before a byte
/// is read, and a text is copied only up to a fixed bound, so that nothing the block says
/// sizes an allocation. A malformed block gives the fields read before the damage.
struct ExifReader {
    private let bytes: [UInt8]
    private let bigEndian: Bool
    /// IFD0, EXIF and GPS entries: tag → (type, count, offset of the value's bytes).
    private var entries: [UInt16: Entry] = [:]
    private var exifEntries: [UInt16: Entry] = [:]
    private var gpsEntries: [UInt16: Entry] = [:]

    /// One IFD entry: its TIFF type, count and where its value's bytes start.
    private struct Entry {
        let type: UInt16
        let count: Int
        let offset: Int
    }

    /// The most entries read from one IFD; real ones have a few dozen.
    static let maximumEntries = 1024

    /// Reads `block`; nil when it is not a TIFF structure.
    init?(_ block: [UInt8]) {
        let exifPrefix: [UInt8] = Array("Exif\0\0".utf8)
        bytes = block.starts(with: exifPrefix) ? Array(block.dropFirst(exifPrefix.count)) : block
        guard bytes.count >= 8 else { return nil }
        switch (bytes[0], bytes[1]) {
        case (0x49, 0x49): bigEndian = false
        case (0x4D, 0x4D): bigEndian = true
        default: return nil
        }
        guard u16(2) == 42, let first = u32(4) else { return nil }
        entries = ifd(at: first)
        if let e = entries[0x8769], let at = value32(e) { exifEntries = ifd(at: at) }
        if let e = entries[0x8825], let at = value32(e) { gpsEntries = ifd(at: at) }
    }

    // MARK: the fields

    var imageDescription: String? { text(entries[0x010E]) }
    var make: String? { text(entries[0x010F]) }
    var model: String? { text(entries[0x0110]) }
    var artist: String? { text(entries[0x013B]) }
    /// The photographer's part of `Copyright` (the editor's follows a NUL).
    var copyright: String? { text(entries[0x8298]) }
    var lensModel: String? { text(exifEntries[0xA434]) }
    var dateTimeOriginal: String? { text(exifEntries[0x9003]) }
    var offsetTimeOriginal: String? { text(exifEntries[0x9011]) }
    /// Seconds.
    var exposureTime: Double? { rational(exifEntries[0x829A]) }
    var fNumber: Double? { rational(exifEntries[0x829D]) }
    /// `PhotographicSensitivity` (ISOSpeedRatings).
    var iso: Int? { exifEntries[0x8827].flatMap { value32($0) } }

    /// The GPS position in degrees (north and east positive), when both coordinates and
    /// their references are there and make sense.
    var location: PhotoMetadata.Location? {
        guard let lat = degrees(gpsEntries[2]), let lon = degrees(gpsEntries[4]),
            let latRef = text(gpsEntries[1])?.uppercased(), let lonRef = text(gpsEntries[3])?.uppercased(),
            latRef == "N" || latRef == "S", lonRef == "E" || lonRef == "W",
            lat <= 90, lon <= 180
        else { return nil }
        func rounded(_ x: Double) -> Double { (x * 1e7).rounded() / 1e7 }
        return .init(lat: rounded(latRef == "S" ? -lat : lat), lon: rounded(lonRef == "W" ? -lon : lon))
    }

    // MARK: reading

    private func u16(_ at: Int) -> UInt16? {
        guard at >= 0, at + 2 <= bytes.count else { return nil }
        let a = UInt16(bytes[at]), b = UInt16(bytes[at + 1])
        return bigEndian ? a << 8 | b : b << 8 | a
    }

    private func u32(_ at: Int) -> Int? {
        guard at >= 0, at + 4 <= bytes.count else { return nil }
        let b = (0..<4).map { UInt32(bytes[at + $0]) }
        let v = bigEndian ? b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3] : b[3] << 24 | b[2] << 16 | b[1] << 8 | b[0]
        return Int(v)
    }

    /// The entries of the IFD at `offset`, up to ``maximumEntries``; those whose value
    /// lies outside the block are left out.
    private func ifd(at offset: Int) -> [UInt16: Entry] {
        guard let n = u16(offset) else { return [:] }
        var found: [UInt16: Entry] = [:]
        for i in 0..<min(Int(n), Self.maximumEntries) {
            let at = offset + 2 + 12 * i
            guard let tag = u16(at), let type = u16(at + 2), let count = u32(at + 4) else { break }
            let unit: Int
            switch type {
            case 1, 2, 6, 7: unit = 1  // BYTE, ASCII, SBYTE, UNDEFINED
            case 3, 8: unit = 2  // SHORT, SSHORT
            case 4, 9, 13: unit = 4  // LONG, SLONG, IFD
            case 5, 10: unit = 8  // RATIONAL, SRATIONAL
            default: continue
            }
            let size = unit * count  // count < 2³², unit ≤ 8: no overflow
            let valueAt = size <= 4 ? at + 8 : u32(at + 8) ?? -1
            guard valueAt >= 0, valueAt + size <= bytes.count else { continue }
            found[tag] = Entry(type: type, count: count, offset: valueAt)
        }
        return found
    }

    /// An ASCII (or UNDEFINED) value up to its first NUL, at most
    /// `PhotoMetadata.maximumDescriptionBytes` bytes, as UTF-8 (Latin-1 when it is not).
    private func text(_ entry: Entry?) -> String? {
        guard let entry, entry.type == 2 || entry.type == 7 || entry.type == 1 else { return nil }
        var end = entry.offset
        let limit = entry.offset + min(entry.count, PhotoMetadata.maximumDescriptionBytes)
        while end < limit, bytes[end] != 0 { end += 1 }
        return decodedText(bytes[entry.offset..<end])
    }

    /// The first value of a SHORT or LONG entry, or a LONG offset.
    private func value32(_ entry: Entry) -> Int? {
        guard entry.count >= 1 else { return nil }
        switch entry.type {
        case 3: return u16(entry.offset).map(Int.init)
        case 4, 13: return u32(entry.offset)
        default: return nil
        }
    }

    /// The `index`th value of an unsigned RATIONAL entry; nil for 0/0 or a zero
    /// denominator.
    private func rational(_ entry: Entry?, _ index: Int = 0) -> Double? {
        guard let entry, entry.type == 5, index < entry.count,
            let n = u32(entry.offset + 8 * index), let d = u32(entry.offset + 8 * index + 4), d != 0
        else { return nil }
        return Double(n) / Double(d)
    }

    /// Degrees, minutes and seconds (three RATIONALs) as degrees.
    private func degrees(_ entry: Entry?) -> Double? {
        guard let entry, entry.count >= 3, let d = rational(entry, 0), let m = rational(entry, 1), let s = rational(entry, 2),
            m < 60, s < 60
        else { return nil }
        return d + m / 60 + s / 3600
    }
}

/// `bytes` as UTF-8, or as Latin-1 when they are not valid UTF-8 (older cameras and
/// tools write 8-bit text in their own code page, Latin-1 being the usual one).
func decodedText(_ bytes: ArraySlice<UInt8>) -> String {
    if let utf8 = String(validating: bytes, as: UTF8.self) { return utf8 }
    return String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
}
