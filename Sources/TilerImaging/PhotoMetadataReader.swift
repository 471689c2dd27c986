import CVips
import Foundation
import TilerCore

/// What a photo says about itself, read from the EXIF, IPTC and XMP blocks libvips
/// found in it (`exif-data`, `iptc-data`, `xmp-data`) and combined by the precedence
/// `PhotoMetadata` documents. The blocks are parsed by tiler (``ExifReader``,
/// ``IPTCReader``, ``XMPReader``) rather than through libvips' `exif-ifd*` strings,
/// whose formatting mixes the value with libexif's description of it.
public struct PhotoMetadataReader: Sendable {
    /// Keep the GPS position (`--keep-location`); dropped by default.
    public var keepLocation: Bool

    public init(keepLocation: Bool = false) {
        self.keepLocation = keepLocation
    }

    /// The metadata of the blocks given (any may be missing), and why a block was
    /// ignored, for a message.
    public func read(exif: [UInt8]?, iptc: [UInt8]?, xmp: [UInt8]?) -> (metadata: PhotoMetadata, ignored: [String]) {
        var ignored: [String] = []
        func bounded(_ block: [UInt8]?, _ name: String) -> [UInt8]? {
            guard let block else { return nil }
            guard block.count <= PhotoMetadata.maximumBlockBytes else {
                ignored.append("its \(name) block is \(block.count) bytes, more than the \(PhotoMetadata.maximumBlockBytes) read; ignored")
                return nil
            }
            return block
        }
        let exifReader = bounded(exif, "EXIF").flatMap(ExifReader.init)
        let iptcReader = bounded(iptc, "IPTC").map(IPTCReader.init)
        var xmpReader: XMPReader?
        if var packet = xmp {
            let prefix = Array("http://ns.adobe.com/xap/1.0/\0".utf8)
            if packet.starts(with: prefix) { packet.removeFirst(prefix.count) }
            do { xmpReader = try XMPReader(packet) } catch { ignored.append(error.description) }
        }

        func field(_ candidates: String?..., multiline: Bool = false) -> String? {
            let maximum = multiline ? PhotoMetadata.maximumDescriptionBytes : PhotoMetadata.maximumFieldBytes
            for candidate in candidates {
                if let candidate, let text = PhotoMetadata.cleaned(candidate, maximumBytes: maximum, multiline: multiline) {
                    return text
                }
            }
            return nil
        }
        let byLines = iptcReader.map { $0.byLines.joined(separator: ", ") }
        var m = PhotoMetadata()
        m.title = field(xmpReader?.title, iptcReader?.objectName, exifReader?.imageDescription)
        m.description = field(xmpReader?.description, iptcReader?.caption, multiline: true)
        m.creator = field(xmpReader?.creator, byLines, exifReader?.artist)
        m.copyright = field(xmpReader?.rights, iptcReader?.copyrightNotice, exifReader?.copyright)
        if let exifReader {
            m.dateTaken = Self.isoDate(exifReader.dateTimeOriginal, offset: exifReader.offsetTimeOriginal)
            m.camera = field(Self.camera(make: exifReader.make, model: exifReader.model))
            m.lens = field(exifReader.lensModel)
            m.exposure = Self.exposure(seconds: exifReader.exposureTime, fNumber: exifReader.fNumber, iso: exifReader.iso)
            if keepLocation { m.location = exifReader.location }
        }
        return (m, ignored)
    }

    /// The metadata of an image libvips opened.
    func read(_ image: VipsImageHandle) -> (metadata: PhotoMetadata, ignored: [String]) {
        var ignored: [String] = []
        func blob(_ name: String, _ label: String) -> [UInt8]? {
            guard vips_image_get_typeof(image.pointer, name) != 0 else { return nil }
            var data: UnsafeRawPointer?
            var length = 0
            guard vips_image_get_blob(image.pointer, name, &data, &length) == 0, let data else {
                vips_error_clear()
                return nil
            }
            // Copied only when within the bound.
            guard length <= PhotoMetadata.maximumBlockBytes else {
                ignored.append("its \(label) block is \(length) bytes, more than the \(PhotoMetadata.maximumBlockBytes) read; ignored")
                return nil
            }
            return Array(UnsafeRawBufferPointer(start: data, count: length))
        }
        let (exif, iptc, xmp) = (blob("exif-data", "EXIF"), blob("iptc-data", "IPTC"), blob("xmp-data", "XMP"))
        let found = read(exif: exif, iptc: iptc, xmp: xmp)
        return (found.metadata, ignored + found.ignored)
    }

