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

/// Directories already read and decoded, roots and leaves, shared by any number of
/// readers (one per archive, or one for a whole server): all the directory memory the
/// readers keep. Bounded by the number of entries it holds (24 bytes each), which is
/// also the most one directory may hold (a reader refuses a larger one, so every
/// directory it reads can be kept, never inflated again at each tile), and by the number
/// of directories (so that the bookkeeping stays small for archives of tiny leaves); the
/// least recently used go first, an eighth at a time. Directories that were refused
/// (damaged, too large) are remembered too, so that a refused leaf is not read and
/// inflated again at each tile that needs it. Thread-safe.
public final class DirectoryCache: Sendable {
    /// Entries held at most, over all directories; also the most one directory may hold.
    public let capacity: Int
    /// Directories held at most.
    public let maximumLeaves: Int

    private struct Contents {
        var leaves: [Key: (entries: [DirectoryEntry], used: UInt64)] = [:]
        /// Entries held, over all directories.
        var held = 0
        /// Ticks at each use: the least recently used directory has the smallest `used`.
        var clock: UInt64 = 0
        /// Directories refused, and why.
        var refused: [Key: ArchiveFormatError] = [:]
    }

    private let contents = Mutex(Contents())

    struct Key: Hashable {
        /// Which reader (archive) the directory belongs to.
        let archive: UInt64
        /// The leaf's absolute offset in the file; `UInt64.max` (past any file) for the root.
        let offset: UInt64
    }

    /// The default: 262,144 entries, about 6 MiB, 64 leaves of 4,096 tiles.
    public static let defaultCapacity = 1 << 18
    /// Refused directories remembered at most (then forgotten all at once).
    static let refusalLimit = 4096

    public init(capacity: Int = DirectoryCache.defaultCapacity, maximumLeaves: Int = 8192) {
        self.capacity = max(0, capacity)
        self.maximumLeaves = max(1, maximumLeaves)
    }

    /// Entries held now.
    public var count: Int { contents.withLock { $0.held } }

    func entries(for key: Key) -> [DirectoryEntry]? {
        contents.withLock { c in
            guard c.leaves[key] != nil else { return nil }
            c.clock += 1
            c.leaves[key]!.used = c.clock
            return c.leaves[key]!.entries
        }
    }

    func insert(_ entries: [DirectoryEntry], for key: Key) {
        guard entries.count <= capacity else { return }
        contents.withLock { c in
            if let old = c.leaves[key] { c.held -= old.entries.count }
            c.clock += 1
            c.leaves[key] = (entries, c.clock)
            c.held += entries.count
            guard c.held > capacity || c.leaves.count > maximumLeaves else { return }
            // Down to seven eighths of both bounds, oldest first: one sort for many inserts.
            let entryGoal = capacity - capacity / 8, countGoal = maximumLeaves - maximumLeaves / 8
            for (oldest, value) in c.leaves.sorted(by: { $0.value.used < $1.value.used }) {
                guard c.held > entryGoal || c.leaves.count > countGoal, oldest != key else { continue }
                c.held -= value.entries.count
                c.leaves[oldest] = nil
            }
        }
    }

    /// Why the directory at `key` was refused, if it was.
    func refusal(for key: Key) -> ArchiveFormatError? {
        contents.withLock { $0.refused[key] }
    }

    /// Remembers that the directory at `key` was refused.
    func refuse(_ key: Key, _ error: ArchiveFormatError) {
        contents.withLock { c in
            if c.refused.count >= Self.refusalLimit { c.refused.removeAll() }
            c.refused[key] = error
        }
    }

    /// Drops every directory of one archive (when its reader goes).
    func removeAll(archive: UInt64) {
        contents.withLock { c in
            for key in c.leaves.keys where key.archive == archive {
                c.held -= c.leaves[key]!.entries.count
                c.leaves[key] = nil
            }
            for key in c.refused.keys where key.archive == archive { c.refused[key] = nil }
        }
    }
}

