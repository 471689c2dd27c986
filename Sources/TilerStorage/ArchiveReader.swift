import Foundation
import PMTiles
import Synchronization

/// Where a tile's bytes are in an archive: an absolute file offset and a length.
public struct TileLocation: Sendable, Hashable {
    public let offset: UInt64
    public let length: Int

    public init(offset: UInt64, length: Int) {
        self.offset = offset
        self.length = length
    }
}

/// Leaf directories already read and decoded, shared by any number of readers (one per
/// archive, or one for a whole server) and bounded by the number of entries it holds
/// (24 bytes each) and by the number of leaves (so that eviction, a scan, stays cheap
/// even for archives of tiny leaves); the least recently used leaf goes first.
/// Thread-safe.
public final class DirectoryCache: Sendable {
    /// Entries held at most, over all leaves.
    public let capacity: Int
    /// Leaves held at most.
    public let maximumLeaves: Int

    private struct Contents {
        var leaves: [Key: (entries: [DirectoryEntry], used: UInt64)] = [:]
        /// Entries held, over all leaves.
        var held = 0
        /// Ticks at each use: the least recently used leaf has the smallest `used`.
        var clock: UInt64 = 0
    }

    private let contents = Mutex(Contents())

    struct Key: Hashable {
        /// Which reader (archive) the leaf belongs to.
        let archive: UInt64
        /// The leaf's absolute offset in the file.
        let offset: UInt64
    }

    /// The default: 262,144 entries, about 6 MiB, 64 leaves of 4,096 tiles.
    public static let defaultCapacity = 1 << 18

    public init(capacity: Int = DirectoryCache.defaultCapacity, maximumLeaves: Int = 1024) {
        self.capacity = max(0, capacity)
        self.maximumLeaves = max(1, maximumLeaves)
    }

    /// Entries held now.
    public var count: Int { contents.withLock { $0.held } }

    func entries(for key: Key) -> [DirectoryEntry]? {
        contents.withLock { c in
            guard let hit = c.leaves[key] else { return nil }
            c.clock += 1
            c.leaves[key]!.used = c.clock
            return hit.entries
        }
    }

    func insert(_ entries: [DirectoryEntry], for key: Key) {
        guard entries.count <= capacity else { return }
        contents.withLock { c in
            if let old = c.leaves[key] { c.held -= old.entries.count }
            c.clock += 1
            c.leaves[key] = (entries, c.clock)
            c.held += entries.count
            while c.held > capacity || c.leaves.count > maximumLeaves,
                let oldest = c.leaves.min(by: { $0.value.used < $1.value.used })
            {
                c.held -= oldest.value.entries.count
                c.leaves[oldest.key] = nil
            }
        }
    }

    /// Drops every leaf of one archive (when its reader goes).
    func removeAll(archive: UInt64) {
        contents.withLock { c in
            for key in c.leaves.keys where key.archive == archive {
                c.held -= c.leaves[key]!.entries.count
                c.leaves[key] = nil
            }
        }
    }
}

/// Reads a PMTiles v3 archive through an ``ArchiveSource``: the header and root
/// directory come with one read of the first 16 KiB at open, the metadata with a second;
/// leaf directories are read when a tile needs them and kept in a ``DirectoryCache``.
///
/// Nothing in the file sizes an allocation unchecked: every section must lie inside the
/// file, directories and metadata are bounded by ``Limits`` before and after
/// decompression, entry counts by the bytes that hold them, and every tile location is
/// checked to lie inside the tile data section. A corrupt or truncated archive is a
/// ``StorageError`` naming the file, never a trap.
///
/// `cachedLocation(of:)` never reads: an event loop can ask it and hand the read to a
/// thread that may block only when it answers `.needsRead`. Thread-safe.
public final class ArchiveReader: Sendable {
    /// Bounds on what the reader reads and inflates.
    public struct Limits: Sendable {
        /// A directory's bytes, compressed or not (16 MiB: about 700,000 entries).
        public var directoryBytes = 16 << 20
        /// The metadata's bytes, compressed or not.
        public var metadataBytes = 16 << 20
        /// Directory levels below the root.
        public var leafDepth = 3

