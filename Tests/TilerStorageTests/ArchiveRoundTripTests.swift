import Foundation
import PMTiles
import Synchronization
import Testing
import TilerCore
import TilerSystem
import TilerTestSupport
@testable import TilerStorage

/// Archives written through `ArchiveSink` read back through `ArchivedPyramid`: every tile
/// byte for byte, the manifest and thumbnail, counts, dedup, leaves and the directory cache.
@Suite struct ArchiveRoundTripTests {
    @Test(arguments: [(1, 1, 256), (256, 256, 256), (3001, 1999, 256), (2999, 1, 256), (20000, 20000, 256), (1000, 700, 16)])
    func everyTileComesBack(width: Int, height: Int, tileSize: Int) throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let pyramid = try SyntheticPyramid(width: width, height: height, tileSize: tileSize, seed: UInt64(width * 7 + height))
        let sink = try ArchiveSink(root: scratch.path, id: pyramid.id, geometry: pyramid.geometry, format: .png)
        let bytes = try pyramid.write(to: sink)
        let path = "\(scratch.path)/sample.pmtiles"
        #expect(scratch.entries() == ["sample.pmtiles"], "ROOT holds \(scratch.entries())")

        let archive = try ArchivedPyramid.open(path: path)
        let h = archive.reader.header
        #expect(UInt64(bytes) == archive.reader.source.size)
        // Header and root in the first 16 KiB, then tile data, metadata and leaves back to
        // back to the end of the file: the spec's padded layout, as go-pmtiles verifies it.
        #expect(h.rootOffset == 127 && h.rootOffset + h.rootLength <= UInt64(ArchiveHeader.headerAndRootLimit))
        #expect(
            h.tileDataOffset == UInt64(ArchiveHeader.headerAndRootLimit)
                && h.metadataOffset == h.tileDataOffset + h.tileDataLength
                && h.leafDirectoryOffset == h.metadataOffset + h.metadataLength
                && h.leafDirectoryOffset + h.leafDirectoryLength == UInt64(bytes))
        #expect(UInt64(bytes) == UInt64(ArchiveHeader.headerAndRootLimit) + h.tileDataLength + h.metadataLength + h.leafDirectoryLength)
        #expect(h.tileType == .png && h.tileCompression == .none && h.internalCompression == .gzip)
        #expect(h.minZoom == 0 && Int(h.maxZoom) == pyramid.geometry.maxLevel)
        #expect(h.addressedTiles == UInt64(pyramid.tiles.count))
        // Identical tiles are stored once, except two finished at the same instant on two
        // threads, which may both be stored (ArchiveWriter's dedup is not a lock on content).
        #expect(
            h.tileContents >= UInt64(pyramid.distinctTiles) && h.tileContents <= UInt64(pyramid.distinctTiles) + 8,
            "\(h.tileContents) blobs for \(pyramid.distinctTiles) distinct tiles")
        #expect(h.tileEntries <= h.addressedTiles && h.tileEntries >= h.tileContents)
        #expect(h.minLongitudeE7 < h.maxLongitudeE7 && h.minLatitudeE7 < h.maxLatitudeE7)
        #expect(
            (h.leafDirectoryLength > 0) == (pyramid.tiles.count > 8000),
            "\(pyramid.tiles.count) tiles, leaves \(h.leafDirectoryLength) bytes")

        #expect(archive.manifestBytes + [0x0A] == pyramid.manifest)
        #expect(archive.geometry == pyramid.geometry)
        #expect(try archive.thumbnailBytes() == pyramid.thumbnail)
        for (tile, expected) in pyramid.tiles {
            #expect(try archive.tile(tile) == expected, "tile \(tile)")
        }
        // Coordinates outside the pyramid are absent, not errors.
        let beyond = TileCoordinate(
            level: pyramid.geometry.maxLevel, row: pyramid.geometry.level(pyramid.geometry.maxLevel).rows, column: 0)
        #expect(try archive.tile(beyond) == nil)
        #expect(try archive.cachedLocation(of: beyond) == .absent)

        try Self.expectTileData(archive, distinctTiles: Int(h.tileContents), thumbnail: pyramid.thumbnail.count)
        // Written from many threads in a shuffled order, copied into tile-id order at
        // commit: clustered.
        #expect(h.clustered)
        try Self.expectClustered(archive)
    }

    /// Distinct blobs appear in tile-id order, each once, as the clustered flag says.
    static func expectClustered(_ archive: ArchivedPyramid) throws {
        var next: UInt64 = 0
        var seen = Set<UInt64>()
        try archive.reader.forEachTileEntry { entry in
            if seen.insert(entry.offset).inserted {
                #expect(entry.offset == next, "tile \(entry.tileID)'s bytes are not in tile-id order")
                next += UInt64(entry.length)
            } else {
                #expect(entry.offset < next)
            }
        }
    }

    /// Written in tile-id order from one thread, as `pack` writes, the tile data is in
    /// tile-id order and the header says clustered.
    @Test(arguments: [(3001, 1999), (20000, 20000)])
    func tilesInTileIDOrderMakeAClusteredArchive(width: Int, height: Int) throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let pyramid = try SyntheticPyramid(width: width, height: height, seed: 5)
        _ = try pyramid.write(
            to: ArchiveSink(root: scratch.path, id: pyramid.id, geometry: pyramid.geometry, format: .png),
            inTileIDOrder: true)
        let archive = try ArchivedPyramid.open(path: "\(scratch.path)/sample.pmtiles")
        #expect(archive.reader.header.clustered)
        try Self.expectTileData(archive, distinctTiles: pyramid.distinctTiles, thumbnail: pyramid.thumbnail.count)
        try Self.expectClustered(archive)
        // Already in order: finished in place, nothing copied (only the archive is left).
        #expect(scratch.entries() == ["sample.pmtiles"])
        for (tile, expected) in pyramid.tiles where tile.level == pyramid.geometry.maxLevel || tile.level < 3 {
            #expect(try archive.tile(tile) == expected, "tile \(tile)")
        }
    }

    /// Tiles go straight into the partial archive as they come: before commit, the hidden
    /// partial file already holds every distinct tile's bytes after the first 16 KiB, out
    /// of tile-id order. Commit copies them in tile-id order into a second partial file
    /// (with `copy_file_range`, or through memory where the kernel cannot: both paths),
    /// installs that one and removes the first: the archive is clustered, holds the same
    /// bytes, and nothing else is left in ROOT.
    @Test(arguments: [true, false])
    func commitCopiesTheTilesIntoTileIDOrder(kernelCopy: Bool) throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let pyramid = try SyntheticPyramid(width: 3001, height: 1999, seed: 9)
        let sink = try ArchiveSink(root: scratch.path, id: pyramid.id, geometry: pyramid.geometry, format: .png, kernelCopy: kernelCopy)
        // Level by level from the largest, row by row, as a cut makes them: not tile-id order.
        for (tile, bytes) in pyramid.tiles.sorted(by: {
            ($0.key.level, $0.key.row, $0.key.column) > ($1.key.level, $1.key.row, $1.key.column)
        }) {
            try sink.writeTile(tile, bytes)
        }
        let partials = scratch.entries()
        #expect(partials.count == 1 && partials[0].hasPrefix(".sample.pmtiles.partial-"), "ROOT holds \(partials)")
        let partial = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(scratch.path)/\(partials[0])")))
        let distinct = Set(pyramid.tiles.values)
        #expect(partial.count == ArchiveHeader.headerAndRootLimit + distinct.reduce(0) { $0 + $1.count })
        for bytes in distinct.prefix(50) {
            #expect(Data(partial).range(of: Data(bytes)) != nil)
        }
        try pyramid.thumbnail.withUnsafeBytes { try sink.writeThumbnail(named: "thumbnail.png", $0) }
        let size = try sink.commit(manifest: pyramid.manifest, replace: false)
        #expect(scratch.entries() == ["sample.pmtiles"], "ROOT holds \(scratch.entries())")
        let archive = try ArchivedPyramid.open(path: "\(scratch.path)/sample.pmtiles")
        let h = archive.reader.header
        #expect(h.clustered)
        try Self.expectClustered(archive)
        try Self.expectTileData(archive, distinctTiles: pyramid.distinctTiles, thumbnail: pyramid.thumbnail.count)
        let final = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(scratch.path)/sample.pmtiles")))
        let data = ArchiveHeader.headerAndRootLimit..<(ArchiveHeader.headerAndRootLimit + partial.count - ArchiveHeader.headerAndRootLimit)
        #expect(final[data] != partial[data], "the tile data was not reordered")
        #expect(final[data].sorted() == partial[data].sorted(), "the same bytes, moved")
        #expect(UInt64(size) == archive.reader.source.size && h.tileDataOffset == UInt64(ArchiveHeader.headerAndRootLimit))
        for (tile, expected) in pyramid.tiles { #expect(try archive.tile(tile) == expected) }
    }

    /// The tile data section holds each distinct tile exactly once, back to back, then
    /// the thumbnail: no gap, no overlap, nothing unreferenced.
    static func expectTileData(_ archive: ArchivedPyramid, distinctTiles: Int, thumbnail: Int) throws {
        var blobs: [UInt64: UInt32] = [:]
        try archive.reader.forEachTileEntry { entry in
            if let length = blobs[entry.offset] { #expect(length == entry.length) }
            blobs[entry.offset] = entry.length
        }
        #expect(blobs.count == distinctTiles && archive.reader.header.tileContents == UInt64(distinctTiles))
        var end: UInt64 = 0
        for (offset, length) in blobs.sorted(by: { $0.key < $1.key }) {
            #expect(offset == end, "a gap or an overlap at \(offset)")
            end = offset + UInt64(length)
        }
        #expect(end + UInt64(thumbnail) == archive.reader.header.tileDataLength)
    }

    /// Without the leaves in the cache a lookup that needs one says so and reads nothing;
    /// after a blocking lookup it is found without reading.
    @Test func cachedLookupsNeverRead() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let pyramid = try SyntheticPyramid(width: 20000, height: 20000)
        _ = try pyramid.write(to: ArchiveSink(root: scratch.path, id: pyramid.id, geometry: pyramid.geometry, format: .png))
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(scratch.path)/sample.pmtiles")))
        let source = CountingSource(MemoryArchiveSource(bytes, name: "sample.pmtiles"))
        let archive = try ArchivedPyramid(reader: ArchiveReader(source: source))
        #expect(source.reads == 2, "header + root in one read, then the metadata")
        let deep = TileCoordinate(level: 7, row: 40, column: 41)
        let before = source.reads
        #expect(try archive.cachedLocation(of: deep) == .needsRead)
        #expect(source.reads == before)
        let location = try #require(try archive.location(of: deep))
        #expect(source.reads == before + 1, "one leaf read")
        #expect(try archive.cachedLocation(of: deep) == .found(location))
        #expect(source.reads == before + 1)
        // Level 0 sits in the first leaf or the root; either way a second ask is free.
        _ = try archive.location(of: TileCoordinate(level: 0, row: 0, column: 0))
        let settled = source.reads
        if case .needsRead = try archive.cachedLocation(of: TileCoordinate(level: 0, row: 0, column: 0)) {
            Issue.record("level 0 not cached")
        }
        #expect(source.reads == settled)
    }

    /// A shared cache holds at most its capacity in entries, over several archives.
    @Test func directoryCacheIsBounded() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let pyramid = try SyntheticPyramid(width: 20000, height: 20000)
        _ = try pyramid.write(to: ArchiveSink(root: scratch.path, id: pyramid.id, geometry: pyramid.geometry, format: .png))
        let cache = DirectoryCache(capacity: 5000)
        let readers = try (0..<3).map { _ in try ArchivedPyramid.open(path: "\(scratch.path)/sample.pmtiles", cache: cache) }
        for reader in readers {
            for (tile, expected) in pyramid.tiles where tile.level == 7 && tile.row % 9 == 0 {
                #expect(try reader.tile(tile) == expected)
                #expect(cache.count <= 5000)
            }
        }
        #expect(cache.count > 0)
    }

    @Test func anExistingArchiveIsKeptUnlessReplaced() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let first = try SyntheticPyramid(width: 500, height: 300, seed: 1)
        let second = try SyntheticPyramid(width: 700, height: 300, seed: 2)
        _ = try first.write(to: ArchiveSink(root: scratch.path, id: first.id, geometry: first.geometry, format: .png))
        let refused = try ArchiveSink(root: scratch.path, id: second.id, geometry: second.geometry, format: .png)
        #expect(throws: StorageError.self) { try second.write(to: refused) }
        refused.discard()
        #expect(try ArchivedPyramid.open(path: "\(scratch.path)/sample.pmtiles").geometry.width == 500)
        #expect(scratch.entries() == ["sample.pmtiles"])
        _ = try second.write(to: ArchiveSink(root: scratch.path, id: second.id, geometry: second.geometry, format: .png), replace: true)
        #expect(try ArchivedPyramid.open(path: "\(scratch.path)/sample.pmtiles").geometry.width == 700)
        #expect(scratch.entries() == ["sample.pmtiles"])
    }

    /// A discarded sink leaves nothing in ROOT (the spool was never visible), and a sink
    /// missing tiles refuses to commit.
    @Test func discardedAndIncompleteArchivesLeaveNothing() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let pyramid = try SyntheticPyramid(width: 900, height: 900)
        let sink = try ArchiveSink(root: scratch.path, id: pyramid.id, geometry: pyramid.geometry, format: .png)
        try sink.writeTile(TileCoordinate(level: 0, row: 0, column: 0), [1, 2, 3])
        #expect(scratch.entries().count == 1 && scratch.entries()[0].hasPrefix(".sample.pmtiles.partial-"))
        sink.discard()
        #expect(scratch.entries().isEmpty)

        let incomplete = try ArchiveSink(root: scratch.path, id: pyramid.id, geometry: pyramid.geometry, format: .png)
        try incomplete.writeTile(TileCoordinate(level: 0, row: 0, column: 0), [1, 2, 3])
        try [UInt8](repeating: 1, count: 10).withUnsafeBytes { try incomplete.writeThumbnail(named: "thumbnail.png", $0) }
        #expect(throws: StorageError.self) { try incomplete.commit(manifest: pyramid.manifest, replace: false) }
        incomplete.discard()
        #expect(scratch.entries().isEmpty)
    }

    /// Partials of killed writers (unlocked) are removed by the next writer of the same
    /// id; a partial another live writer holds (locked) is left alone.
    @Test func abandonedPartialsAreRemovedLiveOnesKept() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let dead = "\(scratch.path)/.sample.pmtiles.partial-1-deadbeef"
        let live = "\(scratch.path)/.sample.pmtiles.partial-2-cafecafe"
        try #require(FileManager.default.createFile(atPath: dead, contents: Data([1])))
        try #require(FileManager.default.createFile(atPath: live, contents: Data([2])))
        let fd = open(live, O_RDONLY)
        defer { close(fd) }
        #expect(flock(fd, LOCK_EX | LOCK_NB) == 0)
        let pyramid = try SyntheticPyramid(width: 300, height: 300)
        _ = try pyramid.write(to: ArchiveSink(root: scratch.path, id: pyramid.id, geometry: pyramid.geometry, format: .png))
        #expect(scratch.entries() == [".sample.pmtiles.partial-2-cafecafe", "sample.pmtiles"])
    }

    /// The folder sink writes the layout the cutter always wrote; the same tiles through
    /// both sinks, and `unpack`, give identical folders; `pack` of the folder gives the
    /// archive the sink wrote from tiles in tile-id order, byte for byte.
    @Test func folderAndArchiveHoldTheSameBytes() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let pyramid = try SyntheticPyramid(width: 1500, height: 900, format: .webp)
        let folders = "\(scratch.path)/folders", archives = "\(scratch.path)/archives"
        _ = try pyramid.write(to: FolderSink(root: folders, id: pyramid.id, format: .webp))
        _ = try pyramid.write(
            to: ArchiveSink(root: archives, id: pyramid.id, geometry: pyramid.geometry, format: .webp),
            inTileIDOrder: true)
        for (tile, expected) in pyramid.tiles {
            #expect(
                try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(folders)/sample/\(tile.level)/\(tile.row)/\(tile.column).webp")))
                    == expected)
        }
        let unpacked = try PyramidConversion.unpack(archive: "\(archives)/sample.pmtiles", replace: false)
        #expect(unpacked.tiles == pyramid.tiles.count)
        #expect(try regularFiles(in: "\(folders)/sample") == regularFiles(in: "\(archives)/sample"))
        let packed = try PyramidConversion.pack(folder: "\(folders)/sample", replace: false)
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: packed.output))
                == Data(contentsOf: URL(fileURLWithPath: "\(archives)/sample.pmtiles")))
    }
}

