import Foundation
import CTilerShims
import CVips

/// The process-wide libvips runtime: started once, on first use.
enum Vips {
    private static let startup: String? = {
        if tiler_vips_init("tiler") != 0 { return takeError() }
        return nil
    }()

    /// Starts libvips if it is not running yet.
    static func start() throws(ImagingError) {
        if let failure = startup { throw .libvips("libvips did not start: \(failure)") }
    }

    /// The libvips error buffer as one line, then cleared.
    static func takeError() -> String {
        guard let text = tiler_vips_error_copy() else { return "unknown libvips error" }
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

    public var description: String {
        switch self {
        case let .libvips(message): message
        case let .encoding(message): "encoding failed: \(message)"
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

/// One reference to a libvips image, released when this object goes away.
final class VipsImageHandle {
    let pointer: UnsafeMutablePointer<VipsImage>
    /// What must outlive the image: the open input file it reads from.
    let keepAlive: AnyObject?

    init(taking pointer: UnsafeMutablePointer<VipsImage>, keepAlive: AnyObject? = nil) {
        self.pointer = pointer
        self.keepAlive = keepAlive
    }
    deinit { tiler_vips_unref(pointer) }

    var width: Int { Int(pointer.pointee.Xsize) }
    var height: Int { Int(pointer.pointee.Ysize) }
    var bands: Int { Int(pointer.pointee.Bands) }
    /// The EXIF orientation, 1...8.
    var orientation: Int { Int(tiler_vips_orientation(pointer)) }

    /// Opens an input file by its descriptor (its name is never given to libvips); only
    /// the header is read now. Sequential access is one top-to-bottom pass; random access
    /// lets libvips decode to memory or a temporary file first.
    static func open(
        _ file: InputFile, randomAccess: Bool = false,
        allowVector: Bool = false
    ) throws(ImageOpenError) -> (image: VipsImageHandle, loader: String) {
        do { try Vips.start() } catch { throw .libvips(error.description) }
        vips_error_clear()
        var out: UnsafeMutablePointer<VipsImage>?
        var loader: UnsafePointer<CChar>?
        let status = tiler_vips_open_descriptor(file.descriptor, randomAccess ? 1 : 0, allowVector ? 1 : 0, &out, &loader)
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
        do { return try open(file).image } catch { throw .libvips("\(path): \(error)") }
    }

    /// 8-bit grey or sRGB, with alpha if present (or added); see `tiler_tile_pixels`.
    func tilePixels(_ options: tiler_tile_pixels) throws(ImagingError) -> VipsImageHandle {
        var out: UnsafeMutablePointer<VipsImage>?
        var options = options
        guard tiler_vips_to_tile_pixels(pointer, &options, &out) == 0, let out else {
            throw .libvips(Vips.takeError())
        }
        return VipsImageHandle(taking: out, keepAlive: keepAlive)
    }

    /// Made `width × height` (never smaller) by repeating the last column and row.
    func extended(toWidth width: Int, height: Int) throws(ImagingError) -> VipsImageHandle {
        var out: UnsafeMutablePointer<VipsImage>?
        guard tiler_source_extend(pointer, Int32(width), Int32(height), &out) == 0, let out else {
            throw .libvips(Vips.takeError())
        }
        return VipsImageHandle(taking: out, keepAlive: keepAlive)
    }

    /// Turned and flipped as its EXIF orientation says, the tag removed.
    func autorotated() throws(ImagingError) -> VipsImageHandle {
        var out: UnsafeMutablePointer<VipsImage>?
        guard tiler_vips_autorotate(pointer, &out) == 0, let out else { throw .libvips(Vips.takeError()) }
        return VipsImageHandle(taking: out, keepAlive: keepAlive)
    }

    /// Shrunk so that the longest side is at most `size`; never enlarged.
    func thumbnail(size: Int) throws(ImagingError) -> VipsImageHandle {
        var out: UnsafeMutablePointer<VipsImage>?
        guard tiler_vips_thumbnail_image(pointer, Int32(size), &out) == 0, let out else {
            throw .libvips(Vips.takeError())
        }
        return VipsImageHandle(taking: out, keepAlive: keepAlive)
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
        pixels: UnsafePointer<UInt8>, width: Int, height: Int, bands: Int,
        _ body: (VipsImageHandle) throws(ImagingError) -> R
    ) throws(ImagingError) -> R {
        try Vips.start()
        guard let image = tiler_vips_image_from_pixels(pixels, Int32(width), Int32(height), Int32(bands)) else {
            throw .libvips(Vips.takeError())
        }
        let handle = VipsImageHandle(taking: image)
        return try body(handle)
    }
}
