/// How directories, metadata or tiles are compressed (PMTiles' compression enum).
public enum Compression: UInt8, Sendable, Hashable, CustomStringConvertible {
    case unknown = 0
    case none = 1
    case gzip = 2
    case brotli = 3
    case zstd = 4

    public var description: String {
        switch self {
        case .unknown: "unknown"
        case .none: "none"
        case .gzip: "gzip"
        case .brotli: "brotli"
        case .zstd: "zstd"
        }
    }
}

/// What the tiles hold (PMTiles' tile type enum).
public enum TileType: UInt8, Sendable, Hashable, CustomStringConvertible {
    case unknown = 0
    case mvt = 1
    case png = 2
    case jpeg = 3
    case webp = 4
    case avif = 5

    public var description: String {
        switch self {
        case .unknown: "unknown"
        case .mvt: "mvt"
        case .png: "png"
        case .jpeg: "jpeg"
        case .webp: "webp"
        case .avif: "avif"
        }
    }
}

/// The fixed 127-byte header at the start of every PMTiles v3 archive: where the
/// sections are, what the tiles are, and the counts and bounds readers show.
///
/// Offsets are from the start of the file; directory entries' offsets are relative to
/// their section (`leafDirectoryOffset`, `tileDataOffset`).
public struct ArchiveHeader: Sendable, Hashable {
    /// Bytes of the encoded header.
    public static let size = 127
    /// The header and the root directory together stay below this, so one read of this
    /// many bytes at offset 0 gets both (spec v3).
    public static let headerAndRootLimit = 16_384
    /// The spec version this code reads and writes.
    public static let version: UInt8 = 3

    public var rootOffset: UInt64 = 0
    public var rootLength: UInt64 = 0
    public var metadataOffset: UInt64 = 0
    public var metadataLength: UInt64 = 0
    public var leafDirectoryOffset: UInt64 = 0
    public var leafDirectoryLength: UInt64 = 0
    public var tileDataOffset: UInt64 = 0
    public var tileDataLength: UInt64 = 0
    /// Tiles addressed, counting each of a run: `Σ runLength`.
    public var addressedTiles: UInt64 = 0
    /// Directory entries with `runLength > 0`.
    public var tileEntries: UInt64 = 0
    /// Distinct tile blobs (distinct offsets) in the tile data.
    public var tileContents: UInt64 = 0
    /// Tile data ordered by tile id.
    public var clustered = false
    public var internalCompression: Compression = .gzip
    public var tileCompression: Compression = .none
    public var tileType: TileType = .unknown
    public var minZoom: UInt8 = 0
    public var maxZoom: UInt8 = 0
    /// Bounds and centre in degrees × 10^7.
    public var minLongitudeE7: Int32 = 0
    public var minLatitudeE7: Int32 = 0
    public var maxLongitudeE7: Int32 = 0
    public var maxLatitudeE7: Int32 = 0
    public var centerZoom: UInt8 = 0
    public var centerLongitudeE7: Int32 = 0
    public var centerLatitudeE7: Int32 = 0

    public init() {}

    /// The 127 header bytes.
    public func encoded() -> [UInt8] {
        var b: [UInt8] = Array("PMTiles".utf8)
        b.reserveCapacity(Self.size)
        b.append(Self.version)
        for v in [
            rootOffset, rootLength, metadataOffset, metadataLength, leafDirectoryOffset, leafDirectoryLength,
            tileDataOffset, tileDataLength, addressedTiles, tileEntries, tileContents,
        ] {
            Self.appendLittleEndian(v, byteCount: 8, to: &b)
        }
        b.append(clustered ? 1 : 0)
        b.append(internalCompression.rawValue)
        b.append(tileCompression.rawValue)
        b.append(tileType.rawValue)
        b.append(minZoom)
        b.append(maxZoom)
        for v in [minLongitudeE7, minLatitudeE7, maxLongitudeE7, maxLatitudeE7] {
            Self.appendLittleEndian(UInt64(UInt32(bitPattern: v)), byteCount: 4, to: &b)
        }
        b.append(centerZoom)
        Self.appendLittleEndian(UInt64(UInt32(bitPattern: centerLongitudeE7)), byteCount: 4, to: &b)
        Self.appendLittleEndian(UInt64(UInt32(bitPattern: centerLatitudeE7)), byteCount: 4, to: &b)
        assert(b.count == Self.size)
        return b
    }

