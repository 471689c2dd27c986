import CTilerShims
import Foundation
import TilerCore
import TilerStorage

/// How to cut: tile size and format, what the input may be, how its pixels are read,
/// folder or archive, and what to do with an existing pyramid.
public struct CutOptions: Sendable {
    /// The largest input `tiler cut` accepts by default, in pixels (width × height): a
    /// gigapixel scan or panorama fits (2 Gpx is 50000 × 40000), a header that claims
    /// 65500 × 65500 does not.
    public static let defaultMaxPixels = 2_000_000_000
    /// The thumbnail's longest side by default (`--thumbnail-size`).
    public static let defaultThumbnailSize = 256
    /// The thumbnail sizes accepted. The cut keeps the smallest level at least this large
    /// in memory to make the thumbnail from (below twice the size on its longest side: at
    /// most 4096² RGBA pixels, 64 MiB, at the largest size).
    public static let thumbnailSizeRange = 16...2048

    public var tileSize: Int
    /// The tiles' format, or nil for `auto` (`tiler cut`'s and `--sources`' default): per
    /// image, JPEG for one without an alpha channel and PNG for one with it
    /// (``tileFormat(hasAlpha:)``).
    public var format: TileFormat?
    /// JPEG or WebP quality, 1-100; nil for the format's default.
    public var quality: Int?
    public var png: PNGSettings
    /// The longest side of the thumbnail (smaller images keep their size).
    public var thumbnailSize: Int
    /// Replace an existing pyramid of the same id.
    public var force: Bool
    /// Inputs with more pixels than this are refused before any pixel is decoded.
    public var maxPixels: Int
    /// Accept SVG, PDF and ImageMagick inputs (refused by default: their size and cost
    /// are whatever the file says).
    public var allowVector: Bool
    /// Apply the EXIF orientation.
    public var autorotate: Bool
    /// Convert an embedded ICC profile (RGB or CMYK input) to sRGB.
    public var convertProfile: Bool
    /// Write edge tiles at the full tile size.
    public var pad: Bool
    /// The padding colour, and with JPEG tiles the colour alpha is flattened on; nil for
    /// the default (transparent padding where the format has alpha, else white).
    public var background: BackgroundColour?
    /// A folder `ROOT/ID/` or an archive `ROOT/ID.pmtiles`.
    public var layout: PyramidLayout
    /// Keep the photo's GPS position in its metadata (`--keep-location`); dropped by
    /// default.
    public var keepLocation: Bool
    /// What `--title`, `--description` and `--album` set, over what the photo says.
    public var metadataOverrides: PhotoMetadata

    /// Every default is `tiler cut`'s (which reads its defaults here): tiles of
    /// `PyramidGeometry.defaultTileSize`, `auto` format, into a folder.
    public init(
        tileSize: Int = PyramidGeometry.defaultTileSize, format: TileFormat? = nil, quality: Int? = nil,
        png: PNGSettings = .tiles, thumbnailSize: Int = CutOptions.defaultThumbnailSize, force: Bool = false,
        maxPixels: Int = CutOptions.defaultMaxPixels, allowVector: Bool = false,
        autorotate: Bool = true, convertProfile: Bool = true, pad: Bool = false,
        background: BackgroundColour? = nil, layout: PyramidLayout = .folder,
        keepLocation: Bool = false, metadataOverrides: PhotoMetadata = PhotoMetadata()
    ) {
        self.tileSize = tileSize
        self.format = format
        self.quality = quality
        self.png = png
        self.thumbnailSize = thumbnailSize
        self.force = force
        self.maxPixels = maxPixels
        self.allowVector = allowVector
        self.autorotate = autorotate
        self.convertProfile = convertProfile
        self.pad = pad
        self.background = background
        self.layout = layout
        self.keepLocation = keepLocation
        self.metadataOverrides = metadataOverrides
    }

    /// What the image says about itself (`image` as libvips opened it), with the
    /// overrides applied; nil when nothing is known. The ignored blocks' reasons are
    /// dropped: a photo whose XMP is refused is still cut, with what EXIF and IPTC say.
    func metadata(of image: VipsImageHandle) -> PhotoMetadata? {
        var m = PhotoMetadataReader(keepLocation: keepLocation).read(image).metadata
        let o = metadataOverrides
        m.title = o.title ?? m.title
        m.description = o.description ?? m.description
        m.album = o.album ?? m.album
        return m.isEmpty ? nil : m
    }

    /// The format of an image's tiles: `format`, or for `auto` (nil) PNG when the image
    /// has an alpha channel (or `--pad` with a transparent `--background` gives its edge
    /// tiles one), else JPEG: what photo viewers expect, and a photo's tiles are several
    /// times smaller as JPEG than as PNG.
    public func tileFormat(hasAlpha: Bool) -> TileFormat {
        if let format { return format }
        return hasAlpha || (pad && background?.isOpaque == false) ? .png : .jpeg
    }