/// Counts the reads made through it.
final class CountingSource: ArchiveSource {
    let inner: any ArchiveSource
    private let counted = Mutex((reads: 0, largest: 0))

    init(_ inner: any ArchiveSource) { self.inner = inner }

    var name: String { inner.name }
    var size: UInt64 { inner.size }
    var reads: Int { counted.withLock { $0.reads } }
    var largestRead: Int { counted.withLock { $0.largest } }

    func read(offset: UInt64, length: Int) throws(StorageError) -> [UInt8] {
        counted.withLock {
            $0.reads += 1
            $0.largest = max($0.largest, length)
        }
        return try inner.read(offset: offset, length: length)
    }
}

extension ArchiveRoundTripTests {
    /// The writer and reader also do uncompressed directories and metadata
    /// (`internal_compression` none), with leaves.
    @Test func uncompressedDirectoriesReadBack() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let path = "\(scratch.path)/raw.pmtiles"
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0o644)
        defer { close(fd) }
        let writer = try ArchiveWriter(output: FileDescriptor(rawValue: fd), outputPath: path)
        var generator = SplitMix(seed: 8)
        var tiles: [UInt64: [UInt8]] = [:]
        for id in stride(from: UInt64(3), to: 60_000, by: 3) {
            tiles[id] = (0..<(1 + Int(generator.next() % 40))).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            try tiles[id]!.withUnsafeBytes { try writer.add(tileID: id, $0) }
        }
        var template = ArchiveHeader()
        template.internalCompression = .none
        template.tileType = .webp
        let summary = try writer.finish(header: template, extras: [[9, 9, 9]]) { offsets in
            Array(#"{"extra":\#(offsets[0])}"#.utf8)
        }
        #expect(summary.leafDirectories > 0)
        let reader = try ArchiveReader(source: FileArchiveSource(path: path))
        #expect(reader.header.internalCompression == .none && reader.header.tileType == .webp)
        #expect(String(decoding: reader.metadata, as: UTF8.self) == #"{"extra":\#(summary.extraOffsets[0])}"#)
        for (id, bytes) in tiles { #expect(try reader.tile(id: id) == bytes) }
        #expect(try reader.tile(id: 4) == nil)
        #expect(try reader.source.read(offset: reader.header.tileDataOffset + summary.extraOffsets[0], length: 3) == [9, 9, 9])
    }
}

