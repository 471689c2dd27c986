import PMTiles
import Testing
import TilerTestSupport

struct ArchiveHeaderTests {
    @Test func headersRoundTrip() throws {
        var generator = SplitMix(seed: 11)
        for _ in 0..<500 {
            var h = ArchiveHeader()
            h.rootOffset = generator.next(); h.rootLength = generator.next()
            h.metadataOffset = generator.next(); h.metadataLength = generator.next()
            h.leafDirectoryOffset = generator.next(); h.leafDirectoryLength = generator.next()
            h.tileDataOffset = generator.next(); h.tileDataLength = generator.next()
            h.addressedTiles = generator.next(); h.tileEntries = generator.next(); h.tileContents = generator.next()
            h.clustered = generator.next() % 2 == 0
            h.internalCompression = Compression(rawValue: UInt8(generator.next() % 5))!
            h.tileCompression = Compression(rawValue: UInt8(generator.next() % 5))!
            h.tileType = TileType(rawValue: UInt8(generator.next() % 6))!
            h.minZoom = UInt8(truncatingIfNeeded: generator.next()); h.maxZoom = UInt8(truncatingIfNeeded: generator.next())
            h.minLongitudeE7 = Int32(truncatingIfNeeded: generator.next()); h.minLatitudeE7 = Int32(truncatingIfNeeded: generator.next())
            h.maxLongitudeE7 = Int32(truncatingIfNeeded: generator.next()); h.maxLatitudeE7 = Int32(truncatingIfNeeded: generator.next())
            h.centerZoom = UInt8(truncatingIfNeeded: generator.next())
            h.centerLongitudeE7 = Int32(truncatingIfNeeded: generator.next());
            h.centerLatitudeE7 = Int32(truncatingIfNeeded: generator.next())
            let bytes = h.encoded()
            #expect(bytes.count == 127)
            #expect(try ArchiveHeader(decoding: bytes) == h)
        }
    }

    /// The byte positions the spec's table gives.
    @Test func fieldsSitWhereTheSpecSays() {
        var h = ArchiveHeader()
        h.rootOffset = 127
        h.tileDataLength = 0x0102_0304_0506_0708
        h.clustered = true
        h.internalCompression = .gzip
        h.tileCompression = .none
        h.tileType = .webp
        h.minZoom = 0
        h.maxZoom = 7
        h.minLongitudeE7 = -1_800_000_000
        h.centerLatitudeE7 = -1
        let b = h.encoded()
        #expect(Array(b[0..<7]) == Array("PMTiles".utf8) && b[7] == 3)
        #expect(Array(b[8..<16]) == [127, 0, 0, 0, 0, 0, 0, 0])
        #expect(Array(b[64..<72]) == [8, 7, 6, 5, 4, 3, 2, 1])
        #expect(b[96] == 1 && b[97] == 2 && b[98] == 1 && b[99] == 4 && b[100] == 0 && b[101] == 7)
        #expect(Array(b[102..<106]) == [0x00, 0x2E, 0xB6, 0x94])
        #expect(Array(b[123..<127]) == [0xFF, 0xFF, 0xFF, 0xFF])
    }

