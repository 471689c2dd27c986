import TilerCore

/// The IPTC (IIM) fields tiler keeps, from an IPTC block as libvips hands it in
/// `iptc-data`: JPEG's Photoshop `APP13` payload (`Photoshop 3.0\0` and `8BIM`
/// resources, of which resource 0x0404 holds the IIM datasets) or the datasets
/// themselves (TIFF's IPTC tag).
///
/// Every length is checked against what remains of the block before it is used, and texts
/// are copied only up to a fixed bound. A malformed block gives the datasets read before
/// the damage.
struct IPTCReader {
    /// 2:05 Object Name.
    private(set) var objectName: String?
    /// 2:120 Caption/Abstract.
    private(set) var caption: String?
    /// 2:80 By-line, each (a photo may name several).
    private(set) var byLines: [String] = []
    /// 2:116 Copyright Notice.
    private(set) var copyrightNotice: String?

    /// The most by-lines kept.
    static let maximumByLines = 16

    init(_ block: [UInt8]) {
        let photoshop: [UInt8] = Array("Photoshop 3.0\0".utf8)
        if block.starts(with: photoshop) {
            if let iim = Self.resource(0x0404, in: block[photoshop.count...]) { read(iim) }
        } else {
            read(block[...])
        }
    }

    /// The data of the first `8BIM` resource `id`: signature, id, a Pascal name padded to
    /// an even size, a 32-bit size and the data, padded to an even size.
    private static func resource(_ id: UInt16, in block: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        var at = block.startIndex
        let end = block.endIndex
        let signature: [UInt8] = Array("8BIM".utf8)
        while at + 7 <= end, block[at..<at + 4].elementsEqual(signature) {
            let resourceID = UInt16(block[at + 4]) << 8 | UInt16(block[at + 5])
            let nameLength = Int(block[at + 6])
            var next = at + 6 + 1 + nameLength
            if (1 + nameLength) % 2 == 1 { next += 1 }
            guard next + 4 <= end else { return nil }
            let size = block[next..<next + 4].reduce(0) { $0 << 8 | Int($1) }
            next += 4
            guard size <= end - next else { return nil }
            if resourceID == id { return block[next..<next + size] }
            next += size + size % 2
            at = next
        }
        return nil
    }

    /// Reads the IIM datasets: a 0x1C tag marker, record, dataset number and a 16-bit
    /// length (an extended length, which no text field needs, ends the reading).
    private mutating func read(_ iim: ArraySlice<UInt8>) {
        var at = iim.startIndex
        let end = iim.endIndex
        var utf8 = false
        var raw: [(UInt8, ArraySlice<UInt8>)] = []
        while at + 5 <= end, iim[at] == 0x1C {
            let record = iim[at + 1], dataset = iim[at + 2]
            let length = Int(iim[at + 3]) << 8 | Int(iim[at + 4])
            at += 5
            guard length & 0x8000 == 0, length <= end - at else { break }
            let data = iim[at..<at + length]
            at += length
            if record == 1, dataset == 90 {
                // Coded Character Set: ESC % G is UTF-8.
                utf8 = data.elementsEqual([0x1B, 0x25, 0x47])
            } else if record == 2, [5, 80, 116, 120].contains(dataset) {
                raw.append((dataset, data.prefix(PhotoMetadata.maximumDescriptionBytes)))
            }
        }
        for (dataset, data) in raw {
            let text =
                utf8
                ? String(decoding: data, as: UTF8.self) : decodedText(data)
            switch dataset {
            case 5: objectName = objectName ?? text
            case 120: caption = caption ?? text
            case 116: copyrightNotice = copyrightNotice ?? text
            default: if byLines.count < Self.maximumByLines { byLines.append(text) }
            }
        }
    }
}