        public init() {}
    }

    /// What a lookup that may not read found.
    public enum Lookup: Sendable, Hashable {
        case found(TileLocation)
        /// The archive has no such tile.
        case absent
        /// A leaf directory must be read first: call `location(of:)` where blocking is fine.
        case needsRead
    }

    public let source: any ArchiveSource
    public let header: ArchiveHeader
    /// The metadata JSON, decompressed.
    public let metadata: [UInt8]
    public let limits: Limits
    private let root: [DirectoryEntry]
    private let cache: DirectoryCache
    private let identity: UInt64

    /// The next reader's identity (which tells its leaves apart in a shared cache).
    private static let nextIdentity = Atomic<UInt64>(1)

    /// Opens an archive: reads and checks the header, the root directory and the
    /// metadata.
    public init(source: any ArchiveSource, limits: Limits = Limits(), cache: DirectoryCache? = nil) throws(StorageError) {
        self.source = source
        self.limits = limits
        self.cache = cache ?? DirectoryCache()
        identity = Self.nextIdentity.add(1, ordering: .relaxed).oldValue
        let name = source.name
        func check<T>(_ body: () throws(ArchiveFormatError) -> T) throws(StorageError) -> T {
            do { return try body() } catch { throw .archive(path: name, error) }
        }
        let first = try source.read(offset: 0, length: Int(min(source.size, UInt64(ArchiveHeader.headerAndRootLimit))))
        let header = try check { () throws(ArchiveFormatError) in try ArchiveHeader(decoding: first) }
        try check { () throws(ArchiveFormatError) in try header.checkSections(fileSize: source.size) }
        self.header = header

        let rootBytes: [UInt8]
        if header.rootOffset + header.rootLength <= UInt64(first.count) {
            rootBytes = Array(first[Int(header.rootOffset)..<Int(header.rootOffset + header.rootLength)])
        } else {
            rootBytes = try Self.read(source, header.rootOffset, header.rootLength, limit: limits.directoryBytes, what: "root directory")
        }
        root = try check { () throws(ArchiveFormatError) in
            try Self.decodeDirectory(rootBytes, header: header, limit: limits.directoryBytes)
        }
        let metadataBytes = try Self.read(
            source, header.metadataOffset, header.metadataLength,
            limit: limits.metadataBytes, what: "metadata")
        metadata = try check { () throws(ArchiveFormatError) in
            try metadataBytes.withBytes { (raw) throws(ArchiveFormatError) in
                try header.internalCompression.decompress(raw, limit: limits.metadataBytes)
            }
        }
    }

    deinit { cache.removeAll(archive: identity) }

    /// Where tile `id` is, if every directory on its way is cached; never reads.
    public func cachedLocation(ofTileID id: UInt64) -> Lookup {
        var entries = root
        for _ in 0...limits.leafDepth {
            guard let index = Directory.find(id, in: entries) else { return .absent }
            let entry = entries[index]
            if !entry.isLeaf { return .found(location(of: entry)) }
            guard let leaf = cache.entries(for: leafKey(entry)) else { return .needsRead }
            entries = leaf
        }
        return .absent
    }

    /// Where tile `id` is, or nil if the archive has none; reads (and caches) the leaf
    /// directories on the way. May block.
    public func location(ofTileID id: UInt64) throws(StorageError) -> TileLocation? {
        var entries = root
        for _ in 0...limits.leafDepth {
            guard let index = Directory.find(id, in: entries) else { return nil }
            let entry = entries[index]
            if !entry.isLeaf { return location(of: entry) }
            entries = try leaf(entry)
        }
        throw .archive(path: source.name, .corrupt("leaf directories nest deeper than \(limits.leafDepth) levels"))
    }

