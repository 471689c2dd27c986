import CTilerShims
import CVips
import Foundation
import TilerCore

/// Draws any region of a pyramid at any size from the tiles of one level, with libvips:
/// the tiles that cover the region are loaded and joined, the region cropped, resampled
/// to the exact output size, mirrored, rotated, converted to the asked quality and
/// encoded. IIIF requests that are not a stored tile, and DeepZoom levels smaller than
/// the pyramid's level 0, are drawn this way.
///
/// Memory is bounded by the level rectangle: callers choose the coarsest level that
/// still has enough resolution (`IIIFImagePlan.sourceLevel`), so the pixels read are at
/// most about four times the output.
public struct RegionRenderer: Sendable {
    /// The pyramid's folder (`ROOT/ID`).
    public let directory: String
    public let manifest: PyramidManifest
    public let geometry: PyramidGeometry
    /// Encoder quality for JPEG and WebP output.
    public var encoderQuality: Int = 90

    public init(directory: String, manifest: PyramidManifest) throws(RenderError) {
        guard tiler_render_init() == 0 else { throw RenderError.libvips("cannot start libvips: \(vipsError())") }
        do {
            self.geometry = try manifest.geometry()
        } catch {
            throw RenderError.badPyramid("\(directory): \(error)")
        }
        self.directory = directory
        self.manifest = manifest
    }

    /// What to draw: a rectangle of one level, the output size before rotation, and what
    /// to do to it.
    public struct Job: Sendable, Hashable {
        public var level: Int
        /// In the level's pixels, inside the level.
        public var rect: PixelRect
        public var width: Int
        public var height: Int
        public var rotation: IIIFRotation
        public var quality: IIIFQuality
        public var format: IIIFFormat

        public init(level: Int, rect: PixelRect, width: Int, height: Int,
                    rotation: IIIFRotation = IIIFRotation(), quality: IIIFQuality = .default, format: IIIFFormat) {
            self.level = level
            self.rect = rect
            self.width = width
            self.height = height
            self.rotation = rotation
            self.quality = quality
            self.format = format
        }
    }

    /// The job for a IIIF image request: from the finest level the output needs.
    public func job(for plan: IIIFImagePlan) -> Job {
        let z = plan.sourceLevel(in: geometry)
        return Job(level: z, rect: plan.rectInLevel(z, of: geometry), width: plan.width, height: plan.height,
                   rotation: plan.rotation, quality: plan.quality, format: plan.format)
    }

    /// The job for a DeepZoom level below ours: all of level 0 shrunk to `width × height`,
    /// in the pyramid's own format.
    public func shrunkLevelZeroJob(width: Int, height: Int) -> Job {
        let l = geometry.level(0)
        return Job(level: 0, rect: PixelRect(x: 0, y: 0, width: l.width, height: l.height),
                   width: width, height: height, format: IIIFFormat(manifest.format))
    }

    /// Renders a IIIF request: the encoded bytes.
    public func render(_ plan: IIIFImagePlan) throws(RenderError) -> [UInt8] {
        try render(job(for: plan))
    }

    /// Renders a job: the encoded bytes.
    public func render(_ job: Job) throws(RenderError) -> [UInt8] {
        guard geometry.contains(level: job.level) else { throw .badJob("level \(job.level) is not in the pyramid") }
        let l = geometry.level(job.level)
        let r = job.rect
        guard r.x >= 0, r.y >= 0, r.width >= 1, r.height >= 1, r.maxX <= l.width, r.maxY <= l.height,
              job.width >= 1, job.height >= 1
        else { throw .badJob("rectangle \(r) is not inside level \(job.level) (\(l.width)×\(l.height))") }

        let T = geometry.tileSize
        let c0 = r.x / T, c1 = (r.maxX - 1) / T
        let r0 = r.y / T, r1 = (r.maxY - 1) / T

        // Load the covering tiles, row by row.
        var tiles: [VipsHandle] = []
        tiles.reserveCapacity((c1 - c0 + 1) * (r1 - r0 + 1))
        for row in r0...r1 {
            for column in c0...c1 {
                let path = directory + "/" + manifest.tilePath(TileCoordinate(level: job.level, row: row, column: column))
                guard let image = tiler_render_load(path) else {
                    throw .missingTile("\(path): \(vipsError())")
                }
                tiles.append(VipsHandle(image))
            }
        }
        var image: VipsHandle
        if tiles.count == 1 {
            image = tiles[0]
        } else {
            var pointers: [UnsafeMutablePointer<VipsImage>?] = tiles.map { $0.pointer }
            var out: UnsafeMutablePointer<VipsImage>?
            guard tiler_render_arrayjoin(&pointers, Int32(pointers.count), Int32(c1 - c0 + 1), &out) == 0, let out else {
                throw .libvips("joining \(tiles.count) tiles: \(vipsError())")
            }
            image = VipsHandle(out)
        }
        let left = r.x - c0 * T, top = r.y - r0 * T
        if left != 0 || top != 0 || image.width != r.width || image.height != r.height {
            image = try image.apply("crop") { tiler_render_crop($0, $1, Int32(left), Int32(top), Int32(r.width), Int32(r.height)) }
        }
        image = try image.apply("resize") { tiler_render_resize_exact($0, $1, Int32(job.width), Int32(job.height)) }

        if job.rotation.mirror {
            image = try image.apply("mirror") { tiler_render_mirror($0, $1) }
        }
        if job.rotation.degrees != 0 {
            if job.rotation.isRightAngle {
                let turns = Int32(job.rotation.degrees / 90) % 4
                image = try image.apply("rotate") { tiler_render_rot90s($0, $1, turns) }
            } else {
                // The corners outside the rotated image: transparent where the format can
                // say so, white otherwise.
                var background = 255.0
                if job.format != .jpg {
                    image = try image.apply("alpha") { tiler_render_add_alpha($0, $1) }
                    background = 0
                }
                let degrees = job.rotation.degrees
                image = try image.apply("rotate") { tiler_render_rotate($0, $1, degrees, background) }
            }
        }

        switch job.quality {
        case .default:
            break
        case .color:
            image = try image.apply("colour") { tiler_render_colourspace($0, $1, VIPS_INTERPRETATION_sRGB) }
        case .gray:
            image = try image.apply("grey") { tiler_render_colourspace($0, $1, VIPS_INTERPRETATION_B_W) }
        case .bitonal:
            image = try image.apply("flatten") { tiler_render_flatten($0, $1, 255) }
            image = try image.apply("grey") { tiler_render_colourspace($0, $1, VIPS_INTERPRETATION_B_W) }
            image = try image.apply("threshold") { tiler_render_threshold($0, $1, 128) }
        }

        var buffer: UnsafeMutableRawPointer?
        var length = 0
        let status: Int32
        switch job.format {
        case .jpg:
            image = try image.apply("flatten") { tiler_render_flatten($0, $1, 255) }
            status = tiler_render_save_jpeg(image.pointer, &buffer, &length, Int32(encoderQuality))
        case .png:
            status = tiler_render_save_png(image.pointer, &buffer, &length)
        case .webp:
            status = tiler_render_save_webp(image.pointer, &buffer, &length, Int32(encoderQuality))
        }
        guard status == 0, let buffer else { throw .libvips("encoding \(job.format.rawValue): \(vipsError())") }
        defer { g_free(buffer) }
        return Array(UnsafeRawBufferPointer(start: buffer, count: length))
    }
}

