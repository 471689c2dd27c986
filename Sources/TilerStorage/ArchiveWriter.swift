import Foundation
import PMTiles
import Synchronization

/// Writes one PMTiles v3 archive from tiles that arrive in any order, from many threads
/// at once: each tile is appended to a spool file (unlinked, so it vanishes with the
/// process) and only its `(tile id, spool offset, length, hash)` is kept in memory,
/// 32 bytes per tile. `finish` sorts those by tile id, finds identical tiles, and writes
/// the archive in one sequential pass: header, root directory, metadata, leaf
/// directories, tile data in tile-id order (clustered), then the extra blobs (the
/// thumbnail) at the end of the tile data section.
///
/// Identical tiles (same length, same 64-bit hash, and then compared byte for byte) are
/// stored once: consecutive ones become one entry with a run length, others share an
/// offset. Blank margins of scans and flat skies cost one tile each.
final class ArchiveWriter: Sendable {
    /// A spooled tile. 32 bytes.
    struct SpooledTile {
        var tileID: UInt64
        var spoolOffset: UInt64
        var hash: UInt64
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
    }

    /// The largest single tile accepted (PMTiles lengths are 32-bit).
    static let maximumTileBytes = Int(UInt32.max)

    private let spool: Int32
    private let spoolPath: String

    private struct Spool {
        /// Bytes taken in the spool so far: where the next tile goes.
        var size: UInt64 = 0
        var tiles: [SpooledTile] = []
        var closed = false
    }

    private let state = Mutex(Spool())

    /// Opens the spool in `directory` (the archive's own folder, so it sits on the same
    /// disk), named after `name`, and unlinks it at once. `expectedTiles` reserves the
    /// entry list, so that it never grows by doubling.
    init(spoolIn directory: String, name: String, expectedTiles: Int = 0) throws(StorageError) {
        var fd: Int32 = -1
        var path = ""
        for _ in 0..<100 {
            path = "\(directory)/.\(name).spool-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if fd >= 0 || errno != EEXIST { break }
        }
        guard fd >= 0 else { throw StorageError.system(path, "cannot create the tile spool") }
        unlink(path)
        spool = fd
        spoolPath = path
        state.withLock { $0.tiles.reserveCapacity(expectedTiles) }
    }

    deinit { closeSpool() }

    /// Tiles added so far.
    var count: Int { state.withLock { $0.tiles.count } }

    /// Appends one tile. Safe to call from many threads at once: the spool offset is
    /// taken under the lock, the bytes are written outside it with `pwrite`.
    func add(tileID: UInt64, _ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        guard bytes.count > 0 else { throw .invalid(path: spoolPath, reason: "tile \(tileID) is empty (PMTiles tiles have at least one byte)") }
        guard bytes.count <= Self.maximumTileBytes else {
            throw .invalid(path: spoolPath, reason: "tile \(tileID) has \(bytes.count) bytes, more than PMTiles' 4 GiB")
        }
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        let hash = UInt64(bitPattern: Int64(hasher.finalize()))
        let offset: UInt64 = state.withLock { s in
            let offset = s.size
            s.size += UInt64(bytes.count)
            s.tiles.append(SpooledTile(tileID: tileID, spoolOffset: offset, hash: hash, length: UInt32(bytes.count)))
            return offset
        }
        try Self.writeAll(spool, bytes, at: offset, path: spoolPath)
    }

    /// Writes the archive into `output` (an empty file open for writing) and closes the
    /// spool. `extras` are blobs stored after the last tile, outside every directory;
    /// `metadata` gets their offsets (relative to the tile data section) and returns the
    /// metadata JSON, before compression.
    func finish(into output: Int32, outputPath: String, header template: ArchiveHeader, extras: [[UInt8]],
                metadata: ([UInt64]) throws(StorageError) -> [UInt8]) throws(StorageError) -> Summary {
        defer { closeSpool() }
        var spooled = state.withLock { s -> [SpooledTile] in
            defer { s.tiles = [] }
            return s.tiles
        }
        guard !spooled.isEmpty else { throw .invalid(path: outputPath, reason: "an archive needs at least one tile") }
        spooled.sort { $0.tileID < $1.tileID }

        // Plan: the tile data offset of every distinct blob, and the directory entries.
        var contents: [(spoolOffset: UInt64, length: UInt32)] = []
        contents.reserveCapacity(spooled.count)
        var entries: [DirectoryEntry] = []
        entries.reserveCapacity(spooled.count)
        var firstWithHash: [UInt64: (index: Int, dataOffset: UInt64)] = [:]
        var dataSize: UInt64 = 0
        var scratch = ([UInt8](), [UInt8]())
        for (i, tile) in spooled.enumerated() {
            if i > 0, spooled[i - 1].tileID == tile.tileID {
                throw .invalid(path: outputPath, reason: "tile id \(tile.tileID) was written twice")
            }
            var dataOffset = dataSize
            if let seen = firstWithHash[tile.hash], spooled[seen.index].length == tile.length,
               try sameBytes(spooled[seen.index], tile, scratch: &scratch) {
                dataOffset = seen.dataOffset
            } else {
                if firstWithHash[tile.hash] == nil { firstWithHash[tile.hash] = (i, dataSize) }
                contents.append((tile.spoolOffset, tile.length))
                dataSize += UInt64(tile.length)
            }
            if let last = entries.last, last.offset == dataOffset, last.length == tile.length,
               last.tileID + UInt64(last.runLength) == tile.tileID, last.runLength < UInt32.max {
                entries[entries.count - 1].runLength += 1
            } else {
                entries.append(DirectoryEntry(tileID: tile.tileID, offset: dataOffset, length: tile.length, runLength: 1))
            }
        }
        let addressed = UInt64(spooled.count)
        spooled = []
        firstWithHash = [:]

        var extraOffsets: [UInt64] = []
        var extrasSize: UInt64 = 0
        for extra in extras {
            extraOffsets.append(dataSize + extrasSize)
            extrasSize += UInt64(extra.count)
        }
        var header = template
        let layout = DirectoryLayout(entries: entries, compression: header.internalCompression)
        let compressedMetadata = header.internalCompression.compress(try metadata(extraOffsets))
        header.clustered = true
        header.addressedTiles = addressed
        header.tileEntries = UInt64(entries.count)
        header.tileContents = UInt64(contents.count)
        header.minZoom = TileID.tile(entries.first!.tileID).map { UInt8($0.zoom) } ?? 0
        header.maxZoom = TileID.tile(entries.last!.tileID).map { UInt8($0.zoom) } ?? 0
        entries = []
        header.rootOffset = UInt64(ArchiveHeader.size)
        header.rootLength = UInt64(layout.root.count)
        header.metadataOffset = header.rootOffset + header.rootLength
        header.metadataLength = UInt64(compressedMetadata.count)
        header.leafDirectoryOffset = header.metadataOffset + header.metadataLength
        header.leafDirectoryLength = UInt64(layout.leaves.count)
        header.tileDataOffset = header.leafDirectoryOffset + header.leafDirectoryLength
        header.tileDataLength = dataSize + extrasSize

        // Write, in file order.
        let out = BufferedFileWriter(fd: output, path: outputPath)
        try out.append(header.encoded())
        try out.append(layout.root)
        try out.append(compressedMetadata)
        try out.append(layout.leaves)
        for blob in contents {
            try out.append(from: spool, spoolPath: spoolPath, offset: blob.spoolOffset, length: Int(blob.length))
        }
        for extra in extras { try out.append(extra) }
        try out.flush()
        return Summary(header: header, bytes: out.position, extraOffsets: extraOffsets, leafDirectories: layout.leafCount)
    }

