import Foundation
import PMTiles
import Synchronization
import TilerSystem

/// Writes one PMTiles v3 archive into a file in one pass, from tiles that arrive in any
/// order, from many threads at once. Each tile's bytes go straight to their place in the
/// tile data section (`pwrite` at an offset taken under a lock) and are never copied
/// again; only `(tile id, offset, length)` is kept in memory. `finish` sorts those by
/// tile id, lays out the directories, writes the extra blobs (the thumbnail), the
/// metadata and the leaf directories after the tile data, and the header and root
/// directory last, at the start:
///
///     header (127 B) | root directory | zeros up to 16,384 B | tile data, extras | metadata | leaf directories
///
/// The spec lets every section but the header sit anywhere, as long as header and root
/// lie in the first 16 KiB; this is the padded layout go-pmtiles' `verify` accepts (a
/// file of 16,384 + metadata + leaves + tile data bytes). The zeros are never written
/// (a hole in the file). The header's clustered flag is true exactly when the tiles
/// arrived in tile-id order, so that the tile data is in that order (`pack` writes them
/// so); a cut, whose tiles come strip by strip from the largest level down, is not
/// clustered.
///
/// Identical tiles (same length and 64-bit hash, then compared byte for byte with the
/// bytes already in the file) are stored once: consecutive tile ids become one entry
/// with a run length, others share an offset. Blank margins of scans and flat skies
/// cost one tile each. Two identical tiles written at the very same moment may both be
/// stored (the second is compared only once the first is in the file); the archive is
/// correct either way.
///
/// Memory: 24 bytes per tile for the index and 16 to 32 per tile for the hash table
/// (`[hash: index]`, 12 bytes a bucket, reserved up front from `expectedTiles`, so it
/// never grows by doubling) while tiles arrive; at `finish`, the hash table is dropped
/// and the sorted index, the sort's scratch and the directory entries take at most about
/// 72 bytes per tile, plus the compressed directories.
final class ArchiveWriter: Sendable {
    /// Where the tile data section starts: header and root directory get the first
    /// 16 KiB, the most the spec allows them.
    static let tileDataOffset = UInt64(ArchiveHeader.headerAndRootLimit)

    /// One tile: where its bytes are in the tile data section. 24 bytes.
    struct StoredTile {
        var tileID: UInt64
        var offset: UInt64
        var length: UInt32
    }

    /// What `finish` wrote.
    struct Summary {
        var header: ArchiveHeader
        /// Size of the archive in bytes.
        var bytes: UInt64
        /// Offsets of the extra blobs, relative to the tile data section.
        var extraOffsets: [UInt64]
        var leafDirectories: Int
        /// Whether the archive was written into the file `reorderInto` made.
        var reordered = false
    }

    /// The largest single tile accepted (PMTiles lengths are 32-bit).
    static let maximumTileBytes = Int(UInt32.max)

    /// The archive file: a duplicate of the descriptor handed to `init`, closed only when
    /// the writer goes away, so that no write in flight can land in a file that reused a
    /// closed descriptor's number.
    private let file: FileDescriptor
    private let path: String
    /// Whether `finish` may copy with `copy_file_range` (tests turn it off to exercise the
    /// `pread`/`pwrite` fallback).
    private let kernelCopy: Bool

    private struct State {
        /// Bytes of tile data written or being written: where the next blob goes.
        var dataSize: UInt64 = 0
        /// Distinct blobs written.
        var blobs: UInt64 = 0
        var tiles: [StoredTile] = []
        /// The first tile stored with each hash whose bytes are in the file: its index in
        /// `tiles`.
        var firstWithHash: [UInt64: UInt32] = [:]
        var finished = false
    }

    private let state = Mutex(State())

