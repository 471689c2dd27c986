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
/// The renderer never opens a file: it asks `tiles` for each tile's bytes, so whoever
/// serves it decides how files are read (the server: beneath ROOT, no links followed,
/// regular files only, size-bounded). Every size it computes from a job is
/// overflow-checked, and `render` refuses a job whose `estimatedPeakBytes` exceeds the
/// limit it is given before it allocates anything for it.
///
/// Memory: callers choose the coarsest level that still has enough resolution
/// (`IIIFImagePlan.sourceLevel`), so the source is at most about four times the output.
/// Tiles are decoded top to bottom as the output needs their rows, so the decoded source
/// is a strip, not the whole region; what is held whole is listed in `MemoryEstimate`.
public struct RegionRenderer: Sendable {
    /// Reads one stored tile: its encoded bytes, or `.missingTile` / `.badTile`.
    public typealias TileReader = @Sendable (TileCoordinate) throws(RenderError) -> [UInt8]

    public let manifest: PyramidManifest
    public let geometry: PyramidGeometry
    private let readTile: TileReader
    /// Encoder quality for JPEG and WebP output.
    public var encoderQuality: Int = 90
    /// Whether the jobs `TileDrawing` can draw are drawn that way (without libvips); off
    /// only to compare the two.
    public var usesTileDrawing = true
    /// Where drawings without libvips keep the tiles they decode, and find those decoded
    /// before (the server shares one cache among its drawings); nil to keep none.
    public var decodedTiles: DecodedTiles?

