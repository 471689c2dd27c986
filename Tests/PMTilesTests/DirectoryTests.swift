import PMTiles
import Testing
import TilerTestSupport

/// Varints, directories and gzip round trips over generated inputs, and refusal of
/// truncated or corrupt bytes.
struct DirectoryTests {
    @Test func varintsRoundTrip() {
        var generator = SplitMix(seed: 1)
        var values: [UInt64] = [0, 1, 127, 128, 255, 256, 16383, 16384, UInt64(UInt32.max), UInt64.max, UInt64.max - 1]
        for shift in 0..<64 { values.append(UInt64(1) << UInt64(shift)); values.append((UInt64(1) << UInt64(shift)) - 1) }
        for _ in 0..<2000 { values.append(generator.next() >> (generator.next() % 64)) }
        var bytes: [UInt8] = []
        for v in values { Varint.append(v, to: &bytes) }
        bytes.withUnsafeBytes { raw in
            var at = 0
            for v in values { #expect(Varint.read(raw, at: &at) == v) }
            #expect(at == raw.count)
        }
        // Known encodings: 300 = AC 02; UInt64.max takes ten bytes.
        var three: [UInt8] = []
        Varint.append(300, to: &three)
        #expect(three == [0xAC, 0x02])
        var max: [UInt8] = []
        Varint.append(.max, to: &max)
        #expect(max.count == Varint.maximumBytes)
    }

    @Test func varintsRefuseOverflowAndTruncation() {
        let cases: [[UInt8]] = [
            [], [0x80], [0xFF, 0xFF], Array(repeating: 0xFF, count: 9) + [0x02], Array(repeating: 0x80, count: 11) + [0],
        ]
        for bytes in cases {
            bytes.withUnsafeBytes { raw in
                var at = 0
                #expect(Varint.read(raw, at: &at) == nil, "\(bytes)")
                #expect(at == 0)
            }
        }
    }

    /// Sorted entries with runs, contiguous and non-contiguous offsets and leaf
    /// pointers, generated at many sizes, decode to themselves.
    @Test(arguments: [1, 2, 3, 10, 100, 1000, 10_000])
    func directoriesRoundTrip(count: Int) throws {
        var generator = SplitMix(seed: UInt64(count))
        let entries = Self.entries(count: count, using: &generator)
        let decoded = try Directory.decode(Directory.encode(entries))
        #expect(decoded == entries)
        for compression in [Compression.none, .gzip] {
            let packed = compression.compress(Directory.encode(entries))
            let unpacked = try packed.withUnsafeBytes { try compression.decompress($0, limit: 1 << 24) }
            #expect(try Directory.decode(unpacked) == entries)
        }
    }

    /// `find` agrees with a linear scan for ids inside, between and past the runs.
    @Test func findAgreesWithScan() {
        var generator = SplitMix(seed: 99)
        for count in [1, 2, 5, 50, 500] {
            let entries = Self.entries(count: count, using: &generator)
            let last = entries.last!.tileID + UInt64(max(1, entries.last!.runLength)) + 3
            for id in stride(from: UInt64(0), through: last, by: max(1, Int(last / 400))) {
                let expected = entries.lastIndex { $0.tileID <= id }.flatMap { i in
                    entries[i].runLength == 0 || id - entries[i].tileID < UInt64(entries[i].runLength) ? i : nil
                }
                #expect(Directory.find(id, in: entries) == expected, "id \(id)")
            }
        }
    }

    /// Every prefix of a valid directory is refused (the entry count promises more), and
    /// so is a directory with bytes after it; no prefix traps.
    @Test func truncatedDirectoriesAreRefused() {
        var generator = SplitMix(seed: 5)
        let bytes = Directory.encode(Self.entries(count: 40, using: &generator))
        for n in 0..<bytes.count {
            #expect(throws: ArchiveFormatError.self) { try Directory.decode(Array(bytes.prefix(n))) }
        }
        #expect(throws: ArchiveFormatError.self) { try Directory.decode(bytes + [0]) }
    }

    @Test func corruptDirectoriesAreRefused() {
        func encoded(_ values: [UInt64]) -> [UInt8] {
            var b: [UInt8] = []
            for v in values { Varint.append(v, to: &b) }
            return b
        }
        let cases: [(String, [UInt8])] = [
            ("no entries", encoded([0])),
            ("a count far beyond the bytes", encoded([1 << 40, 1, 1, 1, 1])),
            ("ids not increasing", encoded([2, 5, 0, 1, 1, 10, 10, 1, 0])),
            ("a zero length", encoded([1, 0, 1, 0, 1])),
            ("a length past 32 bits", encoded([1, 0, 1, 1 << 33, 1])),
            ("a first offset of 0", encoded([1, 0, 1, 10, 0])),
            ("overlapping runs", encoded([2, 0, 3, 5, 1, 10, 10, 1, 0])),
            ("a run length past 32 bits", encoded([1, 0, 1 << 32, 10, 1])),
        ]
        for (what, bytes) in cases {
            #expect(throws: ArchiveFormatError.self, "\(what)") { try Directory.decode(bytes) }
        }
    }

    /// Random bytes never trap the decoder, and random mutations of a gzip directory
    /// either fail cleanly or decode to something sorted.
    @Test func randomBytesNeverTrap() {
        var generator = SplitMix(seed: 7)
        for _ in 0..<3000 {
            let n = Int(generator.next() % 64)
            let bytes = (0..<n).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            _ = try? Directory.decode(bytes)
            _ = try? bytes.withUnsafeBytes { try Gzip.decompress($0, limit: 1 << 16) }
        }
        let valid = Gzip.compress(Directory.encode(Self.entries(count: 200, using: &generator)))
        for _ in 0..<2000 {
            var mutated = valid
            let i = Int(generator.next() % UInt64(mutated.count))
            mutated[i] ^= UInt8(truncatingIfNeeded: generator.next() | 1)
            if let raw = try? mutated.withUnsafeBytes({ try Gzip.decompress($0, limit: 1 << 20) }),
                let entries = try? Directory.decode(raw)
            {
                #expect(zip(entries, entries.dropFirst()).allSatisfy { $0.tileID < $1.tileID })
            }
        }
    }

    @Test func gzipRoundTripsAndBoundsOutput() throws {
        var generator = SplitMix(seed: 3)
        for size in [0, 1, 100, 65_536, 1 << 20] {
            let bytes = (0..<size).map { i in UInt8(truncatingIfNeeded: i % 7 == 0 ? generator.next() : UInt64(i)) }
            let packed = Gzip.compress(bytes)
            #expect(packed.prefix(2) == [0x1F, 0x8B])
            #expect(try packed.withUnsafeBytes { try Gzip.decompress($0, limit: size) } == bytes)
            if size > 0 {
                #expect(throws: ArchiveFormatError.self) { try packed.withUnsafeBytes { try Gzip.decompress($0, limit: size - 1) } }
                #expect(throws: ArchiveFormatError.self) {
                    try Array(packed.dropLast(5)).withUnsafeBytes { try Gzip.decompress($0, limit: size) }
                }
            }
        }
        // A gzip bomb: 64 MiB of zeros is refused at a 1 MiB limit without inflating it all.
        let bomb = Gzip.compress([UInt8](repeating: 0, count: 64 << 20))
        #expect(bomb.count < 100_000)
        #expect(throws: ArchiveFormatError.self) { try bomb.withUnsafeBytes { try Gzip.decompress($0, limit: 1 << 20) } }
    }