    /// Writes into `output`, an empty file open for reading and writing at `outputPath`.
    /// `expectedTiles` reserves the index and the hash table, so that neither grows by
    /// doubling.
    init(output: FileDescriptor, outputPath: String, expectedTiles: Int = 0, kernelCopy: Bool = true) throws(StorageError) {
        do {
            file = try output.duplicate()
        } catch {
            throw .system(outputPath, error)
        }
        path = outputPath
        self.kernelCopy = kernelCopy
        state.withLock { s in
            s.tiles.reserveCapacity(expectedTiles)
            s.firstWithHash.reserveCapacity(expectedTiles)
        }
    }

    deinit { file.close() }

    /// Tiles added so far.
    var count: Int { state.withLock { $0.tiles.count } }

    /// Stores one tile. Safe to call from many threads at once: offsets are taken under
    /// the lock, bytes are written and compared outside it.
    func add(tileID: UInt64, _ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        guard bytes.count > 0 else { throw .invalid(path: path, reason: "tile \(tileID) is empty (PMTiles tiles have at least one byte)") }
        guard bytes.count <= Self.maximumTileBytes else {
            throw .invalid(path: path, reason: "tile \(tileID) has \(bytes.count) bytes, more than PMTiles' 4 GiB")
        }
        let length = UInt32(bytes.count)
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        let hash = UInt64(bitPattern: Int64(hasher.finalize()))
        let earlier: UInt64? = try state.withLock { (s) throws(StorageError) -> UInt64? in
            guard !s.finished else { throw .invalid(path: path, reason: "tile \(tileID) came after the archive was finished") }
            guard let index = s.firstWithHash[hash], s.tiles[Int(index)].length == length else { return nil }
            return s.tiles[Int(index)].offset
        }
        if let earlier, try sameBytes(bytes, at: earlier) {
            state.withLock { $0.tiles.append(StoredTile(tileID: tileID, offset: earlier, length: length)) }
            return
        }
        let offset: UInt64 = state.withLock { s in
            let offset = s.dataSize
            s.dataSize += UInt64(length)
            s.blobs += 1
            return offset
        }
        try Self.writeAll(file, bytes, at: Self.tileDataOffset + offset, path: path)
        state.withLock { s in
            // Only now may another tile be compared with these bytes: they are in the file.
            if s.firstWithHash[hash] == nil, s.tiles.count < Int(UInt32.max) { s.firstWithHash[hash] = UInt32(s.tiles.count) }
            s.tiles.append(StoredTile(tileID: tileID, offset: offset, length: length))
        }
    }