/// An image decoded to 8-bit pixels: for checking what was rendered (tests, screenshots),
/// not for serving.
public struct DecodedImage: Sendable, Hashable {
    public let width: Int
    public let height: Int
    public let bands: Int
    /// Rows of `width * bands` bytes, top to bottom.
    public let pixels: [UInt8]

    /// Decodes PNG, JPEG, WebP or anything else libvips reads.
    public init(encoded bytes: [UInt8]) throws(RenderError) {
        guard tiler_render_init() == 0 else { throw RenderError.libvips("cannot start libvips: \(vipsError())") }
        var data: UnsafeMutablePointer<UInt8>?
        var length = 0
        var w: Int32 = 0, h: Int32 = 0, b: Int32 = 0
        let status = bytes.withUnsafeBytes { tiler_render_decode($0.baseAddress, $0.count, &data, &length, &w, &h, &b) }
        guard status == 0, let data else { throw RenderError.libvips("decoding \(bytes.count) bytes: \(vipsError())") }
        defer { g_free(data) }
        self.width = Int(w)
        self.height = Int(h)
        self.bands = Int(b)
        self.pixels = Array(UnsafeBufferPointer(start: data, count: length))
    }

    /// The bands of the pixel at `x, y`.
    public subscript(x: Int, y: Int) -> ArraySlice<UInt8> {
        let i = (y * width + x) * bands
        return pixels[i..<(i + bands)]
    }

    /// The mean of each band over a rectangle (clipped to the image).
    public func mean(x: Int, y: Int, width w: Int, height h: Int) -> [Double] {
        var sums = [Double](repeating: 0, count: bands)
        var n = 0
        for yy in max(0, y)..<min(height, y + h) {
            for xx in max(0, x)..<min(width, x + w) {
                let i = (yy * width + xx) * bands
                for b in 0..<bands { sums[b] += Double(pixels[i + b]) }
                n += 1
            }
        }
        return sums.map { n == 0 ? 0 : $0 / Double(n) }
    }
}

/// Why a region could not be drawn.
public enum RenderError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The pyramid's manifest does not describe a valid geometry.
    case badPyramid(String)
    /// A tile file the pyramid should hold is missing or unreadable.
    case missingTile(String)
    /// The job asks for pixels outside its level.
    case badJob(String)
    /// libvips refused an operation; the message is libvips' own.
    case libvips(String)

    public var description: String {
        switch self {
        case let .badPyramid(why): "pyramid is unusable: \(why)"
        case let .missingTile(why): "tile missing: \(why)"
        case let .badJob(why): "cannot render: \(why)"
        case let .libvips(why): "libvips: \(why)"
        }
    }
}

/// One reference to a libvips image, dropped when the handle goes away.
private final class VipsHandle {
    let pointer: UnsafeMutablePointer<VipsImage>

    init(_ pointer: UnsafeMutablePointer<VipsImage>) { self.pointer = pointer }
    deinit { tiler_render_unref(pointer) }

    var width: Int { Int(vips_image_get_width(pointer)) }
    var height: Int { Int(vips_image_get_height(pointer)) }

    /// Runs one shim that makes a new image from this one.
    func apply(_ what: String,
               _ operation: (UnsafeMutablePointer<VipsImage>, UnsafeMutablePointer<UnsafeMutablePointer<VipsImage>?>) -> Int32)
        throws(RenderError) -> VipsHandle {
        var out: UnsafeMutablePointer<VipsImage>?
        guard operation(pointer, &out) == 0, let out else { throw .libvips("\(what): \(vipsError())") }
        return VipsHandle(out)
    }
}

/// Takes libvips' error buffer (clearing it).
private func vipsError() -> String {
    guard let text = vips_error_buffer_copy() else { return "unknown error" }
    defer { g_free(text) }
    let message = String(cString: text).trimmingCharacters(in: .whitespacesAndNewlines)
    return message.isEmpty ? "unknown error" : message
}
