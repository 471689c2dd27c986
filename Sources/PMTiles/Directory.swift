/// One directory entry: a run of tiles stored at `offset` (relative to the tile data
/// section) with `length` bytes, or, when `runLength` is 0, a leaf directory at `offset`
/// in the leaf section whose first tile id is `tileID`.
public struct DirectoryEntry: Sendable, Hashable {
    public var tileID: UInt64
    public var offset: UInt64
    public var length: UInt32
    /// Consecutive tile ids with these bytes; 0 for a leaf directory.
    public var runLength: UInt32

    public init(tileID: UInt64, offset: UInt64, length: UInt32, runLength: UInt32) {
        self.tileID = tileID
        self.offset = offset
        self.length = length
        self.runLength = runLength
    }

    /// Whether the entry points to a leaf directory rather than tiles.
    public var isLeaf: Bool { runLength == 0 }
}

/// Directory serialization (spec v3, "Directory Serialization"), before the internal
/// compression: the entry count, then four columns of varints: tile id deltas, run
/// lengths, lengths, and offsets (0 for "right after the previous entry", else
/// offset + 1).
public enum Directory {
    /// The uncompressed bytes of `entries`, which must be sorted by tile id.
    public static func encode(_ entries: [DirectoryEntry]) -> [UInt8] {
        var b: [UInt8] = []
        b.reserveCapacity(1 + entries.count * 6)
        Varint.append(UInt64(entries.count), to: &b)
        var last: UInt64 = 0
        for e in entries {
            precondition(e.tileID >= last, "directory entries must be sorted by tile id")
            Varint.append(e.tileID - last, to: &b)
            last = e.tileID
        }
        for e in entries { Varint.append(UInt64(e.runLength), to: &b) }
        for e in entries { Varint.append(UInt64(e.length), to: &b) }
        for (i, e) in entries.enumerated() {
            if i > 0, e.offset == entries[i - 1].offset + UInt64(entries[i - 1].length) {
                Varint.append(0, to: &b)
            } else {
                Varint.append(e.offset + 1, to: &b)
            }
        }
        return b
    }

    /// The most bytes a directory can take once its first bytes are known: its entry
    /// count, then four varints of at most ten bytes per entry. nil while the count is
    /// still incomplete; throws for a count past `maximumEntries` (so a reader stops
    /// inflating a directory it would refuse as soon as the count is out) or past 64 bits.
    public static func byteBound(_ prefix: UnsafeRawBufferPointer, maximumEntries: Int) throws(ArchiveFormatError) -> Int? {
        var at = 0
        guard let count = Varint.read(prefix, at: &at) else {
            if prefix.count >= Varint.maximumBytes { throw .corrupt("directory entry count past 64 bits") }
            return nil
        }
        try checkCount(count, maximumEntries: maximumEntries)
        return at + Int(count) * 4 * Varint.maximumBytes
    }

    static func checkCount(_ count: UInt64, maximumEntries: Int) throws(ArchiveFormatError) {
        guard count <= UInt64(max(0, maximumEntries)) else {
            throw .tooLarge("a directory of \(count) entries, more than the \(maximumEntries) allowed")
        }
    }

    /// Decodes uncompressed directory bytes, checking everything a reader relies on:
    /// at least one entry and at most `maximumEntries`, no more entries than the bytes can
    /// hold (so the count never sizes an allocation past the input or the limit), ids
    /// strictly increasing and runs not overlapping, lengths above 0 and within 32 bits,
    /// no value past 64 bits, and every byte used.
    public static func decode(
        _ bytes: UnsafeRawBufferPointer, maximumEntries: Int = .max
    ) throws(ArchiveFormatError) -> [DirectoryEntry] {
        var at = 0
        func next(_ what: String) throws(ArchiveFormatError) -> UInt64 {
            guard let v = Varint.read(bytes, at: &at) else {
                // Failed reads leave `at` alone: a varint still open when the bytes end is
                // truncation, one running past 64 bits is corruption.
                let rest = bytes[at...]
                let open = rest.count < Varint.maximumBytes && !rest.contains { $0 & 0x80 == 0 }
                throw open ? .truncated("directory ends inside \(what)") : .corrupt("directory \(what) past 64 bits")
            }
            return v
        }
        let count64 = try next("the entry count")
        // Each entry takes at least one byte in each of the four columns.
        guard count64 > 0 else { throw .corrupt("directory has no entries") }
        try checkCount(count64, maximumEntries: maximumEntries)
        guard count64 <= UInt64((bytes.count - at) / 4) else {
            throw .truncated("directory claims \(count64) entries but holds \(bytes.count) bytes")
        }
        let count = Int(count64)
        var entries = [DirectoryEntry](repeating: DirectoryEntry(tileID: 0, offset: 0, length: 0, runLength: 0), count: count)
        var id: UInt64 = 0
        for i in 0..<count {
            let delta = try next("tile ids")
            guard i == 0 || delta > 0 else { throw .corrupt("directory tile ids are not increasing at entry \(i)") }
            let (sum, overflow) = id.addingReportingOverflow(delta)
            guard !overflow else { throw .corrupt("directory tile id past 64 bits at entry \(i)") }
            id = sum
            entries[i].tileID = id
        }
        for i in 0..<count {
            let run = try next("run lengths")
            guard run <= UInt64(UInt32.max) else { throw .corrupt("run length \(run) past 32 bits at entry \(i)") }
            entries[i].runLength = UInt32(run)
        }
        for i in 0..<count {
            let length = try next("lengths")
            guard length > 0, length <= UInt64(UInt32.max) else { throw .corrupt("entry \(i) has length \(length)") }
            entries[i].length = UInt32(length)
        }
        for i in 0..<count {
            let raw = try next("offsets")
            if raw == 0 {
                guard i > 0 else { throw .corrupt("the first directory entry has no offset") }
                let (end, overflow) = entries[i - 1].offset.addingReportingOverflow(UInt64(entries[i - 1].length))
                guard !overflow else { throw .corrupt("entry \(i) offset past 64 bits") }
                entries[i].offset = end
            } else {
                entries[i].offset = raw - 1
            }
        }
        guard at == bytes.count else { throw .corrupt("\(bytes.count - at) stray bytes after the directory") }
        for i in 1..<max(1, count) where entries[i - 1].runLength > 0 {
            let (end, overflow) = entries[i - 1].tileID.addingReportingOverflow(UInt64(entries[i - 1].runLength))
            guard !overflow, end <= entries[i].tileID else { throw .corrupt("directory runs overlap at entry \(i)") }
        }
        return entries
    }