    /// Completes the archive: `extras` are blobs stored after the last tile, outside
    /// every directory; `metadata` gets their offsets (relative to the tile data section)
    /// and returns the metadata JSON, before compression. Every `add` must have returned.
    ///
    /// With `reorderInto`, an archive whose tiles did not arrive in tile-id order is
    /// written clustered into another file: `reorderInto` makes it (an empty file, open
    /// for reading and writing) and every distinct tile's bytes are copied there in
    /// tile-id order (runs already contiguous and in order in one call, with
    /// `copy_file_range`, else `pread`/`pwrite` where the kernel or file system cannot),
    /// then the extras, metadata, leaves and header as always. `Summary.reordered` says
    /// which file holds the archive. Without it, or when the tiles came in order (`pack`),
    /// the archive is finished in place.
    func finish(
        header template: ArchiveHeader, extras: [[UInt8]],
        reorderInto: (() throws(StorageError) -> (descriptor: FileDescriptor, path: String))? = nil,
        metadata: ([UInt64]) throws(StorageError) -> [UInt8]
    ) throws(StorageError) -> Summary {
        var (tiles, dataSize, blobs) = state.withLock { s in
            s.finished = true
            s.firstWithHash = [:]
            defer { s.tiles = [] }
            return (s.tiles, s.dataSize, s.blobs)
        }
        guard !tiles.isEmpty else { throw .invalid(path: path, reason: "an archive needs at least one tile") }
        tiles.sort { $0.tileID < $1.tileID }

        // The directory entries, and whether the data happens to be in tile-id order:
        // each tile either starts where the data seen so far ends (a new blob) or lies
        // before it (a repeat of an earlier tile).
        var entries: [DirectoryEntry] = []
        entries.reserveCapacity(tiles.count)
        var clustered = true
        var inOrder: UInt64 = 0
        for (i, tile) in tiles.enumerated() {
            if i > 0, tiles[i - 1].tileID == tile.tileID {
                throw .invalid(path: path, reason: "tile id \(tile.tileID) was written twice")
            }
            if tile.offset == inOrder {
                inOrder += UInt64(tile.length)
            } else if tile.offset > inOrder {
                clustered = false
            }
            Self.append(tile, to: &entries)
        }
        var outFile = file
        var outPath = path
        var reordered = false
        if !clustered, let reorderInto {
            entries = []  // remade from the new offsets, after the copy's map is dropped
            let target = try reorderInto()
            try copyInTileIDOrder(&tiles, from: file, to: target.descriptor, targetPath: target.path)
            (outFile, outPath, reordered, clustered) = (target.descriptor, target.path, true, true)
            for tile in tiles { Self.append(tile, to: &entries) }
        }
        let addressed = UInt64(tiles.count)
        tiles = []

        var extraOffsets: [UInt64] = []
        var extrasSize: UInt64 = 0
        for extra in extras {
            extraOffsets.append(dataSize + extrasSize)
            extrasSize += UInt64(extra.count)
        }
        var header = template
        let layout = DirectoryLayout(entries: entries, compression: header.internalCompression)
        let compressedMetadata = header.internalCompression.compress(try metadata(extraOffsets))
        header.clustered = clustered
        header.addressedTiles = addressed
        header.tileEntries = UInt64(entries.count)
        header.tileContents = blobs
        header.minZoom = TileID.tile(entries.first!.tileID).map { UInt8($0.zoom) } ?? 0
        header.maxZoom = TileID.tile(entries.last!.tileID).map { UInt8($0.zoom) } ?? 0
        entries = []
        header.rootOffset = UInt64(ArchiveHeader.size)
        header.rootLength = UInt64(layout.root.count)
        precondition(header.rootOffset + header.rootLength <= Self.tileDataOffset, "the root directory outgrew the first 16 KiB")
        header.tileDataOffset = Self.tileDataOffset
        header.tileDataLength = dataSize + extrasSize
        header.metadataOffset = header.tileDataOffset + header.tileDataLength
        header.metadataLength = UInt64(compressedMetadata.count)
        header.leafDirectoryOffset = header.metadataOffset + header.metadataLength
        header.leafDirectoryLength = UInt64(layout.leaves.count)

        // After the tile data: the extras, the metadata, the leaves. Then the start.
        let out = BufferedFileWriter(fd: outFile, path: outPath, startingAt: Self.tileDataOffset + dataSize)
        for extra in extras { try out.append(extra) }
        try out.append(compressedMetadata)
        try out.append(layout.leaves)
        try out.flush()
        try (header.encoded() + layout.root).withBytes { (raw) throws(StorageError) in
            try Self.writeAll(outFile, raw, at: 0, path: outPath)
        }
        return Summary(
            header: header, bytes: out.position, extraOffsets: extraOffsets, leafDirectories: layout.leafCount,
            reordered: reordered)
    }

    /// Adds `tile` to the directory entries: to the last one's run when it is the next
    /// tile id with the same bytes.
    private static func append(_ tile: StoredTile, to entries: inout [DirectoryEntry]) {
        if let last = entries.last, last.offset == tile.offset, last.length == tile.length,
            last.tileID + UInt64(last.runLength) == tile.tileID, last.runLength < UInt32.max
        {
            entries[entries.count - 1].runLength += 1
        } else {
            entries.append(DirectoryEntry(tileID: tile.tileID, offset: tile.offset, length: tile.length, runLength: 1))
        }
    }

