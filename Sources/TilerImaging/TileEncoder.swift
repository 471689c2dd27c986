import CTilerShims
import CVips
import TilerCore

/// Turns a rectangle of 8-bit pixels into the bytes of one tile file: PNG through
/// libpng, JPEG and WebP through libvips' save-to-buffer.
public struct TileEncoder: Sendable {
    /// JPEG quality when `--quality` is not given.
    public static let defaultJPEGQuality = 85
    /// WebP quality when `--quality` is not given.
    public static let defaultWebPQuality = 80

    public let format: TileFormat
    /// The JPEG or WebP quality (1-100); nil for PNG.
    public let quality: Int?
    public let png: PNGEncoder
    /// Edge tiles padded to the full tile size (`--pad`); nil keeps them clipped.
    public var padding: TilePadding?

    public init(format: TileFormat, quality: Int? = nil, png: PNGSettings = .tiles, padding: TilePadding? = nil) {
        self.padding = padding
        self.format = format
        switch format {
        case .png: self.quality = nil
        case .jpeg: self.quality = quality ?? Self.defaultJPEGQuality
        case .webp: self.quality = quality ?? Self.defaultWebPQuality
        }
        self.png = PNGEncoder(settings: png)
    }

    /// Encodes `height` rows of `width` pixels (row `y` at `pixels + y * stride`) and hands
    /// the encoded bytes to `body`; they are only valid inside it. With `padding`, a
    /// smaller (edge) tile is first padded to the full tile size.
    public func withEncoded<R>(pixels: UnsafePointer<UInt8>, stride: Int, width: Int, height: Int, bands: Int,
                               _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        guard let padding else {
            return try encode(pixels: pixels, stride: stride, width: width, height: height, bands: bands, body)
        }
        return try padding.withPadded(pixels: pixels, stride: stride, width: width, height: height, bands: bands) {
            try encode(pixels: $0, stride: $1, width: $2, height: $3, bands: bands, body)
        }
    }

    private func encode<R>(pixels: UnsafePointer<UInt8>, stride: Int, width: Int, height: Int, bands: Int,
                           _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        switch format {
        case .png:
            return try png.withEncoded(pixels: pixels, stride: stride, width: width, height: height, bands: bands, body)
        case .jpeg, .webp:
            let rowBytes = width * bands
            if stride == rowBytes {
                return try encodeWithVips(pixels, width: width, height: height, bands: bands, body)
            }
            // libvips wants contiguous rows: gather the tile first.
            let gathered = UnsafeMutablePointer<UInt8>.allocate(capacity: rowBytes * height)
            defer { gathered.deallocate() }
            for y in 0..<height {
                (gathered + y * rowBytes).update(from: pixels + y * stride, count: rowBytes)
            }
            return try encodeWithVips(gathered, width: width, height: height, bands: bands, body)
        }
    }

    private func encodeWithVips<R>(_ pixels: UnsafePointer<UInt8>, width: Int, height: Int, bands: Int,
                                   _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        let quality = Int32(self.quality ?? 0)
        let format = self.format
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        try VipsImageHandle.withBorrowed(pixels: pixels, width: width, height: height, bands: bands) { image throws(ImagingError) in
            let status = format == .jpeg
                ? tiler_vips_jpegsave_buffer(image.pointer, quality, &buffer, &length)
                : tiler_vips_webpsave_buffer(image.pointer, quality, &buffer, &length)
            guard status == 0, buffer != nil else { throw .encoding(Vips.takeError()) }
        }
        defer { g_free(buffer) }
        return try body(UnsafeRawBufferPointer(start: buffer, count: length))
    }
}