    /// How input pixels become tiles of `format` (profile, alpha flattened or added), for
    /// `tiler_vips_to_tile_pixels`: the cut and the sources served on the fly share it.
    func tilePixelSettings(for format: TileFormat) -> tiler_tile_pixels {
        let background = self.background ?? .white
        return tiler_tile_pixels(
            convert_profile: convertProfile ? 1 : 0,
            flatten_alpha: format == .jpeg ? 1 : 0,
            add_alpha: pad && !paddingColour(for: format).isOpaque ? 1 : 0,
            background: (Double(background.red), Double(background.green), Double(background.blue)),
            cmyk_profile: CMYKProfile.currentPath)
    }

    /// The padding colour `--pad` uses with tiles of `format`: `background`, else
    /// transparent where the format has alpha (PNG, WebP) and white for JPEG.
    public func paddingColour(for format: TileFormat) -> BackgroundColour {
        background ?? (format == .jpeg ? .white : .transparent)
    }
}

/// What one successful cut produced.
public struct CutResult: Sendable {
    public let id: PyramidID
    /// The pyramid folder `ROOT/ID`, or the archive `ROOT/ID.pmtiles` (a file URL), or
    /// `s3://BUCKET/PREFIX/ID.pmtiles`.
    public let output: URL
    /// ``output`` as the user reads it: a path, or the `s3://` address.
    public let destination: String
    public let manifest: PyramidManifest
    /// Tiles written, without the thumbnail.
    public let tiles: Int
    /// Bytes the pyramid takes: every file of a folder (tiles, thumbnail and
    /// manifest), or the archive's size.
    public let bytes: Int
    public let seconds: Double
    /// The folder of the same id that this cut replaced as an archive (`--force`): no
    /// longer served, and to be deleted once servers had their grace period.
    public var retiredFolder: RetiredFolder?

    public init(
        id: PyramidID, output: URL, destination: String? = nil, manifest: PyramidManifest, tiles: Int,
        bytes: Int, seconds: Double
    ) {
        self.id = id
        self.output = output
        self.destination = destination ?? output.path
        self.manifest = manifest
        self.tiles = tiles
        self.bytes = bytes
        self.seconds = seconds
    }
}

/// Why one input could not be cut. `description` is the reason only; the caller names
/// the file.
public enum CutError: Error, Sendable, CustomStringConvertible {
    case missing
    case isDirectory
    /// A FIFO, device or socket: what it is.
    case notARegularFile(String)
    case tooManyPixels(width: Int, height: Int, limit: Int)
    /// A vector or scripted format, refused without `--allow-vector`: the loader.
    case vector(loader: String)
    case unreadable(String)
    case notAnImage(String)
    case unreadablePixels(String)
    case unsupportedSize(String)
    case exists(id: PyramidID, path: String)
    case duplicate(id: PyramidID)
    case hidesDeepZoom(id: PyramidID)
    case noUsableName
    case output(String)
    case interrupted

    public var description: String {
        switch self {
        case .missing: "no such file"
        case .isDirectory: "is a directory, not an image"
        case let .notARegularFile(what): "is \(what), not a regular file; tiler cuts image files only"
        case let .tooManyPixels(width, height, limit):
            "is \(width)×\(height) = \(width * height) pixels, more than --max-pixels \(limit) (a decompression bomb, or a real image that needs a larger --max-pixels)"
        case let .vector(loader) where loader.hasPrefix("magickload"):
            "can only be read by ImageMagick (\(loader)), which also renders vector and scripted formats; refused unless --allow-vector"
        case let .vector(loader):
            "is a vector image (\(loader)); vector inputs are refused unless --allow-vector, because their size and rendering cost are whatever the file says"
        case let .unreadable(why): "cannot be read (\(why))"
        case let .notAnImage(why): "not a supported image (\(why))"
        case let .unreadablePixels(why): "corrupt or truncated image (\(why))"
        case let .unsupportedSize(why): why
        case let .exists(id, path):
            "a pyramid named '\(id)' already exists at \(path); use --force to replace it or --name to choose another id"
        case let .duplicate(id): "another input of this run already uses the id '\(id)'; cut it separately with --name"
        case let .hidesDeepZoom(id):
            "the id '\(id)' ends in .dzi, so /images/\(id) would hide the DeepZoom descriptor of '\(id.rawValue.dropLast(4))'; choose another with --name"
        case .noUsableName: "cannot derive a pyramid id from the file name; use --name"
        case let .output(why): "cannot write the pyramid: \(why)"
        case .interrupted: "interrupted; nothing was kept"
        }
    }
}

extension CutError {
    /// Why an input could not be opened, as the cutter and the sources served on the fly
    /// both report it.
    init(opening error: ImageOpenError) {
        switch error {
        case .unknownFormat: self = .notAnImage(SourcePyramid.unrecognised)
        case let .vector(loader): self = .vector(loader: loader)
        case let .libvips(why): self = .notAnImage(why)
        }
    }
}