    /// - Parameter tiles: how to read a tile's bytes; called once per covering tile.
    public init(manifest: PyramidManifest, tiles: @escaping TileReader) throws(RenderError) {
        do {
            self.geometry = try manifest.geometry()
        } catch {
            throw RenderError.badPyramid("\(manifest.id): \(error)")
        }
        self.manifest = manifest
        self.readTile = tiles
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

        public init(
            level: Int, rect: PixelRect, width: Int, height: Int,
            rotation: IIIFRotation = IIIFRotation(), quality: IIIFQuality = .default, format: IIIFFormat
        ) {
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
        return Job(
            level: z, rect: plan.rectInLevel(z, of: geometry), width: plan.width, height: plan.height,
            rotation: plan.rotation, quality: plan.quality, format: plan.format)
    }

    /// The job for a DeepZoom level below ours: all of level 0 shrunk to `width × height`,
    /// in the pyramid's own format.
    public func shrunkLevelZeroJob(width: Int, height: Int) -> Job {
        let l = geometry.level(0)
        return Job(
            level: 0, rect: PixelRect(x: 0, y: 0, width: l.width, height: l.height),
            width: width, height: height, format: IIIFFormat(manifest.format))
    }

    /// The tiles of a job's level that cover its rectangle, and the largest side libvips
    /// takes. Nil when the job is not inside its level.
    private func coverage(_ job: Job) -> (columns: ClosedRange<Int>, rows: ClosedRange<Int>)? {
        guard geometry.contains(level: job.level) else { return nil }
        let l = geometry.level(job.level)
        let r = job.rect
        guard r.x >= 0, r.y >= 0, r.width >= 1, r.height >= 1, r.x <= l.width - r.width, r.y <= l.height - r.height,
            job.width >= 1, job.height >= 1
        else { return nil }
        let T = geometry.tileSize
        return (r.x / T...(r.maxX - 1) / T, r.y / T...(r.maxY - 1) / T)
    }

    /// An upper bound, in bytes, of the memory one render of `job` holds at its peak:
    /// the encoded tiles (at most their decoded size), the decoding strips, the output
    /// canvas when it has to be held whole (rotations), the rotated canvas and the
    /// encoder's own copies (WebP holds the whole picture two or three times; PNG and
    /// JPEG stream rows and hold their output), and an allowance per libvips worker
    /// thread. Saturates at `Int.max`; never traps, whatever the job.
    public func estimatedPeakBytes(_ job: Job) -> Int {
        guard let (columns, rows) = coverage(job) else { return 0 }
        let T = geometry.tileSize
        let bands = max(1, min(4, manifest.bands ?? 4))
        let tileCount = SaturatingInt(columns.count) * rows.count
        let tileBytes = SaturatingInt(T) * T * bands
        // Encoded bytes are held for the whole render (bounded by the decoded size plus
        // a little); one tile row is being decoded at a time, with a strip per tile.
        let encoded = tileCount * (tileBytes + 4096)
        let decoding = SaturatingInt(columns.count) * (tileBytes + 256 << 10)
        var total = encoded + decoding

        // The output before rotation, and after.
        let outBands = bands + (job.rotation.isRightAngle || job.format == .jpg ? 0 : 1)
        let output = SaturatingInt(job.width) * job.height * min(4, outBands)
        var finalPixels = SaturatingInt(job.width) * job.height
        if job.rotation.degrees != 0 {
            // Rotations read their input in any order: it is held whole.
            total = total + output
            if !job.rotation.isRightAngle {
                let radians = job.rotation.degrees * .pi / 180
                let c = abs(cos(radians)), s = abs(sin(radians))
                let w = Double(job.width), h = Double(job.height)
                let rw = saturatingInt((w * c + h * s).rounded(.up) + 2)
                let rh = saturatingInt((w * s + h * c).rounded(.up) + 2)
                finalPixels = SaturatingInt(rw) * rh
            }
        }
        switch job.format {
        case .webp:
            // libvips gathers the whole RGBA frame, libwebp copies it to ARGB and YUVA and
            // keeps its own analysis: 18 to 27 bytes a pixel measured on noise (the worst
            // case), 32 allowed.
            total = total + finalPixels * 32
        case .png, .jpg:
            // Rows stream into an output buffer that grows by half as needed (the
            // encoded size is at most about the raw size), then one copy out of libvips.
            total = total + finalPixels * min(4, outBands) * 3
        }
        // Region buffers of libvips' worker threads, and the rest.
        return (total + (16 << 20) + SaturatingInt(Self.libvipsThreads) * (8 << 20)).value
    }

    /// libvips' worker threads per operation.
    private static let libvipsThreads = Int(vips_concurrency_get())

    /// Renders a IIIF request: the encoded bytes.
    public func render(_ plan: IIIFImagePlan, maximumBytes: Int = .max) throws(RenderError) -> [UInt8] {
        try render(job(for: plan), maximumBytes: maximumBytes)
    }

    /// Renders a job: the encoded bytes. `.tooLarge` (before anything is read) when the
    /// job's `estimatedPeakBytes` exceeds `maximumBytes`.
    public func render(_ job: Job, maximumBytes: Int = .max) throws(RenderError) -> [UInt8] {
        guard let (columns, rows) = coverage(job) else {
            let l = geometry.contains(level: job.level) ? "\(geometry.level(job.level).width)×\(geometry.level(job.level).height)" : "none"
            throw .badJob("rectangle \(job.rect) at \(job.width)×\(job.height) is not inside level \(job.level) (\(l))")
        }
        let estimate = estimatedPeakBytes(job)
        guard estimate <= maximumBytes else { throw .tooLarge(estimatedBytes: estimate, limit: maximumBytes) }
        if usesTileDrawing,
            let drawing = TileDrawing(
                job: job, format: manifest.format, bands: manifest.bands, padded: manifest.isPadded, geometry: geometry)
        {
            let drawn = try drawing.draw(
                columns: columns, rows: rows, encoderQuality: encoderQuality, readTile: readTile, kept: decodedTiles)
            if let drawn { return drawn }
        }
        do { try Vips.start(for: .drawing) } catch { throw .libvips(error.description) }
        let r = job.rect
        let T = geometry.tileSize
        // libvips takes 32-bit sizes; the estimate keeps real jobs far below, this keeps
        // a caller that passed no limit from trapping.
        guard let left = Int32(exactly: r.x - columns.lowerBound * T), let top = Int32(exactly: r.y - rows.lowerBound * T),
            let cropWidth = Int32(exactly: r.width), let cropHeight = Int32(exactly: r.height),
            let width = Int32(exactly: job.width), let height = Int32(exactly: job.height),
            let across = Int32(exactly: columns.count),
            case let (product, false) = columns.count.multipliedReportingOverflow(by: rows.count),
            let count = Int32(exactly: product)
        else { throw .tooLarge(estimatedBytes: estimate, limit: Int(Int32.max)) }

        // Load the covering tiles, row by row; each is decoded top to bottom as needed.
        var tiles: [VipsImageHandle] = []
        tiles.reserveCapacity(Int(count))
        for row in rows {
            for column in columns {
                let tile = TileCoordinate(level: job.level, row: row, column: column)
                let bytes = try readTile(tile)
                let loaded = bytes.withUnsafeBytes { tiler_render_load_bytes($0.baseAddress, $0.count, 1) }
                guard let image = loaded else { throw .badTile("\(manifest.id) tile \(tile): \(Vips.takeError())") }
                tiles.append(VipsImageHandle(taking: image))
            }
        }
        do {
            return try draw(job, tiles, across: across, count: count, crop: (left, top, cropWidth, cropHeight), size: (width, height))
        } catch {
            let first = "\(job.level)/\(rows.lowerBound)/\(columns.lowerBound)",
                last = "\(job.level)/\(rows.upperBound)/\(columns.upperBound)"
            throw .libvips("\(manifest.id) from tiles \(first)…\(last): \(error.description)")
        }
    }

    /// The libvips part of `render`, from the loaded tiles to the encoded bytes.
    private func draw(
        _ job: Job, _ tiles: [VipsImageHandle], across: Int32, count: Int32,
        crop: (left: Int32, top: Int32, width: Int32, height: Int32),
        size: (width: Int32, height: Int32)
    ) throws(ImagingError) -> [UInt8] {
        let r = job.rect
        let (left, top, cropWidth, cropHeight) = crop
        let (width, height) = size
        var image: VipsImageHandle
        if tiles.count == 1 {
            image = tiles[0]
        } else {
            var pointers: [UnsafeMutablePointer<VipsImage>?] = tiles.map { $0.pointer }
            var out: UnsafeMutablePointer<VipsImage>?
            guard tiler_render_arrayjoin(&pointers, count, across, &out) == 0, let out else {
                throw .libvips("joining \(tiles.count) tiles: \(Vips.takeError())")
            }
            image = VipsImageHandle(taking: out)
        }
        if left != 0 || top != 0 || image.width != r.width || image.height != r.height {
            image = try image.apply("crop") { tiler_render_crop($0, $1, left, top, cropWidth, cropHeight) }
        }
        image = try image.apply("resize") { tiler_render_resize_exact($0, $1, width, height) }

        if job.rotation.mirror {
            image = try image.apply("mirror") { tiler_render_mirror($0, $1) }
        }
        if job.rotation.degrees != 0 {
            // Rotations read in any order; the tiles are read top to bottom once, here.
            image = try image.apply("draw") { tiler_render_copy_memory($0, $1) }
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
        guard status == 0, let buffer else { throw .libvips("encoding \(job.format.rawValue): \(Vips.takeError())") }
        defer { g_free(buffer) }
        return Array(UnsafeRawBufferPointer(start: buffer, count: length))
    }

    /// Hands the memory that finished renders freed back to the system. Worth calling when
    /// no render is running: glibc keeps freed blocks in its per-thread arenas otherwise.
    public static func releaseFreedMemory() {
        tiler_render_release_memory()
    }
}

/// A non-negative size that saturates at `Int.max` instead of trapping.
struct SaturatingInt {
    let value: Int
    init(_ value: Int) { self.value = max(0, value) }

    static func * (a: SaturatingInt, b: Int) -> SaturatingInt {
        let (p, overflow) = a.value.multipliedReportingOverflow(by: max(0, b))
        return SaturatingInt(overflow ? .max : p)
    }

    static func * (a: SaturatingInt, b: SaturatingInt) -> SaturatingInt { a * b.value }

    static func + (a: SaturatingInt, b: SaturatingInt) -> SaturatingInt {
        let (s, overflow) = a.value.addingReportingOverflow(b.value)
        return SaturatingInt(overflow ? .max : s)
    }

    static func + (a: SaturatingInt, b: Int) -> SaturatingInt { a + SaturatingInt(b) }

    static func / (a: SaturatingInt, b: Int) -> SaturatingInt { SaturatingInt(a.value / max(1, b)) }
}

/// `value` rounded down to an integer, 0 for negative or NaN, `Int.max` when too large.
private func saturatingInt(_ value: Double) -> Int {
    guard value.isFinite else { return value > 0 ? .max : 0 }
    if value <= 0 { return 0 }
    return value >= 9.0e18 ? .max : Int(value)
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
        do { try Vips.start(for: .verifying) } catch { throw RenderError.libvips(error.description) }
        var data: UnsafeMutablePointer<UInt8>?
        var length = 0
        var w: Int32 = 0, h: Int32 = 0, b: Int32 = 0
        let status = bytes.withUnsafeBytes { tiler_render_decode($0.baseAddress, $0.count, &data, &length, &w, &h, &b) }
        guard status == 0, let data else { throw RenderError.libvips("decoding \(bytes.count) bytes: \(Vips.takeError())") }
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
    /// A tile's bytes are not an image of the pyramid's format, or are cut short.
    case badTile(String)
    /// The job would need more memory than it may take (`estimatedBytes` > `limit`).
    case tooLarge(estimatedBytes: Int, limit: Int)
    /// The job asks for pixels outside its level.
    case badJob(String)
    /// libvips refused an operation; the message is libvips' own.
    case libvips(String)
    /// The storage holding the tiles did not answer (`timedOut`: not in time): the
    /// drawing may succeed later.
    case unavailable(String, timedOut: Bool)

    public var description: String {
        switch self {
        case let .badPyramid(why): "pyramid is unusable: \(why)"
        case let .missingTile(why): "tile missing: \(why)"
        case let .badTile(why): "tile unreadable: \(why)"
        case let .tooLarge(estimate, limit): "drawing needs about \(estimate >> 20) MiB, more than the \(limit >> 20) MiB allowed"
        case let .badJob(why): "cannot render: \(why)"
        case let .libvips(why): "libvips: \(why)"
        case let .unavailable(why, _): "storage unavailable: \(why)"
        }
    }
}