/// Reads a PMTiles v3 archive through an ``ArchiveSource``: the header and root
/// directory come with one read of the first 16 KiB at open, the metadata with a second;
/// leaf directories are read when a tile needs them. Every directory read, the root
/// included, is kept in a ``DirectoryCache``, whose bound is all the directory memory the
/// readers sharing it hold (a root it dropped is read again, from those 16 KiB).
///
/// Nothing in the file sizes an allocation unchecked: every section must lie inside the
/// file and the root inside its first 16 KiB, directories and metadata are bounded by
/// ``Limits`` before and after decompression, a directory's entries by the cache's
/// capacity (the count is read first and inflating stops there) and by the bytes that
/// hold them, and every tile location is checked to lie inside the tile data section. A
/// corrupt, truncated or oversized archive is a ``StorageError`` naming the file, never a
/// trap.
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

        // checkSections put the root inside the first 16 KiB, which `first` holds.
        let rootBytes = Array(first[Int(header.rootOffset)..<Int(header.rootOffset + header.rootLength)])
        let maximumEntries = self.cache.capacity
        let root = try check { () throws(ArchiveFormatError) in
            try Self.decodeDirectory(rootBytes, header: header, limit: limits.directoryBytes, maximumEntries: maximumEntries)
        }
        let metadataBytes = try Self.read(
            source, header.metadataOffset, header.metadataLength,
            limit: limits.metadataBytes, what: "metadata")
        metadata = try check { () throws(ArchiveFormatError) in
            try metadataBytes.withBytes { (raw) throws(ArchiveFormatError) in
                try header.internalCompression.decompress(raw, limit: limits.metadataBytes)
            }
        }
        self.cache.insert(root, for: rootKey)
    }

    deinit { cache.removeAll(archive: identity) }

    /// Where tile `id` is, if every directory on its way is cached; never reads.
    public func cachedLocation(ofTileID id: UInt64) -> Lookup {
        guard var entries = cache.entries(for: rootKey) else { return .needsRead }
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
        var entries = try rootEntries()
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
        try walk(try rootEntries(), depth: 0)
    }

    /// The absolute location of a tile entry's bytes (checked inside the tile data
    /// section when its directory was decoded).
    public func location(of entry: DirectoryEntry) -> TileLocation {
        TileLocation(offset: header.tileDataOffset + entry.offset, length: Int(entry.length))
    }

    private func leafKey(_ entry: DirectoryEntry) -> DirectoryCache.Key {
        DirectoryCache.Key(archive: identity, offset: header.leafDirectoryOffset + entry.offset)
    }

    private var rootKey: DirectoryCache.Key { DirectoryCache.Key(archive: identity, offset: .max) }

    /// The root directory from the cache, or read again (checked at open), decoded and
    /// cached.
    private func rootEntries() throws(StorageError) -> [DirectoryEntry] {
        if let hit = cache.entries(for: rootKey) { return hit }
        let bytes = try source.read(offset: header.rootOffset, length: Int(header.rootLength))
        let entries = try decode(bytes, key: rootKey)
        cache.insert(entries, for: rootKey)
        return entries
    }

    /// A leaf directory from the cache, or read, decoded and cached.
    private func leaf(_ pointer: DirectoryEntry) throws(StorageError) -> [DirectoryEntry] {
        let key = leafKey(pointer)
        if let hit = cache.entries(for: key) { return hit }
        let entries = try readLeaf(pointer)
        cache.insert(entries, for: key)
        return entries
    }

    /// A leaf directory, read and decoded (not cached); a leaf refused before is refused
    /// again without a read.
    private func readLeaf(_ pointer: DirectoryEntry) throws(StorageError) -> [DirectoryEntry] {
        let key = leafKey(pointer)
        if let refusal = cache.refusal(for: key) { throw .archive(path: source.name, refusal) }
        let bytes = try Self.read(
            source, header.leafDirectoryOffset + pointer.offset, UInt64(pointer.length),
            limit: limits.directoryBytes, what: "leaf directory")
        return try decode(bytes, key: key)
    }

    /// Decodes a directory read from the file; one that is refused is remembered as such.
    private func decode(_ bytes: [UInt8], key: DirectoryCache.Key) throws(StorageError) -> [DirectoryEntry] {
        do {
            return try Self.decodeDirectory(bytes, header: header, limit: limits.directoryBytes, maximumEntries: cache.capacity)
        } catch {
            cache.refuse(key, error)
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

    /// Decompresses and decodes a directory of at most `maximumEntries` (inflating stops
    /// as soon as the count is known to be past it, or the bytes past what the count
    /// needs), and checks that its tile entries lie in the tile data section and its leaf
    /// pointers in the leaf section.
    private static func decodeDirectory(
        _ bytes: [UInt8], header: ArchiveHeader,
        limit: Int, maximumEntries: Int
    ) throws(ArchiveFormatError) -> [DirectoryEntry] {
        let raw = try bytes.withBytes { (buffer) throws(ArchiveFormatError) in
            try header.internalCompression.decompress(buffer, limit: limit) { (prefix) throws(ArchiveFormatError) in
                try Directory.byteBound(prefix, maximumEntries: maximumEntries)
            }
        }
        let entries = try Directory.decode(raw, maximumEntries: maximumEntries)
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