    /// Whether two spooled tiles of equal length hold the same bytes.
    private func sameBytes(_ a: SpooledTile, _ b: SpooledTile, scratch: inout ([UInt8], [UInt8])) throws(StorageError) -> Bool {
        let n = Int(a.length)
        if scratch.0.count < n {
            scratch.0 = [UInt8](repeating: 0, count: n)
            scratch.1 = [UInt8](repeating: 0, count: n)
        }
        try scratch.0.withMutableBytes { (buffer) throws(StorageError) in
            try Self.readAll(spool, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]), at: a.spoolOffset, path: spoolPath)
        }
        try scratch.1.withMutableBytes { (buffer) throws(StorageError) in
            try Self.readAll(spool, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]), at: b.spoolOffset, path: spoolPath)
        }
        return scratch.0[0..<n] == scratch.1[0..<n]
    }

    private func closeSpool() {
        state.withLock { s in
            if !s.closed {
                close(spool)
                s.closed = true
            }
        }
    }

    /// `pwrite` of all of `bytes` at `offset`, looping on short writes and EINTR.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: UInt64, path: String) throws(StorageError) {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw StorageError.system(path)
            }
            done += n
        }
    }

    /// `pread` of exactly `buffer.count` bytes at `offset`; a file that ends first is an
    /// error.
    static func readAll(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64, path: String) throws(StorageError) {
        var done = 0
        while done < buffer.count {
            let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw StorageError.system(path)
            }
            if n == 0 { throw .io(path: path, reason: "ends at byte \(offset + UInt64(done)), \(buffer.count - done) bytes early") }
            done += n
        }
    }
}

/// Sequential writes through a 1 MiB buffer.
final class BufferedFileWriter {
    private let fd: Int32
    private let path: String
    private var buffer: UnsafeMutableRawBufferPointer
    private var used = 0
    /// Bytes written so far (flushed or buffered).
    private(set) var position: UInt64 = 0

    init(fd: Int32, path: String, capacity: Int = 1 << 20) {
        self.fd = fd
        self.path = path
        buffer = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit { buffer.deallocate() }

    func append(_ bytes: [UInt8]) throws(StorageError) {
        try bytes.withBytes { (raw) throws(StorageError) in try append(raw) }
    }

    func append(_ bytes: UnsafeRawBufferPointer) throws(StorageError) {
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

    /// Copies `length` bytes at `offset` of another file (the spool) into the output.
    func append(from source: Int32, spoolPath: String, offset: UInt64, length: Int) throws(StorageError) {
        if used + length > buffer.count { try flush() }
        if length > buffer.count {
            // A tile larger than the buffer: copy it through in buffer-sized pieces.
            var done = 0
            while done < length {
                let n = min(buffer.count, length - done)
                try ArchiveWriter.readAll(source, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]),
                                          at: offset + UInt64(done), path: spoolPath)
                used = n
                position += UInt64(n)
                try flush()
                done += n
            }
            return
        }
        try ArchiveWriter.readAll(source, into: UnsafeMutableRawBufferPointer(rebasing: buffer[used..<(used + length)]),
                                  at: offset, path: spoolPath)
        used += length
        position += UInt64(length)
    }

    func flush() throws(StorageError) {
        guard used > 0 else { return }
        try ArchiveWriter.writeAll(fd, UnsafeRawBufferPointer(rebasing: buffer[0..<used]), at: position - UInt64(used), path: path)
        used = 0
    }
}
