import CTilerShims
import CVips
import Foundation
import TilerSettings

/// The process-wide libvips runtime. Every user starts it through ``start(for:)`` before
/// its first libvips call; the first call, whoever makes it, starts libvips
/// (`tiler_vips_init`, once per process), and a use that needs more of the process adds
/// it the first time it comes. What each use needs, in one place:
///
/// - Operation cache: off for every use. A cut reads each input once and reuses nothing;
///   a verify decodes each tile once; sources keep the tiles they make in tiler's own
///   byte-bounded `PixelCache`; a drawing opens fresh sources every time, so a cache
///   would only keep finished pixels alive after the render, while the render budget
///   counts their memory as freed.
/// - libvips' warnings ("Premature end of JPEG file", a damaged PNG row): off stderr for
///   every use, because tiler reports problems itself (one line per failed input; a
///   failed drawing is logged once). `TILER_VIPS_WARNINGS=1` shows them (``Setting``).
/// - glibc's malloc thresholds: fixed from the first drawing on
///   (`tiler_render_fix_malloc_thresholds`: buffers of 1 MiB and more in their own
///   mappings, arenas trimmed past 4 MiB). Drawings allocate and free buffers of many
///   megabytes; with glibc's dynamic thresholds freeing one raises the mmap threshold,
///   later buffers come from the per-thread arenas, and the free space at their tops is
///   never given back, so the server's RSS would not fall after a burst of drawings
///   (docs/reliability.md). Cutting, verifying and sources keep glibc's defaults.
///
/// The cache and the warnings belong to the process, so they are set once, the same for
/// every use.
enum Vips {
    /// Who is about to call libvips.
    enum Use: Sendable {
        /// `tiler cut`: inputs decoded top to bottom, tiles encoded.
        case cutting
        /// `tiler verify`, and checks of encoded images (`DecodedImage`).
        case verifying
        /// `tiler serve --sources`: tiles cropped from source images on demand.
        case sources
        /// The region renderer: IIIF regions and DeepZoom levels drawn from tiles.
        case drawing
    }

    private static let startup: String? = {
        // Set to anything, even empty, it shows them: never refused.
        let showWarnings = Setting.warnings.given(flags: [:], environment: ProcessInfo.processInfo.environment) != nil
        if tiler_vips_init("tiler", showWarnings ? 1 : 0) != 0 { return takeError() }
        return nil
    }()

    /// `TILER_VIPS_WARNINGS`, declared once: a table without flags, read when libvips
    /// starts. Set to anything, even empty, it shows libvips' warnings on stderr.
    enum Setting: String, SettingTable {
        case warnings

        var variable: String? { "TILER_VIPS_WARNINGS" }

        static var takesFlags: Bool { false }

        static var defaults: Bool { false }

        var declaration: SettingDeclaration<Bool> {
            SettingDeclaration(
                summary:
                    "Show libvips' own warnings on stderr (a damaged JPEG's, a PNG row's), which tiler drops: it reports problems itself",
                value: .other(emptyIsValue: true) { shown, _, _ in shown = true }, defaultText: "off",
                rangeText: "set to anything to show them")
        }
    }

    /// Set once, by the first drawing (a lazy global is initialised exactly once, whatever
    /// the thread).
    private static let drawingMemory: Void = tiler_render_fix_malloc_thresholds()

    /// Starts libvips if it is not running yet, with what `use` needs.
    static func start(for use: Use) throws(ImagingError) {
        if let failure = startup { throw .libvips("libvips did not start: \(failure)") }
        if use == .drawing { _ = drawingMemory }
    }

    /// The libvips error buffer as one line (its lines joined with "; "), then cleared.
    static func takeError() -> String {
        guard let text = vips_error_buffer_copy() else { return "unknown libvips error" }
        defer { g_free(text) }
        let lines = String(cString: text).split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
        let message = lines.filter { !$0.isEmpty }.joined(separator: "; ")
        return message.isEmpty ? "unknown libvips error" : message
    }
}

/// A failure inside libvips or libpng, with their message.
public enum ImagingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Loading or converting failed; libvips' message.
    case libvips(String)
    /// Encoding a tile or thumbnail failed (libpng, or libvips' JPEG and WebP savers).
    case encoding(String)
    /// No room to decode a source within the wait (`SpillBudget`): try again later.
    case busy(String)

    public var description: String {
        switch self {
        case let .libvips(message): message
        case let .encoding(message): "encoding failed: \(message)"
        case let .busy(message): message
        }
    }
}

/// Why a file could not be opened as an image.
enum ImageOpenError: Error, Equatable {
    /// No libvips loader recognises the content.
    case unknownFormat
    /// A vector or scripted format (the loader's nickname), refused unless allowed.
    case vector(loader: String)
    /// The loader failed; libvips' message.
    case libvips(String)
}

/// One reference to a libvips image, released when this object goes away: the one
/// wrapper every user of libvips (cutter, sources, region renderer) holds images in.
/// Operations that make a new image from this one go through ``apply(_:_:)``.
final class VipsImageHandle {
    let pointer: UnsafeMutablePointer<VipsImage>
    /// What must outlive the image: the open input file it reads from. Images made from
    /// this one keep it too.
    let keepAlive: AnyObject?

    init(taking pointer: UnsafeMutablePointer<VipsImage>, keepAlive: AnyObject? = nil) {
        self.pointer = pointer
        self.keepAlive = keepAlive
    }
    deinit { tiler_vips_unref(pointer) }