    @Test func badHeadersAreRefused() {
        let good = ArchiveHeader().encoded()
        #expect(throws: ArchiveFormatError.truncated("the header needs 127 bytes, the file has 126")) {
            try ArchiveHeader(decoding: good.dropLast())
        }
        var magic = good
        magic[0] = UInt8(ascii: "X")
        #expect(throws: ArchiveFormatError.notAnArchive) { try ArchiveHeader(decoding: magic) }
        var version = good
        version[7] = 2
        #expect(throws: ArchiveFormatError.unsupportedVersion(2)) { try ArchiveHeader(decoding: version) }
        var compression = good
        compression[97] = 9
        #expect(throws: ArchiveFormatError.self) { try ArchiveHeader(decoding: compression) }
    }

    @Test func sectionsMustLieInsideTheFile() throws {
        var h = ArchiveHeader()
        h.rootOffset = 127; h.rootLength = 10
        h.metadataOffset = 137; h.metadataLength = 5
        h.leafDirectoryOffset = 142; h.tileDataOffset = 142; h.tileDataLength = 100
        try h.checkSections(fileSize: 242)
        #expect(throws: ArchiveFormatError.self) { try h.checkSections(fileSize: 241) }
        h.tileDataLength = UInt64.max
        #expect(throws: ArchiveFormatError.self) { try h.checkSections(fileSize: .max) }
        h.tileDataLength = 100
        h.rootLength = 0
        #expect(throws: ArchiveFormatError.self) { try h.checkSections(fileSize: 242) }
    }

    /// Issue #31 item 1: the spec puts the header and the root directory in the first
    /// 16,384 bytes; a root anywhere else (where it could be megabytes of gzip) is refused.
    @Test func theRootMustLieInTheFirst16KiB() throws {
        var h = ArchiveHeader()
        h.rootOffset = 127; h.rootLength = 16_384 - 127
        h.tileDataOffset = 16_384; h.tileDataLength = 1 << 20
        try h.checkSections(fileSize: 16_384 + 1 << 20)
        h.rootLength += 1
        #expect(throws: ArchiveFormatError.self) { try h.checkSections(fileSize: 16_384 + 1 << 20) }
        h.rootOffset = 20_000; h.rootLength = 100
        do {
            try h.checkSections(fileSize: 16_384 + 1 << 20)
            Issue.record("a root at byte 20000 was accepted")
        } catch {
            #expect(error.description.contains("outside the first 16384 bytes"), "\(error)")
        }
    }

    /// A root of leaf pointers is built when the entries do not fit in 16 KiB, and every
    /// tile is reachable through it.
    @Test(arguments: [1, 500, 5000, 60_000])
    func layoutsKeepTheRootSmall(count: Int) throws {
        var entries: [DirectoryEntry] = []
        var generator = SplitMix(seed: UInt64(count))
        var offset: UInt64 = 0
        for i in 0..<count {
            let length = UInt32(1 + generator.next() % 100_000)
            entries.append(DirectoryEntry(tileID: UInt64(i) * 3 + generator.next() % 3, offset: offset, length: length, runLength: 1))
            offset += UInt64(length)
        }
        let layout = DirectoryLayout(entries: entries, compression: .gzip)
        #expect(ArchiveHeader.size + layout.root.count <= ArchiveHeader.headerAndRootLimit)
        let root = try layout.root.withUnsafeBytes { try Directory.decode(Compression.gzip.decompress($0, limit: 1 << 24)) }
        var rebuilt: [DirectoryEntry] = []
        for pointer in root {
            if !pointer.isLeaf { rebuilt.append(pointer); continue }
            let slice = Array(layout.leaves[Int(pointer.offset)..<Int(pointer.offset) + Int(pointer.length)])
            let leaf = try slice.withUnsafeBytes { try Directory.decode(Compression.gzip.decompress($0, limit: 1 << 24)) }
            #expect(leaf.first?.tileID == pointer.tileID)
            rebuilt += leaf
        }
        #expect(rebuilt == entries)
        if count <= 500 { #expect(layout.leafCount == 0) }
        if count >= 60000 { #expect(layout.leafCount > 1) }
    }
}

extension ArchiveHeaderTests {
    @Test func shortFilesSayWhatTheyAre() {
        #expect(throws: ArchiveFormatError.notAnArchive) { try ArchiveHeader(decoding: Array("hello".utf8)) }
        #expect(throws: ArchiveFormatError.notAnArchive) {
            try ArchiveHeader(decoding: Array("PMTilez".utf8) + [UInt8](repeating: 0, count: 120))
        }
        #expect(throws: ArchiveFormatError.truncated("the header needs 127 bytes, the file has 3")) {
            try ArchiveHeader(decoding: Array("PMT".utf8))
        }
    }
}
