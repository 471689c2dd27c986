/// The encoding of a pyramid's tiles.
public enum TileFormat: String, Sendable, Hashable, Codable, CaseIterable {
    case png
    case jpeg
    case webp

    /// The file extension used on disk and in URLs.
    public var fileExtension: String {
        switch self {
        case .png: "png"
        case .jpeg: "jpg"
        case .webp: "webp"
        }
    }

    /// The HTTP `Content-Type`.
    public var mimeType: String {
        switch self {
        case .png: "image/png"
        case .jpeg: "image/jpeg"
        case .webp: "image/webp"
        }
    }

    /// The format for a URL or file extension, in any case (`png`, `JPG`, `jpeg`, `webp`).
    public init?(fileExtension: String) {
        self.init(fileExtension: Substring(fileExtension))
    }

    /// The same for part of a string (a tile URL's last segment after its dot).
    public init?(fileExtension: Substring) {
        self.init(fileExtensionBytes: fileExtension.utf8)
    }

    /// The same for an extension's UTF-8 bytes (a tile URL's, read in place).
    @inlinable
    public init?<Bytes: Sequence<UInt8>>(fileExtensionBytes: Bytes) {
        // Byte by byte with ASCII letters folded, not `lowercased()`: this runs for every
        // tile request, and a lowercased copy is an allocation.
        var folded: UInt32 = 0
        var count = 0
        for b in fileExtensionBytes {
            guard count < 4 else { return nil }
            folded = folded << 8 | UInt32(b >= 0x41 && b <= 0x5A ? b | 0x20 : b)
            count += 1
        }
        switch (count, folded) {
        case (3, 0x70_6E_67): self = .png  // "png"
        case (3, 0x6A_70_67), (4, 0x6A_70_65_67): self = .jpeg  // "jpg", "jpeg"
        case (4, 0x77_65_62_70): self = .webp  // "webp"
        default: return nil
        }
    }
}

extension TileFormat {
    /// Whether `bytes` look like one whole file of this format, judged by its first and
    /// last bytes only: PNG's signature and final `IEND` chunk, JPEG's start and end
    /// markers, WebP's `RIFF…WEBP` header with a length equal to the file's. Empty,
    /// truncated and mislabelled files fail; a file damaged in its middle passes (only a
    /// decoder finds that, and tiles served as stored are never decoded).
    public func looksComplete<C: RandomAccessCollection>(_ bytes: C) -> Bool where C.Element == UInt8, C.Index == Int {
        let n = bytes.count
        let start = bytes.startIndex
        func at(_ i: Int) -> UInt8 { bytes[start + i] }
        func matches(_ offset: Int, _ expected: [UInt8]) -> Bool {
            offset >= 0 && offset + expected.count <= n && expected.indices.allSatisfy { at(offset + $0) == expected[$0] }
        }
        switch self {
        case .png:
            return n >= 8 + 25 + 12 && matches(0, [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
                && matches(n - 12, [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82])
        case .jpeg:
            return n >= 4 && matches(0, [0xFF, 0xD8, 0xFF]) && matches(n - 2, [0xFF, 0xD9])
        case .webp:
            guard n >= 20, matches(0, Array("RIFF".utf8)), matches(8, Array("WEBP".utf8)) else { return false }
            let riffLength = Int(at(4)) | Int(at(5)) << 8 | Int(at(6)) << 16 | Int(at(7)) << 24
            return riffLength + 8 == n
        }
    }
}

/// A validated pyramid identifier: `[A-Za-z0-9][A-Za-z0-9._-]{0,127}`.
///
/// Identifiers name folders under the output root, so validation is what keeps every
/// request inside ROOT: an id can never be empty, `.` or `..`, or contain a slash.
public struct PyramidID: Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    public let rawValue: String

    public static let maximumLength = 128

    /// Accepts `text` only if it already matches the pattern.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= Self.maximumLength,
            Self.isAlphanumeric(bytes[0]),
            bytes.allSatisfy({ Self.isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") })
        else { return nil }
        self.rawValue = text
    }

    /// Whether the id ends in `.dzi`: `/images/ID` would then be the address of the
    /// DeepZoom descriptor of the id without it, which the server answers with this
    /// pyramid's manifest instead (a real pyramid keeps its manifest). `tiler cut` refuses
    /// such ids.
    public var hidesADeepZoomDescriptor: Bool { rawValue.hasSuffix(".dzi") }

    /// The default id for an input file: its name without directory and extension, with
    /// every other character replaced by `_`, a leading non-alphanumeric replaced too, and
    /// cut to the maximum length. Returns nil only when nothing usable is left.
    public init?(deriving fileName: String) {
        var name = Substring(fileName)
        if let slash = name.lastIndex(of: "/") { name = name[name.index(after: slash)...] }
        if let dot = name.lastIndex(of: "."), dot != name.startIndex { name = name[..<dot] }
        var bytes: [UInt8] = name.utf8.map { b in
            Self.isAlphanumeric(b) || b == UInt8(ascii: ".") || b == UInt8(ascii: "_") || b == UInt8(ascii: "-") ? b : UInt8(ascii: "_")
        }
        // Collapse runs of '_' that replacement produced from multi-byte characters.
        var collapsed: [UInt8] = []
        for b in bytes where !(b == UInt8(ascii: "_") && collapsed.last == UInt8(ascii: "_")) { collapsed.append(b) }
        bytes = collapsed
        while let first = bytes.first, !Self.isAlphanumeric(first) { bytes.removeFirst() }
        if bytes.count > Self.maximumLength { bytes = Array(bytes.prefix(Self.maximumLength)) }
        guard let id = PyramidID(String(decoding: bytes, as: UTF8.self)) else { return nil }
        self = id
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let id = PyramidID(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "invalid pyramid id '\(text)'"))
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }
    public static func < (a: PyramidID, b: PyramidID) -> Bool { a.rawValue < b.rawValue }

    private static func isAlphanumeric(_ b: UInt8) -> Bool {
        (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")) || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z"))
            || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9"))
    }
}

