import Foundation
import PMTiles
import Testing
import TilerCore
import TilerTestSupport
@testable import TilerStorage

/// Truncated, corrupt and hostile archives: refused with an error naming the file, never
/// a trap, and never a read (so never an allocation) sized by what the file claims.
@Suite struct CorruptArchiveTests {
    /// A 20000² synthetic pyramid with leaf directories, in memory.
    static let sample: (bytes: [UInt8], pyramid: SyntheticPyramid) = {
        let scratch = try! Scratch("corrupt-sample")
        defer { scratch.cleanUp() }
        let pyramid = try! SyntheticPyramid(width: 20000, height: 20000)
        _ = try! pyramid.write(to: ArchiveSink(root: scratch.path, id: pyramid.id, geometry: pyramid.geometry, format: .png))
        return (try! [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(scratch.path)/sample.pmtiles"))), pyramid)
    }()

    static func open(_ bytes: [UInt8]) throws(StorageError) -> ArchivedPyramid {
        try ArchivedPyramid(reader: ArchiveReader(source: MemoryArchiveSource(bytes, name: "bad.pmtiles")))
    }

    /// Any prefix of an archive is refused at open: the tile data section (and so the
    /// file) ends at a known length.
    @Test func everyTruncationIsRefusedAtOpen() {
        let bytes = Self.sample.bytes
        var lengths = Array(0..<600) + Array(stride(from: 600, to: bytes.count, by: 997)) + [bytes.count - 1]
        lengths += [Int(try! ArchiveHeader(decoding: bytes).tileDataOffset)]
        for n in lengths {
            do {
                _ = try Self.open(Array(bytes.prefix(n)))
                Issue.record("a \(n)-byte prefix was accepted")
            } catch {
                #expect(error.description.hasPrefix("bad.pmtiles: "), "\(error)")
            }
        }
    }

    /// Random changes to the header, directories and metadata: each is refused at open,
    /// or found at lookup, or harmless; every location handed out lies inside the file.
    @Test func randomCorruptionNeverTraps() {
        let bytes = Self.sample.bytes
        let header = try! ArchiveHeader(decoding: bytes)
        // Everything but the tile data: header and root at the start, metadata and leaves
        // after the tile data.
        let rootEnd = Int(header.rootOffset + header.rootLength)
        let afterTiles = Int(header.metadataOffset)
        var generator = SplitMix(seed: 2024)
        let probes = Array(
            Self.sample.pyramid.tiles.keys.sorted { PyramidArchive.tileID($0) < PyramidArchive.tileID($1) }
                .enumerated().filter { $0.offset % 37 == 0 }.map(\.element))
        var refusedAtOpen = 0, refusedAtLookup = 0
        for trial in 0..<1500 {
            var mutated = bytes
            for _ in 0..<(1 + Int(generator.next() % 3)) {
                // Half the trials hit the header and root, half the metadata and leaves.
                let at =
                    trial % 2 == 0
                    ? Int(generator.next() % UInt64(rootEnd))
                    : afterTiles + Int(generator.next() % UInt64(bytes.count - afterTiles))
                mutated[at] ^= UInt8(truncatingIfNeeded: generator.next() | 1)
            }
            let archive: ArchivedPyramid
            do {
                archive = try Self.open(mutated)
            } catch {
                refusedAtOpen += 1
                #expect(error.description.hasPrefix("bad.pmtiles: "))
                continue
            }
            for tile in probes {
                do {
                    if let location = try archive.location(of: tile) {
                        #expect(location.offset + UInt64(location.length) <= UInt64(mutated.count))
                    }
                } catch {
                    refusedAtLookup += 1
                    #expect(error.description.hasPrefix("bad.pmtiles: "))
                    break
                }
            }
        }
        // Flips in bounds, counts or unused leaf bytes are harmless; most others are caught.
        #expect(refusedAtOpen > 50 && refusedAtLookup > 50, "refused at open \(refusedAtOpen), at lookup \(refusedAtLookup)")
    }

    /// A source that claims a petabyte of zeros behind a forged header: the reader asks
    /// for no more than its limits, whatever the header says.
    @Test func claimedSizesNeverSizeAReadOrAllocation() throws {
        for field in [16, 32, 48] {  // root, metadata and leaf lengths
            var header = try ArchiveHeader(decoding: Self.sample.bytes)
            let huge: UInt64 = 1 << 45
            switch field {
            case 16: header.rootLength = huge
            case 32: header.metadataLength = huge
            default: header.leafDirectoryLength = huge
            }
            let source = CountingSource(ForgedSource(header: header.encoded(), rest: Self.sample.bytes, size: 1 << 50))
            do {
                let archive = try ArchivedPyramid(reader: ArchiveReader(source: source))
                for tile in Self.sample.pyramid.tiles.keys { _ = try archive.location(of: tile) }
                // A longer leaf section only widens where leaves may be: harmless.
                #expect(field == 48, "field \(field) was accepted")
            } catch {
                // A root past the first 16 KiB is refused for that before its size matters.
                let reason = field == 16 ? "outside the first 16384 bytes" : "too large"
                #expect(error.description.contains(reason), "\(error)")
            }
            #expect(source.largestRead <= ArchiveReader.Limits().directoryBytes, "field \(field): a read of \(source.largestRead) bytes")
        }
    }

    @Test func specificDamageIsNamed() throws {
        let bytes = Self.sample.bytes
        let header = try ArchiveHeader(decoding: bytes)
        func refused(_ change: (inout [UInt8]) -> Void, _ phrase: String, sourceLocation: SourceLocation = #_sourceLocation) {
            var copy = bytes
            change(&copy)
            do {
                let archive = try Self.open(copy)
                for tile in Self.sample.pyramid.tiles.keys { _ = try archive.location(of: tile) }
                Issue.record("accepted", sourceLocation: sourceLocation)
            } catch {
                #expect(error.description.contains(phrase), "\(error)", sourceLocation: sourceLocation)
            }
        }
        refused({ $0[0] = 0 }, "not a PMTiles archive")
        refused({ $0[7] = 2 }, "PMTiles version 2 is not supported")
        refused({ $0[97] = 3 }, "brotli internal compression")
        refused({ $0[99] = 3 }, "tile type is jpeg but the manifest says png")
        refused({ $0[101] = 9 }, "zooms 0...9 do not match levels 0...7")
        refused({ $0[98] = 2 }, "gzip-compressed")
        // The root's gzip stream damaged in its middle.
        refused({ $0[Int(header.rootOffset) + Int(header.rootLength) / 2] ^= 0xFF }, "corrupt archive")
        // A leaf directory's bytes damaged: found when a tile needs that leaf.
        refused({ $0[Int(header.leafDirectoryOffset) + 40] ^= 0xFF }, "corrupt archive")
        // The metadata replaced by valid gzip of JSON without a manifest.
        refused(
            { b in
                let json = Gzip.compress(Array(#"{"name":"x"}"#.utf8))
                var h = header
                h.metadataLength = UInt64(json.count)
                b.replaceSubrange(0..<127, with: h.encoded())
                b.replaceSubrange(Int(h.metadataOffset)..<(Int(h.metadataOffset) + json.count), with: json)
            }, "has no \"tiler\" manifest")
    }

    /// A root entry pointing past the leaf section is caught when the root is read.
    @Test func entriesOutsideTheirSectionAreRefused() throws {
        let bytes = Self.sample.bytes
        var header = try ArchiveHeader(decoding: bytes)
        header.leafDirectoryLength -= 1  // the last leaf now overhangs the leaf section
        var copy = bytes
        copy.replaceSubrange(0..<127, with: header.encoded())
        #expect(throws: StorageError.self) { try Self.open(copy) }
    }

    @Test func jsonSpansAreFoundAsWritten() {
        func span(_ json: String, _ key: String) -> String? {
            let bytes = Array(json.utf8)
            return JSONSpan.value(of: key, in: bytes).map { String(decoding: bytes[$0], as: UTF8.self) }
        }
        #expect(span(#"{"a":1,"tiler":{"x":[1,{"y":"}"}]},"b":2}"#, "tiler") == #"{"x":[1,{"y":"}"}]}"#)
        #expect(span(#" { "tiler" : "s\"}" , "z": null } "#, "tiler") == #""s\"}""#)
        #expect(span(#"{"a":{"tiler":1}}"#, "tiler") == nil)
        #expect(span(#"{"a":-1.5e3,"tiler":true}"#, "tiler") == "true")
        #expect(span(#"{"tiler""#, "tiler") == nil)
        #expect(span(#"[1,2]"#, "tiler") == nil)
        #expect(span(#"{"tiler":{"a":1"#, "tiler") == nil)
    }
}

/// A header followed by another archive's bytes, then zeros, up to a claimed size.
struct ForgedSource: ArchiveSource {
    let header: [UInt8]
    let rest: [UInt8]
    let size: UInt64
    var name: String { "forged.pmtiles" }

    func read(offset: UInt64, length: Int) throws(StorageError) -> [UInt8] {
        guard offset + UInt64(length) <= size else { throw .io(path: name, reason: "past the end") }
        guard length <= 64 << 20 else { throw .io(path: name, reason: "test refuses a \(length)-byte read") }
        return (0..<length).map { i in
            let at = Int(offset) + i
            return at < 127 ? header[at] : at < rest.count ? rest[at] : 0
        }
    }
}