    /// The bytes of tile `id`, or nil if the archive has none. May block.
    public func tile(id: UInt64) throws(StorageError) -> [UInt8]? {
        guard let location = try location(ofTileID: id) else { return nil }
        return try read(location)
    }

    /// The bytes at a location this reader returned. May block.
    public func read(_ location: TileLocation) throws(StorageError) -> [UInt8] {
        try source.read(offset: location.offset, length: location.length)
    }

    /// Calls `body` with every tile entry (runs, not leaf pointers) in tile-id order,
    /// reading each leaf directory once, around the cache. May block.
    public func forEachTileEntry(_ body: (DirectoryEntry) throws(StorageError) -> Void) throws(StorageError) {
        func walk(_ entries: [DirectoryEntry], depth: Int) throws(StorageError) {
            for entry in entries {
                if !entry.isLeaf {
                    try body(entry)
                    continue
                }
                guard depth < limits.leafDepth else {
                    throw .archive(path: source.name, .corrupt("leaf directories nest deeper than \(limits.leafDepth) levels"))
                }
                try walk(try readLeaf(entry), depth: depth + 1)
            }
        }
        try walk(root, depth: 0)
    }

    /// The absolute location of a tile entry's bytes (checked inside the tile data
    /// section when its directory was decoded).
    public func location(of entry: DirectoryEntry) -> TileLocation {
        TileLocation(offset: header.tileDataOffset + entry.offset, length: Int(entry.length))
    }

    private func leafKey(_ entry: DirectoryEntry) -> DirectoryCache.Key {
        DirectoryCache.Key(archive: identity, offset: header.leafDirectoryOffset + entry.offset)
    }

    /// A leaf directory from the cache, or read, decoded and cached.
    private func leaf(_ pointer: DirectoryEntry) throws(StorageError) -> [DirectoryEntry] {
        let key = leafKey(pointer)
        if let hit = cache.entries(for: key) { return hit }
        let entries = try readLeaf(pointer)
        cache.insert(entries, for: key)
        return entries
    }

    private func readLeaf(_ pointer: DirectoryEntry) throws(StorageError) -> [DirectoryEntry] {
        let bytes = try Self.read(
            source, header.leafDirectoryOffset + pointer.offset, UInt64(pointer.length),
            limit: limits.directoryBytes, what: "leaf directory")
        do {
            return try Self.decodeDirectory(bytes, header: header, limit: limits.directoryBytes)
        } catch {
            throw .archive(path: source.name, error)
        }
    }

    /// Reads a section of at most `limit` bytes.
    private static func read(
        _ source: any ArchiveSource, _ offset: UInt64, _ length: UInt64, limit: Int,
        what: String
    ) throws(StorageError) -> [UInt8] {
        guard length <= UInt64(limit) else {
            throw .archive(path: source.name, .tooLarge("the \(what) has \(length) bytes, the limit is \(limit)"))
        }
        guard offset <= source.size, length <= source.size - offset else {
            throw .archive(path: source.name, .truncated("the \(what) ends past the end of the file"))
        }
        return try source.read(offset: offset, length: Int(length))
    }

    /// Decompresses and decodes a directory, and checks that its tile entries lie in the
    /// tile data section and its leaf pointers in the leaf section.
    private static func decodeDirectory(
        _ bytes: [UInt8], header: ArchiveHeader,
        limit: Int
    ) throws(ArchiveFormatError) -> [DirectoryEntry] {
        let raw = try bytes.withBytes { (buffer) throws(ArchiveFormatError) in
            try header.internalCompression.decompress(buffer, limit: limit)
        }
        let entries = try Directory.decode(raw)
        for (i, e) in entries.enumerated() {
            let (end, overflow) = e.offset.addingReportingOverflow(UInt64(e.length))
            let sectionLength = e.isLeaf ? header.leafDirectoryLength : header.tileDataLength
            guard !overflow, end <= sectionLength else {
                throw .corrupt("entry \(i) (tile id \(e.tileID)) points past the end of the \(e.isLeaf ? "leaf directories" : "tile data")")
            }
        }
        return entries
    }
}
