import CTilerShims
import Glibc
import TilerCore

/// Turns a rectangle of 8-bit pixels into the bytes of one tile file: PNG through
/// libpng, JPEG through libjpeg and WebP through libwebp, each straight from the strip's
/// rows (no copy). JPEG and WebP use the settings of libvips' `jpegsave` and `webpsave`
/// with `Q` and `strip`, and give the same bytes.
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
    public func withEncoded<R>(
        pixels: UnsafePointer<UInt8>, stride: Int, width: Int, height: Int, bands: Int,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        guard let padding else {
            return try encode(pixels: pixels, stride: stride, width: width, height: height, bands: bands, body)
        }
        return try padding.withPadded(pixels: pixels, stride: stride, width: width, height: height, bands: bands) {
            try encode(pixels: $0, stride: $1, width: $2, height: $3, bands: bands, body)
        }
    }

    private func encode<R>(
        pixels: UnsafePointer<UInt8>, stride: Int, width: Int, height: Int, bands: Int,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        switch format {
        case .png:
            return try png.withEncoded(pixels: pixels, stride: stride, width: width, height: height, bands: bands, body)
        case .jpeg:
            return try withCEncoderOutput(library: "libjpeg", naming: false, body) { buffer, length, message in
                tiler_jpeg_encode(
                    pixels, stride, Int32(width), Int32(height), Int32(bands), Int32(quality ?? 0),
                    &buffer, &length, &message, message.count)
            }
        case .webp:
            return try withCEncoderOutput(library: "libwebp", naming: false, body) { buffer, length, message in
                tiler_webp_encode(
                    pixels, stride, Int32(width), Int32(height), Int32(bands), Int32(quality ?? 0),
                    &buffer, &length, &message, message.count)
            }
        }
    }
}

/// Runs one of the C encoders, which allocate their output (`buffer`, `length`) or write
/// why they failed into `message` and return non-zero; hands the bytes to `body`, then
/// frees them. `naming`: the failure names the library before the C message (libpng's
/// and libdeflate's messages do not say which they are).
func withCEncoderOutput<R>(
    library: String, naming: Bool, _ body: (UnsafeRawBufferPointer) throws -> R,
    _ encode: (inout UnsafeMutablePointer<UInt8>?, inout Int, inout [CChar]) -> Int32
) throws -> R {
    var buffer: UnsafeMutablePointer<UInt8>?
    var length = 0
    var message = [CChar](repeating: 0, count: 256)
    let status = encode(&buffer, &length, &message)
    guard status == 0, let buffer else {
        let text = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        throw ImagingError.encoding(text.isEmpty ? "\(library) failed" : naming ? "\(library): \(text)" : text)
    }
    defer { free(buffer) }
    return try body(UnsafeRawBufferPointer(start: buffer, count: length))
}