    /// Decodes uncompressed directory bytes.
    public static func decode(_ bytes: [UInt8], maximumEntries: Int = .max) throws(ArchiveFormatError) -> [DirectoryEntry] {
        try bytes.withBytes { (raw) throws(ArchiveFormatError) in try decode(raw, maximumEntries: maximumEntries) }
    }

    /// The index of the entry that holds `tileID` (a run containing it, or the leaf
    /// directory that may hold it), or nil when the directory has none.
    public static func find(_ tileID: UInt64, in entries: [DirectoryEntry]) -> Int? {
        // The last entry whose id is at most tileID.
        var low = 0, high = entries.count
        while low < high {
            let mid = low + (high - low) / 2
            if entries[mid].tileID <= tileID { low = mid + 1 } else { high = mid }
        }
        guard low > 0 else { return nil }
        let e = entries[low - 1]
        if e.runLength == 0 || tileID - e.tileID < UInt64(e.runLength) { return low - 1 }
        return nil
    }
}

/// A finished directory tree: the root directory and the leaf directories behind it,
/// compressed, ready to be written.
public struct DirectoryLayout: Sendable {
    /// The compressed root directory.
    public let root: [UInt8]
    /// The compressed leaf directories, one after the other (empty without leaves).
    public let leaves: [UInt8]
    /// How many leaf directories there are.
    public let leafCount: Int
    /// Tile entries per leaf (0 without leaves).
    public let entriesPerLeaf: Int

    /// Lays out `entries` (sorted by tile id, all with `runLength > 0`) as one root
    /// directory if it fits in `rootLimit` compressed bytes, else as leaves of
    /// `initialLeafSize` entries (grown by a fifth until the root of leaf pointers fits).
    public init(
        entries: [DirectoryEntry], compression: Compression,
        rootLimit: Int = ArchiveHeader.headerAndRootLimit - ArchiveHeader.size,
        initialLeafSize: Int = 4096
    ) {
        precondition(!entries.isEmpty, "an archive needs at least one tile")
        let whole = compression.compress(Directory.encode(entries))
        if whole.count <= rootLimit {
            self.init(root: whole, leaves: [], leafCount: 0, entriesPerLeaf: 0)
            return
        }
        var leafSize = max(1, initialLeafSize)
        while true {
            var leaves: [UInt8] = []
            var pointers: [DirectoryEntry] = []
            var start = 0
            while start < entries.count {
                let end = min(start + leafSize, entries.count)
                let leaf = compression.compress(Directory.encode(Array(entries[start..<end])))
                pointers.append(
                    DirectoryEntry(
                        tileID: entries[start].tileID, offset: UInt64(leaves.count),
                        length: UInt32(leaf.count), runLength: 0))
                leaves.append(contentsOf: leaf)
                start = end
            }
            let root = compression.compress(Directory.encode(pointers))
            if root.count <= rootLimit || pointers.count == 1 {
                self.init(root: root, leaves: leaves, leafCount: pointers.count, entriesPerLeaf: leafSize)
                return
            }
            leafSize += max(1, leafSize / 5)
        }
    }

    private init(root: [UInt8], leaves: [UInt8], leafCount: Int, entriesPerLeaf: Int) {
        self.root = root
        self.leaves = leaves
        self.leafCount = leafCount
        self.entriesPerLeaf = entriesPerLeaf
    }
}