    var width: Int { Int(pointer.pointee.Xsize) }
    var height: Int { Int(pointer.pointee.Ysize) }
    var bands: Int { Int(pointer.pointee.Bands) }
    /// Whether the image has an alpha channel (libvips' judgement: grey with a second
    /// band, RGB or Lab with a fourth, CMYK with a fifth).
    var hasAlpha: Bool { vips_image_hasalpha(pointer) != 0 }
    /// The EXIF orientation, 1...8.
    var orientation: Int { Int(tiler_vips_orientation(pointer)) }

    /// A shim that makes a new image from `in` into `out`: 0 on success, else -1 with the
    /// reason in libvips' error buffer.
    typealias Operation = (UnsafeMutablePointer<VipsImage>, UnsafeMutablePointer<UnsafeMutablePointer<VipsImage>?>) -> Int32

    /// Runs one shim that makes a new image from this one; on failure, libvips' message
    /// after `what: ` when `what` is given.
    func apply(_ what: String? = nil, _ operation: Operation) throws(ImagingError) -> VipsImageHandle {
        var out: UnsafeMutablePointer<VipsImage>?
        guard operation(pointer, &out) == 0, let out else {
            let why = Vips.takeError()
            throw .libvips(what.map { "\($0): \(why)" } ?? why)
        }
        return VipsImageHandle(taking: out, keepAlive: keepAlive)
    }

    /// Opens an input file by its descriptor (its name is never given to libvips); only
    /// the header is read now. Sequential access is one top-to-bottom pass; random access
    /// lets libvips decode to memory or a temporary file first. `loaderOption` is one
    /// option for the loader (`page`, `subifd` or `shrink` and its value; see
    /// `tiler_vips_open_descriptor`).
    static func open(
        _ file: InputFile, for use: Vips.Use, randomAccess: Bool = false, allowVector: Bool = false,
        loaderOption: (name: String, value: Int)? = nil
    ) throws(ImageOpenError) -> (image: VipsImageHandle, loader: String) {
        do { try Vips.start(for: use) } catch { throw .libvips(error.description) }
        vips_error_clear()
        var out: UnsafeMutablePointer<VipsImage>?
        var loader: UnsafePointer<CChar>?
        let status = tiler_vips_open_descriptor(
            file.descriptor.rawValue, randomAccess ? 1 : 0, allowVector ? 1 : 0, loaderOption?.name, Int32(loaderOption?.value ?? 0),
            &out, &loader)
        let name = loader.map { String(cString: $0) } ?? "unknown loader"
        switch status {
        case 0:
            guard let out else { throw .libvips(Vips.takeError()) }
            return (VipsImageHandle(taking: out, keepAlive: file), name)
        case TILER_OPEN_UNKNOWN_FORMAT:
            vips_error_clear()
            throw .unknownFormat
        case TILER_OPEN_VECTOR:
            throw .vector(loader: name)
        default:
            throw .libvips(file.scrub(Vips.takeError()))
        }
    }

    /// Opens a file for one top-to-bottom pass (tests and tools; the cutter opens its
    /// inputs through ``InputFile``).
    static func openSequential(path: String) throws(ImagingError) -> VipsImageHandle {
        let file: InputFile
        do { file = try InputFile.open(path) } catch { throw .libvips("\(path): \(error)") }
        do { return try open(file, for: .cutting).image } catch { throw .libvips("\(path): \(error)") }
    }

    /// 8-bit grey or sRGB, with alpha if present (or added); see `tiler_tile_pixels`.
    /// A `TILER_CMYK_PROFILE` that names no readable file is an error for every image, so
    /// that the mistake shows at once rather than only with the first CMYK input.
    func tilePixels(_ options: tiler_tile_pixels) throws(ImagingError) -> VipsImageHandle {
        if case .unreadable(let path) = CMYKProfile.current {
            throw .libvips(
                "\(CMYKProfile.Setting.profile.variable!) names '\(path)', which is not a readable file: name an ICC profile file, or 'builtin' for libvips' own CMYK profile"
            )
        }
        var options = options
        return try apply { tiler_vips_to_tile_pixels($0, &options, $1) }
    }

    /// Made `width × height` (never smaller) by repeating the last column and row.
    func extended(toWidth width: Int, height: Int) throws(ImagingError) -> VipsImageHandle {
        try apply { tiler_source_extend($0, Int32(width), Int32(height), $1) }
    }

    /// Turned and flipped as its EXIF orientation says, the tag removed.
    func autorotated() throws(ImagingError) -> VipsImageHandle {
        try apply { tiler_vips_autorotate($0, $1) }
    }

    /// Shrunk so that the longest side is at most `size`; never enlarged.
    func thumbnail(size: Int) throws(ImagingError) -> VipsImageHandle {
        try apply { tiler_vips_thumbnail_image($0, Int32(size), $1) }
    }

    /// Computes every pixel into one buffer of rows (for small images only).
    func pixels() throws(ImagingError) -> [UInt8] {
        var data: UnsafeMutablePointer<UInt8>?
        var length = 0
        guard tiler_vips_pixels(pointer, &data, &length) == 0, let data else { throw .libvips(Vips.takeError()) }
        defer { g_free(data) }
        return Array(UnsafeBufferPointer(start: data, count: length))
    }

    /// Runs `body` over a libvips image that borrows `pixels` (contiguous rows) without copying.
    static func withBorrowed<R>(
        pixels: UnsafePointer<UInt8>, width: Int, height: Int, bands: Int, for use: Vips.Use,
        _ body: (VipsImageHandle) throws(ImagingError) -> R
    ) throws(ImagingError) -> R {
        try Vips.start(for: use)
        guard let image = tiler_vips_image_from_pixels(pixels, Int32(width), Int32(height), Int32(bands)) else {
            throw .libvips(Vips.takeError())
        }
        let handle = VipsImageHandle(taking: image)
        return try body(handle)
    }
}