    /// `2024-05-01T14:03:22+02:00` from EXIF's `2024:05:01 14:03:22` and `+02:00`; nil
    /// for anything else (blank or zero dates included). An offset that is not `±HH:MM`
    /// is left out.
    static func isoDate(_ exif: String?, offset: String?) -> String? {
        guard let exif else { return nil }
        let b = Array(exif.utf8.prefix(19))
        guard b.count == 19 else { return nil }
        let digits = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]
        guard digits.allSatisfy({ b[$0] >= 0x30 && b[$0] <= 0x39 }), b[4] == 0x3A, b[7] == 0x3A,
            b[10] == 0x20 || b[10] == 0x54, b[13] == 0x3A, b[16] == 0x3A
        else { return nil }
        func number(_ range: Range<Int>) -> Int { b[range].reduce(0) { $0 * 10 + Int($1 - 0x30) } }
        guard number(0..<4) > 0, (1...12).contains(number(5..<7)), (1...31).contains(number(8..<10)),
            number(11..<13) <= 23, number(14..<16) <= 59, number(17..<19) <= 60
        else { return nil }
        let text = String(decoding: b, as: UTF8.self)
        var iso = text.prefix(10).replacingOccurrences(of: ":", with: "-") + "T" + text.suffix(8)
        if let offset {
            let o = Array(offset.utf8.prefix(6))
            if o.count == 6, o[0] == 0x2B || o[0] == 0x2D, o[3] == 0x3A,
                [1, 2, 4, 5].allSatisfy({ o[$0] >= 0x30 && o[$0] <= 0x39 })
            {
                iso += String(decoding: o, as: UTF8.self)
            }
        }
        return iso
    }

    /// `Canon EOS R5` from `Canon` and `Canon EOS R5`; `NIKON CORPORATION` and `NIKON
    /// D850` give `NIKON D850`; `FUJIFILM` and `X-T4` give `FUJIFILM X-T4`.
    static func camera(make: String?, model: String?) -> String? {
        let make = make.flatMap { PhotoMetadata.cleaned($0, maximumBytes: PhotoMetadata.maximumFieldBytes) }
        let model = model.flatMap { PhotoMetadata.cleaned($0, maximumBytes: PhotoMetadata.maximumFieldBytes) }
        guard let model else { return make }
        guard let make else { return model }
        let brand = make.split(separator: " ").first.map { $0.lowercased() } ?? ""
        return model.lowercased().hasPrefix(brand) ? model : "\(make) \(model)"
    }

    /// `1/250 s, f/8, ISO 100`, from the parts known.
    static func exposure(seconds: Double?, fNumber: Double?, iso: Int?) -> String? {
        var parts: [String] = []
        if let seconds, seconds > 0, seconds.isFinite {
            let reciprocal = 1 / seconds
            if seconds < 0.5, abs(reciprocal - reciprocal.rounded()) <= 0.02 * reciprocal {
                parts.append("1/\(Int(reciprocal.rounded())) s")
            } else {
                parts.append("\(decimal(seconds, places: seconds < 1 ? 2 : 1)) s")
            }
        }
        if let fNumber, fNumber > 0, fNumber.isFinite { parts.append("f/\(decimal(fNumber, places: 1))") }
        if let iso, iso > 0 { parts.append("ISO \(iso)") }
        return parts.isEmpty ? nil : parts.joined(separator: ", ")
    }

    /// `x` with at most `places` decimals, and none when they are zeros: `8`, `2.8`, `0.3`.
    private static func decimal(_ x: Double, places: Int) -> String {
        let scale = places == 2 ? 100.0 : 10.0
        let scaled = Int((x * scale).rounded())
        let whole = scaled / Int(scale), fraction = scaled % Int(scale)
        guard fraction != 0 else { return "\(whole)" }
        var digits = String(fraction)
        if places == 2, fraction < 10 { digits = "0" + digits }
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(whole).\(digits)"
    }
}