    /// Reads a header from the first 127 (or more) bytes of an archive.
    public init(decoding bytes: some Collection<UInt8>) throws(ArchiveFormatError) {
        let b = Array(bytes.prefix(Self.size))
        let magic = Array("PMTiles".utf8)
        guard b.prefix(magic.count).elementsEqual(magic.prefix(min(b.count, magic.count))) else { throw .notAnArchive }
        guard b.count == Self.size else { throw .truncated("the header needs \(Self.size) bytes, the file has \(b.count)") }
        guard b[7] == Self.version else { throw .unsupportedVersion(b[7]) }
        func u64(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(b[at + $1]) << (8 * UInt64($1)) } }
        func i32(_ at: Int) -> Int32 { Int32(bitPattern: (0..<4).reduce(0) { $0 | UInt32(b[at + $1]) << (8 * UInt32($1)) }) }
        rootOffset = u64(8)
        rootLength = u64(16)
        metadataOffset = u64(24)
        metadataLength = u64(32)
        leafDirectoryOffset = u64(40)
        leafDirectoryLength = u64(48)
        tileDataOffset = u64(56)
        tileDataLength = u64(64)
        addressedTiles = u64(72)
        tileEntries = u64(80)
        tileContents = u64(88)
        clustered = b[96] == 1
        guard let internalValue = Compression(rawValue: b[97]) else { throw .corrupt("unknown internal compression \(b[97])") }
        guard let tiles = Compression(rawValue: b[98]) else { throw .corrupt("unknown tile compression \(b[98])") }
        internalCompression = internalValue
        tileCompression = tiles
        tileType = TileType(rawValue: b[99]) ?? .unknown
        minZoom = b[100]
        maxZoom = b[101]
        minLongitudeE7 = i32(102)
        minLatitudeE7 = i32(106)
        maxLongitudeE7 = i32(110)
        maxLatitudeE7 = i32(114)
        centerZoom = b[118]
        centerLongitudeE7 = i32(119)
        centerLatitudeE7 = i32(123)
    }

    /// Checks that every section lies inside a file of `fileSize` bytes (without
    /// overflow), and that the root directory is not empty and lies inside the first
    /// 16,384 bytes, as the spec requires (so one read at open gets it, and no root can
    /// be larger than that).
    public func checkSections(fileSize: UInt64) throws(ArchiveFormatError) {
        let sections: [(String, UInt64, UInt64)] = [
            ("root directory", rootOffset, rootLength), ("metadata", metadataOffset, metadataLength),
            ("leaf directories", leafDirectoryOffset, leafDirectoryLength), ("tile data", tileDataOffset, tileDataLength),
        ]
        for (name, offset, length) in sections {
            let (end, overflow) = offset.addingReportingOverflow(length)
            guard !overflow, end <= fileSize else {
                throw .truncated("the \(name) (bytes \(offset)..<\(offset &+ length)) ends past the end of the file (\(fileSize) bytes)")
            }
        }
        guard rootLength > 0 else { throw .corrupt("the root directory is empty") }
        guard rootOffset + rootLength <= UInt64(Self.headerAndRootLimit) else {
            throw .corrupt(
                "the root directory (bytes \(rootOffset)..<\(rootOffset + rootLength)) lies outside the first \(Self.headerAndRootLimit) bytes, where PMTiles v3 puts it"
            )
        }
    }

    private static func appendLittleEndian(_ value: UInt64, byteCount: Int, to bytes: inout [UInt8]) {
        for i in 0..<byteCount { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }
}

/// Why bytes are not a readable PMTiles archive. `description` is the reason only; the
/// caller names the file.
public enum ArchiveFormatError: Error, Sendable, Hashable, CustomStringConvertible {
    /// It does not start with `PMTiles`.
    case notAnArchive
    case unsupportedVersion(UInt8)
    /// Data ends before a section or value it promises.
    case truncated(String)
    /// Inconsistent or out-of-range values.
    case corrupt(String)
    /// Valid, but uses something this reader does not (brotli, zstd).
    case unsupported(String)
    /// A section larger than the reader's configured limit.
    case tooLarge(String)

    public var description: String {
        switch self {
        case .notAnArchive: "not a PMTiles archive (no PMTiles magic number)"
        case let .unsupportedVersion(v): "PMTiles version \(v) is not supported (tiler reads version 3)"
        case let .truncated(why): "truncated archive: \(why)"
        case let .corrupt(why): "corrupt archive: \(why)"
        case let .unsupported(why): "unsupported archive: \(why)"
        case let .tooLarge(why): "archive section too large: \(why)"
        }
    }
}