extension ArchiveRoundTripTests {
    /// The cache keeps within both bounds and drops the least recently used leaf first.
    @Test func directoryCacheEvictsLeastRecentlyUsed() {
        let cache = DirectoryCache(capacity: 10, maximumLeaves: 3)
        func leaf(_ n: Int) -> [DirectoryEntry] {
            (0..<n).map { DirectoryEntry(tileID: UInt64($0), offset: 0, length: 1, runLength: 1) }
        }
        let key = { (offset: UInt64) in DirectoryCache.Key(archive: 1, offset: offset) }
        cache.insert(leaf(4), for: key(0))
        cache.insert(leaf(4), for: key(1))
        _ = cache.entries(for: key(0))  // 0 is now more recent than 1
        cache.insert(leaf(4), for: key(2))  // 12 entries > 10: 1 goes
        #expect(cache.entries(for: key(1)) == nil && cache.entries(for: key(0)) != nil && cache.entries(for: key(2)) != nil)
        cache.insert(leaf(1), for: key(3))
        cache.insert(leaf(1), for: key(4))  // 4 leaves > 3: the oldest (0) goes
        #expect(cache.entries(for: key(0)) == nil && cache.count == 6)
        cache.insert(leaf(11), for: key(5))  // larger than the whole cache: not kept
        #expect(cache.entries(for: key(5)) == nil && cache.count <= 10)
        cache.removeAll(archive: 1)
        #expect(cache.count == 0)
    }
}
