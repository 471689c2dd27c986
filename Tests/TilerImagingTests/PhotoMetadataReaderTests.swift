import Foundation
import Testing
import TilerCore
@testable import TilerImaging

/// Combining EXIF, IPTC and XMP, and the forms of the fields made from EXIF values.
@Suite struct PhotoMetadataReaderTests {
    @Test func datesInISO8601() {
        #expect(PhotoMetadataReader.isoDate("2024:05:01 14:03:22", offset: "+02:00") == "2024-05-01T14:03:22+02:00")
        #expect(PhotoMetadataReader.isoDate("2024:05:01 14:03:22", offset: nil) == "2024-05-01T14:03:22")
        #expect(PhotoMetadataReader.isoDate("2024:05:01 14:03:22", offset: "   :  ") == "2024-05-01T14:03:22")
        for bad in ["0000:00:00 00:00:00", "    :  :     :  :  ", "2024:13:01 14:03:22", "2024-05-01", ""] {
            #expect(PhotoMetadataReader.isoDate(bad, offset: nil) == nil, "\(bad)")
        }
    }

    @Test func exposureAndCamera() {
        #expect(PhotoMetadataReader.exposure(seconds: 0.004, fNumber: 8, iso: 100) == "1/250 s, f/8, ISO 100")
        #expect(PhotoMetadataReader.exposure(seconds: 2, fNumber: 2.8, iso: nil) == "2 s, f/2.8")
        #expect(PhotoMetadataReader.exposure(seconds: 0.3, fNumber: nil, iso: nil) == "0.3 s")
        #expect(PhotoMetadataReader.exposure(seconds: nil, fNumber: nil, iso: 0) == nil)
        #expect(PhotoMetadataReader.camera(make: "Canon", model: "Canon EOS R5") == "Canon EOS R5")
        #expect(PhotoMetadataReader.camera(make: "NIKON CORPORATION", model: "NIKON D850") == "NIKON D850")
        #expect(PhotoMetadataReader.camera(make: "FUJIFILM", model: "X-T4") == "FUJIFILM X-T4")
        #expect(PhotoMetadataReader.camera(make: nil, model: "X-T4") == "X-T4")
    }

    /// A block past `maximumBlockBytes` is ignored whole, the others still read; garbage
    /// blocks give nothing and do not stop the rest.
    @Test func oversizedAndDamagedBlocks() {
        let xmp = Array(
            #"<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>From XMP</dc:title></rdf:Description></rdf:RDF></x:xmpmeta>"#
                .utf8)
        let iptc: [UInt8] = [0x1C, 2, 5, 0, 9] + Array("From IPTC".utf8)
        let reader = PhotoMetadataReader()
        #expect(reader.read(exif: nil, iptc: iptc, xmp: xmp).metadata.title == "From XMP")
        let huge = [UInt8](repeating: 0x20, count: 10 << 20)
        let (metadata, ignored) = reader.read(exif: huge, iptc: iptc, xmp: huge)
        #expect(metadata.title == "From IPTC")
        #expect(ignored.count == 2, "\(ignored)")
        // Truncated and random blocks.
        var generator = SystemRandomNumberGenerator()
        for length in [0, 1, 7, 8, 13, 100, 1000] {
            let noise = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            for prefix in [[], Array("II*\0\u{8}\0\0\0".utf8), Array("MM\0*\0\0\0\u{8}".utf8)] as [[UInt8]] {
                _ = reader.read(exif: prefix + noise, iptc: [0x1C] + noise, xmp: noise)
            }
        }
        // An IIM dataset claiming more bytes than the block holds is not read.
        let short: [UInt8] = [0x1C, 2, 5, 0xFF, 0xF0] + Array("x".utf8)
        #expect(reader.read(exif: nil, iptc: short, xmp: nil).metadata.title == nil)
    }
}
