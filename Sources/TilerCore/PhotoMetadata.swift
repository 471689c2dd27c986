/// What a photo says about itself, as `tiler cut` found it in the image's EXIF, IPTC and
/// XMP (or was told with `--title`, `--description` and `--album`): the manifest's
/// `metadata` object. Every field is present only when known.
///
/// Every text is bounded (``maximumFieldBytes``, ``maximumDescriptionBytes``) and free of
/// control characters when written, and checked against the same bounds when a manifest
/// is read (``validate()``), so that a hostile `pyramid.json` cannot hand the server an
/// unbounded title.
public struct PhotoMetadata: Sendable, Hashable, Codable {
    /// XMP `dc:title`, else IPTC object name, else EXIF `ImageDescription`.
    public var title: String?
    /// XMP `dc:description`, else IPTC caption. May hold line breaks.
    public var description: String?
    /// XMP `dc:creator` (several joined by ", "), else IPTC by-line, else EXIF `Artist`.
    public var creator: String?
    /// XMP `dc:rights`, else IPTC copyright notice, else EXIF `Copyright`.
    public var copyright: String?
    /// ISO 8601 from EXIF `DateTimeOriginal`, with `OffsetTimeOriginal` when present:
    /// `2024-05-01T14:03:22+02:00`, or `2024-05-01T14:03:22` without an offset.
    public var dateTaken: String?
    /// EXIF `Make` and `Model` (the model alone when it already names the make).
    public var camera: String?
    /// EXIF `LensModel`.
    public var lens: String?
    /// EXIF exposure time, f-number and ISO: `1/250 s, f/8, ISO 100`.
    public var exposure: String?
    /// EXIF GPS position, kept only with `--keep-location`.
    public var location: Location?
    /// The album the image belongs to (`--album`).
    public var album: String?

    /// A position in degrees, WGS 84 as EXIF GPS records it: north and east positive.
    public struct Location: Sendable, Hashable, Codable {
        public var lat: Double
        public var lon: Double

        public init(lat: Double, lon: Double) {
            self.lat = lat
            self.lon = lon
        }
    }

    public init(
        title: String? = nil, description: String? = nil, creator: String? = nil, copyright: String? = nil,
        dateTaken: String? = nil, camera: String? = nil, lens: String? = nil, exposure: String? = nil,
        location: Location? = nil, album: String? = nil
    ) {
        self.title = title
        self.description = description
        self.creator = creator
        self.copyright = copyright
        self.dateTaken = dateTaken
        self.camera = camera
        self.lens = lens
        self.exposure = exposure
        self.location = location
        self.album = album
    }

    /// The most UTF-8 bytes of every text but `description` (title, creator, copyright,
    /// camera, lens, exposure, album, date): 512. Longer texts found in an image are cut at
    /// a character boundary; a longer `--title` or `--album` is refused.
    public static let maximumFieldBytes = 512
    /// The most UTF-8 bytes of `description`: 4096.
    public static let maximumDescriptionBytes = 4096
    /// The largest EXIF, IPTC or XMP block read from an image, in bytes: 1 MiB. A larger
    /// block is ignored whole (the others are still read), so that no input sizes what
    /// the reader allocates or parses. Real blocks are far smaller: JPEG holds each in one
    /// segment of at most 64 KiB.
    public static let maximumBlockBytes = 1 << 20

    /// Whether nothing is known.
    public var isEmpty: Bool { self == PhotoMetadata() }

    /// The texts and their bounds, in field order.
    private var texts: [(name: String, value: String?, maximum: Int)] {
        [
            ("title", title, Self.maximumFieldBytes), ("description", description, Self.maximumDescriptionBytes),
            ("creator", creator, Self.maximumFieldBytes), ("copyright", copyright, Self.maximumFieldBytes),
            ("dateTaken", dateTaken, Self.maximumFieldBytes), ("camera", camera, Self.maximumFieldBytes),
            ("lens", lens, Self.maximumFieldBytes), ("exposure", exposure, Self.maximumFieldBytes),
            ("album", album, Self.maximumFieldBytes),
        ]
    }

    /// Checks what a stored manifest says against the bounds: every text within its
    /// length, not empty, and a location of finite degrees within ±90 and ±180. Throws
    /// ``ManifestError/outOfLimits(_:)`` naming the field.
    public func validate() throws(ManifestError) {
        for (name, value, maximum) in texts {
            guard let value else { continue }
            let count = value.utf8.count
            guard count > 0, count <= maximum else {
                throw .outOfLimits("metadata \(name) is \(count) bytes; it must be 1...\(maximum)")
            }
        }
        if let location {
            guard location.lat.isFinite, location.lon.isFinite, abs(location.lat) <= 90, abs(location.lon) <= 180 else {
                throw .outOfLimits("metadata location (\(location.lat), \(location.lon)) is not a position in degrees")
            }
        }
    }

    /// `text` as a field holds it: control characters replaced by spaces (line breaks
    /// kept when `multiline`), whitespace trimmed at both ends, cut to `maximumBytes` at
    /// a character boundary; nil when nothing is left.
    public static func cleaned(_ text: String, maximumBytes: Int, multiline: Bool = false) -> String? {
        var out = ""
        var bytes = 0
        for character in text {
            let kept: Character
            if character == "\n" || character == "\r\n" {
                kept = multiline ? "\n" : " "
            } else if character.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
                kept = " "
            } else {
                kept = character
            }
            let size = kept.utf8.count
            guard bytes + size <= maximumBytes else { break }
            out.append(kept)
            bytes += size
        }
        let trimmed = out.trimmingWhitespace()
        return trimmed.isEmpty ? nil : trimmed
    }
}

extension String {
    /// Without white space (spaces, tabs, line breaks) at either end.
    fileprivate func trimmingWhitespace() -> String {
        var s = Substring(self)
        while let c = s.first, c.isWhitespace { s.removeFirst() }
        while let c = s.last, c.isWhitespace { s.removeLast() }
        return String(s)
    }
}
