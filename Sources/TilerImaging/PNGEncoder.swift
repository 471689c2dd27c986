import CPNG
import CTilerShims
import Glibc

/// Encodes 8-bit pixels as PNG with libdeflate or libpng, into memory.
public struct PNGEncoder: Sendable {
    public var settings: PNGSettings

    public init(settings: PNGSettings = .tiles) { self.settings = settings }

    /// Encodes `height` rows of `width` pixels with `bands` bands (1 grey, 2 grey+alpha,
    /// 3 RGB, 4 RGBA), row `y` starting at `pixels + y * stride`, and hands the PNG bytes
    /// to `body`; they are only valid inside it.
    public func withEncoded<R>(
        pixels: UnsafePointer<UInt8>, stride: Int, width: Int, height: Int, bands: Int,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        let library = settings.usedLibrary
        return try withCEncoderOutput(library: library.rawValue, naming: true, body) { buffer, length, message in
            switch library {
            case .libdeflate:
                tiler_png_deflate_encode(
                    pixels, stride, Int32(width), Int32(height), Int32(bands), Int32(settings.zlibLevel),
                    settings.filterType, &buffer, &length, &message, message.count)
            case .libpng:
                tiler_png_encode(
                    pixels, stride, Int32(width), Int32(height), Int32(bands),
                    Int32(settings.zlibLevel), settings.filter.mask, settings.strategy.zlibValue,
                    &buffer, &length, &message, message.count)
            }
        }
    }

    /// Encodes a whole image of contiguous rows into a new array.
    public func encode(_ pixels: [UInt8], width: Int, height: Int, bands: Int) throws -> [UInt8] {
        precondition(pixels.count == width * height * bands, "pixel count does not match \(width)×\(height)×\(bands)")
        return try pixels.withUnsafeBufferPointer { source in
            try withEncoded(pixels: source.baseAddress!, stride: width * bands, width: width, height: height, bands: bands) {
                Array($0.bindMemory(to: UInt8.self))
            }
        }
    }
}
