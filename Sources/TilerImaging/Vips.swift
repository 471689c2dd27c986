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

/// One reference to a libvips image, released when this object goes away.
final class VipsImageHandle {
    let pointer: UnsafeMutablePointer<VipsImage>

    init(taking pointer: UnsafeMutablePointer<VipsImage>) { self.pointer = pointer }
    deinit { tiler_vips_unref(pointer) }

    var width: Int { Int(pointer.pointee.Xsize) }
    var height: Int { Int(pointer.pointee.Ysize) }
    var bands: Int { Int(pointer.pointee.Bands) }

    /// Opens a file for one top-to-bottom pass; only the header is read now.
    static func openSequential(path: String) throws(ImagingError) -> VipsImageHandle {
        try Vips.start()
        vips_error_clear()
        var out: UnsafeMutablePointer<VipsImage>?
        guard tiler_vips_open_sequential(path, &out) == 0, let out else { throw .libvips(Vips.takeError()) }
        return VipsImageHandle(taking: out)
    }

    /// 8-bit grey or sRGB, with alpha if present; alpha flattened on white if asked.
    func tilePixels(flattenAlpha: Bool) throws(ImagingError) -> VipsImageHandle {
        var out: UnsafeMutablePointer<VipsImage>?
        guard tiler_vips_to_tile_pixels(pointer, flattenAlpha ? 1 : 0, &out) == 0, let out else {
            throw .libvips(Vips.takeError())
        }
        return VipsImageHandle(taking: out)
    }

    /// Shrunk so that the longest side is at most `size`; never enlarged.
    func thumbnail(size: Int) throws(ImagingError) -> VipsImageHandle {
        var out: UnsafeMutablePointer<VipsImage>?
        guard tiler_vips_thumbnail_image(pointer, Int32(size), &out) == 0, let out else {
            throw .libvips(Vips.takeError())
        }
        return VipsImageHandle(taking: out)
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
    static func withBorrowed<R>(pixels: UnsafePointer<UInt8>, width: Int, height: Int, bands: Int,
                                _ body: (VipsImageHandle) throws(ImagingError) -> R) throws(ImagingError) -> R {
        try Vips.start()
        guard let image = tiler_vips_image_from_pixels(pixels, Int32(width), Int32(height), Int32(bands)) else {
            throw .libvips(Vips.takeError())
        }
        let handle = VipsImageHandle(taking: image)
        return try body(handle)
    }
}