    /// Sorted entries: ids spaced by the previous run, runs of 1...4 (or 0, a leaf
    /// pointer, now and then), offsets mostly contiguous, sometimes jumping back or ahead.
    static func entries(count: Int, using generator: inout SplitMix) -> [DirectoryEntry] {
        var entries: [DirectoryEntry] = []
        var id = generator.next() % 1000
        var offset = generator.next() % 100
        for _ in 0..<count {
            let run = generator.next() % 10 == 0 ? 0 : UInt32(1 + generator.next() % 4)
            let length = UInt32(1 + generator.next() % 70_000)
            switch generator.next() % 10 {
            case 0: offset = generator.next() % 1_000_000_000_000
            case 1: offset = offset / 2
            default: break
            }
            entries.append(DirectoryEntry(tileID: id, offset: offset, length: length, runLength: run))
            offset += UInt64(length)
            id += UInt64(max(1, run)) + (generator.next() % 3 == 0 ? generator.next() % 50 : 0)
        }
        return entries
    }
}

/// Issue #31 item 1: a gzip "bomb" directory, a few kilobytes that claim millions of
/// entries, is refused as soon as its entry count is inflated, before the rest of it is
/// inflated or any entry allocated.
struct DirectoryBombTests {
    /// The raw bytes of a directory of `count` tiles of one byte each (ids 0, 1, 2, ...):
    /// four bytes an entry, all alike, so gzip shrinks it a thousandfold.
    static func bomb(entries count: Int) -> [UInt8] {
        var raw: [UInt8] = []
        Varint.append(UInt64(count), to: &raw)
        raw += [UInt8](repeating: 1, count: 3 * count) + [1] + [UInt8](repeating: 0, count: count - 1)
        return raw
    }

    @Test func aDirectoryPastTheEntryLimitIsRefusedBeforeItIsInflated() throws {
        let raw = Self.bomb(entries: 3_000_000)
        let gzip = Gzip.compress(raw)
        #expect(gzip.count < 16_384, "\(gzip.count) bytes")
        var largest = 0
        do {
            _ = try gzip.withUnsafeBytes { buffer in
                try Compression.gzip.decompress(buffer, limit: 16 << 20) { (prefix) throws(ArchiveFormatError) in
                    largest = max(largest, prefix.count)
                    return try Directory.byteBound(prefix, maximumEntries: 262_144)
                }
            }
            Issue.record("accepted")
        } catch let error as ArchiveFormatError {
            #expect(error.description.contains("3000000 entries, more than the 262144 allowed"), "\(error)")
        }
        // Stopped after the first chunk of output, not at 12 MB.
        #expect(largest <= 1 << 20, "inflated \(largest) bytes first")
        #expect(throws: ArchiveFormatError.self) { try Directory.decode(raw, maximumEntries: 262_144) }
        // Within the limit, the same directory decodes; a stream longer than its count
        // allows is cut off at the bound.
        let small = Self.bomb(entries: 1000)
        let entries = try Gzip.compress(small).withUnsafeBytes { buffer in
            try Compression.gzip.decompress(buffer, limit: 16 << 20) { (prefix) throws(ArchiveFormatError) in
                try Directory.byteBound(prefix, maximumEntries: 1000)
            }
        }
        #expect(try Directory.decode(entries, maximumEntries: 1000).count == 1000)
        var padded: [UInt8] = []
        Varint.append(1, to: &padded)
        padded += [UInt8](repeating: 0, count: 100_000)
        #expect(throws: ArchiveFormatError.self) {
            try Gzip.compress(padded).withUnsafeBytes { buffer in
                try Compression.gzip.decompress(buffer, limit: 16 << 20) { (prefix) throws(ArchiveFormatError) in
                    try Directory.byteBound(prefix, maximumEntries: 10)
                }
            }
        }
    }
}