/// `pyramid.json`: what a cut wrote, read back by the server. Written last and
/// atomically; a folder without it is not a pyramid.
public struct PyramidManifest: Sendable, Hashable, Codable {
    /// The newest manifest layout version this build reads and writes. Readers accept any
    /// version up to their own and refuse newer ones with a clear message.
    ///
    /// - 1: clipped edge tiles. Provenance (`source`, `tilerVersion`) and what the photo
    ///   says about itself (`metadata`) are optional and ignored by older readers, so they
    ///   do not need a new version.
    /// - 2: edge tiles may be padded to the full tile size (`padded`). A reader that does
    ///   not know `padded` would hand full-size edge tiles to DeepZoom and IIIF clients,
    ///   so padded pyramids are written as version 2; every other pyramid is still
    ///   written as version 1 and stays readable by older tilers.
    public static let currentFormatVersion = 2
    /// The manifest's file name inside a pyramid folder.
    public static let fileName = "pyramid.json"

    public var formatVersion: Int
    public var id: PyramidID
    public var width: Int
    public var height: Int
    public var tileSize: Int
    public var format: TileFormat
    public var maxLevel: Int
    public var levels: [Level]
    public var thumbnail: Thumbnail
    /// Encoder quality for JPEG and WebP tiles; nil for PNG.
    public var quality: Int?
    /// Bands per pixel in the tiles (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA).
    public var bands: Int?
    /// When the cut finished, ISO 8601.
    public var created: String?
    /// Edge tiles are padded to the full tile size (`tiler cut --pad`, version 2); nil or
    /// false: clipped, as the geometry says.
    public var padded: Bool?
    /// The padding colour, `#rrggbbaa`, when padded.
    public var background: String?
    /// The file the pyramid was cut from.
    public var source: Source?
    /// The tiler version that cut it.
    public var tilerVersion: String?
    /// Only some tiles are stored: the folder holds the tiles `tiler serve --sources --keep`
    /// made on demand from `source`, and a source of the same id wins over it while served.
    /// nil or false: every tile is there.
    public var partial: Bool?
    /// What the photo says about itself (title, caption, date taken, camera, ...), from
    /// its EXIF, IPTC and XMP and the cut's `--title`, `--description` and `--album`; nil
    /// when nothing is known (and in manifests written before tiler kept it).
    public var metadata: PhotoMetadata?

    /// The input of a cut: its file name (without folders) and size in bytes.
    public struct Source: Sendable, Hashable, Codable {
        public var file: String
        public var bytes: Int

        public init(file: String, bytes: Int) {
            self.file = file
            self.bytes = bytes
        }
    }

    /// Whether edge tiles are stored at the full tile size.
    public var isPadded: Bool { padded == true }

    /// Marks the pyramid as padded, which needs format version 2.
    public mutating func setPadded(background: String) {
        padded = true
        self.background = background
        formatVersion = max(formatVersion, 2)
    }

    /// The thumbnail file and its size.
    public struct Thumbnail: Sendable, Hashable, Codable {
        public var file: String
        public var width: Int
        public var height: Int

        public init(file: String, width: Int, height: Int) {
            self.file = file
            self.width = width
            self.height = height
        }
    }