    /// Copies each distinct blob of `tiles` (sorted by tile id) from the tile data section
    /// of `source` to that of `target`, in tile-id order, and points the tiles at their new
    /// offsets. A blob goes where its first tile in tile-id order puts it; later tiles
    /// sharing it follow it. Runs of blobs already back to back in the same order are one
    /// copy.
    private func copyInTileIDOrder(
        _ tiles: inout [StoredTile], from source: FileDescriptor, to target: FileDescriptor,
        targetPath: String
    ) throws(StorageError) {
        var newOffset: [UInt64: UInt64] = [:]
        let blobs = state.withLock { $0.blobs }
        newOffset.reserveCapacity(Int(blobs))
        var runs: [(from: UInt64, to: UInt64, length: UInt64)] = []
        var next: UInt64 = 0
        for i in tiles.indices {
            let old = tiles[i].offset
            if let moved = newOffset[old] {
                tiles[i].offset = moved
                continue
            }
            newOffset[old] = next
            let length = UInt64(tiles[i].length)
            if let last = runs.last, last.from + last.length == old, last.to + last.length == next {
                runs[runs.count - 1].length += length
            } else {
                runs.append((old, next, length))
            }
            tiles[i].offset = next
            next += length
        }
        newOffset = [:]
        var inKernel = kernelCopy
        for run in runs {
            do {
                try source.copy(
                    count: Int(run.length), at: Int(Self.tileDataOffset + run.from), to: target,
                    at: Int(Self.tileDataOffset + run.to), inKernel: &inKernel)
            } catch {
                throw .system(targetPath, error)
            }
        }
    }

    /// Whether `bytes` equal the `bytes.count` bytes at `offset` of the tile data.
    private func sameBytes(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) -> Bool {
        let chunk = min(bytes.count, 1 << 16)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var done = 0
        while done < bytes.count {
            let n = min(chunk, bytes.count - done)
            let piece = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n])
            try Self.readAll(file, into: piece, at: Self.tileDataOffset + offset + UInt64(done), path: path)
            if memcmp(piece.baseAddress!, bytes.baseAddress! + done, n) != 0 { return false }
            done += n
        }
        return true
    }

    /// `pwrite` of all of `bytes` at `offset`.
    static func writeAll(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, at offset: UInt64, path: String) throws(StorageError) {
        do {
            try fd.writeAll(bytes, at: Int(offset))
        } catch {
            throw .system(path, error)
        }
    }

    /// `pread` of exactly `buffer.count` bytes at `offset`; a file that ends first is an
    /// error.
    static func readAll(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64, path: String)
        throws(StorageError)
    {
        let done: Int
        do {
            done = try fd.readFully(into: buffer, at: Int(offset))
        } catch {
            throw .system(path, error)
        }
        if done < buffer.count {
            throw .io(path: path, reason: "ends at byte \(offset + UInt64(done)), \(buffer.count - done) bytes early")
        }
    }
}

/// Sequential writes through a 1 MiB buffer.
final class BufferedFileWriter {
    private let fd: FileDescriptor
    private let path: String
    private var buffer: UnsafeMutableRawBufferPointer
    private var used = 0
    /// Where the next byte goes in the file (everything before it is flushed or buffered).
    private(set) var position: UInt64

    /// Writes from byte `start` of the file on.
    init(fd: FileDescriptor, path: String, startingAt start: UInt64 = 0, capacity: Int = 1 << 20) {
        self.fd = fd
        self.path = path
        position = start
        buffer = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit { buffer.deallocate() }

    func append(_ bytes: [UInt8]) throws(StorageError) {
        try bytes.withBytes { (raw) throws(StorageError) in try append(raw) }
    }

    func append(_ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        guard bytes.count > 0 else { return }
        if used + bytes.count > buffer.count { try flush() }
        if bytes.count >= buffer.count {
            try ArchiveWriter.writeAll(fd, bytes, at: position - UInt64(used), path: path)
            position += UInt64(bytes.count)
            return
        }
        (buffer.baseAddress! + used).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        used += bytes.count
        position += UInt64(bytes.count)
    }

    func flush() throws(StorageError) {
        guard used > 0 else { return }
        try ArchiveWriter.writeAll(fd, UnsafeRawBufferPointer(rebasing: buffer[0..<used]), at: position - UInt64(used), path: path)
        used = 0
    }
}