    public init(
        id: PyramidID, geometry: PyramidGeometry, format: TileFormat, thumbnail: Thumbnail,
        quality: Int? = nil, bands: Int? = nil, created: String? = nil
    ) {
        self.formatVersion = 1
        self.id = id
        self.width = geometry.width
        self.height = geometry.height
        self.tileSize = geometry.tileSize
        self.format = format
        self.maxLevel = geometry.maxLevel
        self.levels = geometry.levels
        self.thumbnail = thumbnail
        self.quality = quality
        self.bands = bands
        self.created = created
    }

    /// The geometry, rebuilt from the stored size and checked against the stored levels,
    /// and the rest of the manifest checked against the limits: sides up to
    /// `PyramidGeometry.maximumSide`, tile sizes in `PyramidGeometry.tileSizeRange`, at
    /// most `maximumTilesPerSide` columns and rows, bands 1...4, quality 1...100, thumbnail
    /// sides no larger than an image's, metadata texts within their lengths
    /// (`PhotoMetadata.validate()`).
    public func geometry() throws(ManifestError) -> PyramidGeometry {
        guard formatVersion >= 1, formatVersion <= Self.currentFormatVersion else {
            throw .unsupportedVersion(formatVersion)
        }
        let g: PyramidGeometry
        do { g = try PyramidGeometry(width: width, height: height, tileSize: tileSize) } catch {
            throw .inconsistent(error.description)
        }
        guard g.maxLevel == maxLevel, g.levels == levels else {
            throw .inconsistent("levels do not match a \(width)×\(height) image with \(tileSize) px tiles")
        }
        // The finest level has the most columns and rows.
        let finest = g.level(g.maxLevel)
        guard finest.columns <= Self.maximumTilesPerSide, finest.rows <= Self.maximumTilesPerSide else {
            throw .outOfLimits("\(finest.columns)×\(finest.rows) tiles in level \(g.maxLevel); at most \(Self.maximumTilesPerSide) a side")
        }
        if let bands, !(1...4).contains(bands) { throw .outOfLimits("bands \(bands) is not 1...4") }
        if let quality, !(1...100).contains(quality) { throw .outOfLimits("quality \(quality) is not 1...100") }
        let sides = 0...PyramidGeometry.maximumSide
        guard sides.contains(thumbnail.width), sides.contains(thumbnail.height) else {
            throw .outOfLimits("a \(thumbnail.width)×\(thumbnail.height) thumbnail")
        }
        try metadata?.validate()
        return g
    }

    /// The most columns (and rows) a level may have: tile coordinates stay 32-bit.
    public static let maximumTilesPerSide = Int(Int32.max)

    /// The largest tile file tiler accepts, wherever a tile is read: served from a folder
    /// or an archive, drawn from, packed, unpacked or verified. Twice a decoded tile of the
    /// manifest's bands (four when it does not say), plus 64 KiB: no encoder makes a tile
    /// larger (a PNG of incompressible pixels is its raw rows and a little), so a larger
    /// file or archive entry is not a tile, and no read is sized by what it claims.
    public var maximumTileBytes: Int {
        2 * tileSize * tileSize * max(1, min(4, bands ?? 4)) + Self.encodingSlack
    }

    /// The largest thumbnail file accepted, by the same rule for four bands, and at most
    /// 64 MiB.
    public var maximumThumbnailBytes: Int {
        let (pixels, overflow) = thumbnail.width.multipliedReportingOverflow(by: thumbnail.height)
        return overflow || pixels > 8 << 20 ? 64 << 20 : 2 * 4 * pixels + Self.encodingSlack
    }

    /// What a tile or thumbnail file may hold beyond twice its pixels: headers, metadata.
    static let encodingSlack = 64 << 10

    /// The relative path of a tile inside the pyramid folder: `LEVEL/ROW/COLUMN.EXT`.
    public func tilePath(_ tile: TileCoordinate) -> String {
        "\(tile.level)/\(tile.row)/\(tile.column).\(format.fileExtension)"
    }
}

/// Why a manifest cannot be used.
public enum ManifestError: Error, Hashable, Sendable, CustomStringConvertible {
    case unsupportedVersion(Int)
    case inconsistent(String)
    case outOfLimits(String)

    public var description: String {
        switch self {
        case let .unsupportedVersion(v):
            "pyramid format version \(v) is not supported by this tiler (it reads 1...\(PyramidManifest.currentFormatVersion)); upgrade tiler"
        case let .inconsistent(why): "pyramid.json is inconsistent: \(why)"
        case let .outOfLimits(why): "pyramid.json is outside this tiler's limits: \(why)"
        }
    }
}
