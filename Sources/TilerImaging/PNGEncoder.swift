import CPNG
import CTilerShims
import Glibc

/// How libpng compresses tiles: the row filter and zlib's level and strategy.
///
/// The default, ``tiles``, was chosen by measuring (see `docs/cutting.md`): tiles of
/// photographic and noise-like images compress best per CPU second with a cheap
/// predictive filter at a low zlib level. `TILER_PNG_LEVEL`, `TILER_PNG_FILTER` and
/// `TILER_PNG_STRATEGY` override it, for benchmarks.
public struct PNGSettings: Sendable, Hashable, CustomStringConvertible {
    /// libpng row filters.
    public enum Filter: String, Sendable, CaseIterable {
        case none, sub, up, average, paeth
        /// libpng tries every filter on each row and keeps the one it predicts smallest.
        case adaptive

        var mask: Int32 {
            switch self {
            case .none: Int32(PNG_FILTER_NONE)
            case .sub: Int32(PNG_FILTER_SUB)
            case .up: Int32(PNG_FILTER_UP)
            case .average: Int32(PNG_FILTER_AVG)
            case .paeth: Int32(PNG_FILTER_PAETH)
            case .adaptive: Int32(PNG_FILTER_NONE | PNG_FILTER_SUB | PNG_FILTER_UP | PNG_FILTER_AVG | PNG_FILTER_PAETH)
            }
        }
    }

    /// zlib strategies (`Z_DEFAULT_STRATEGY`, `Z_FILTERED`, `Z_HUFFMAN_ONLY`, `Z_RLE`).
    public enum Strategy: String, Sendable, CaseIterable {
        case `default`, filtered, huffman, rle

        var zlibValue: Int32 {
            switch self {
            case .default: 0
            case .filtered: 1
            case .huffman: 2
            case .rle: 3
            }
        }
    }

    /// zlib compression level, 0 (store) to 9 (smallest, slowest).
    public var zlibLevel: Int
    public var filter: Filter
    public var strategy: Strategy

    public init(zlibLevel: Int, filter: Filter, strategy: Strategy) {
        precondition((0...9).contains(zlibLevel), "zlib level \(zlibLevel) outside 0...9")
        self.zlibLevel = zlibLevel
        self.filter = filter
        self.strategy = strategy
    }

    /// The settings tiler cuts with: Paeth filter, zlib `Z_RLE`.
    ///
    /// After Paeth prediction, photographic tiles are small noisy residuals in which LZ77
    /// finds few matches; `Z_RLE` (runs and Huffman coding only) codes them as small as
    /// the default strategy does, or smaller, for a fraction of the CPU. On the benchmark
    /// image this gives 30 % fewer bytes than `vips dzsave` (zlib 6, no filter) at a
    /// quarter of its CPU time. With `Z_RLE` the level barely matters. Flat synthetic
    /// graphics with long exact repeats come out up to ~20 % larger than dzsave's;
    /// measurements in `docs/cutting.md`.
    public static let tiles = PNGSettings(zlibLevel: 2, filter: .paeth, strategy: .rle)

    /// ``tiles`` with any `TILER_PNG_LEVEL` (0-9), `TILER_PNG_FILTER` (none, sub, up,
    /// average, paeth, adaptive) or `TILER_PNG_STRATEGY` (default, filtered, huffman,
    /// rle) from the environment applied; unparsable values are ignored.
    public static func tiles(environment: [String: String]) -> PNGSettings {
        var settings = tiles
        if let text = environment["TILER_PNG_LEVEL"], let level = Int(text), (0...9).contains(level) {
            settings.zlibLevel = level
        }
        if let text = environment["TILER_PNG_FILTER"], let filter = Filter(rawValue: text) { settings.filter = filter }
        if let text = environment["TILER_PNG_STRATEGY"], let strategy = Strategy(rawValue: text) { settings.strategy = strategy }
        return settings
    }

    public var description: String { "zlib \(zlibLevel), filter \(filter.rawValue), strategy \(strategy.rawValue)" }
}

/// Encodes 8-bit pixels as PNG with libpng, into memory.
public struct PNGEncoder: Sendable {
    public var settings: PNGSettings

    public init(settings: PNGSettings = .tiles) { self.settings = settings }

    /// Encodes `height` rows of `width` pixels with `bands` bands (1 grey, 2 grey+alpha,
    /// 3 RGB, 4 RGBA), row `y` starting at `pixels + y * stride`, and hands the PNG bytes
    /// to `body`; they are only valid inside it.
    public func withEncoded<R>(pixels: UnsafePointer<UInt8>, stride: Int, width: Int, height: Int, bands: Int,
                               _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        var buffer: UnsafeMutablePointer<UInt8>?
        var length = 0
        var message = [CChar](repeating: 0, count: 256)
        let status = tiler_png_encode(pixels, stride, Int32(width), Int32(height), Int32(bands),
                                      Int32(settings.zlibLevel), settings.filter.mask, settings.strategy.zlibValue,
                                      &buffer, &length, &message, message.count)
        guard status == 0, let buffer else {
            let text = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw ImagingError.encoding(text.isEmpty ? "libpng failed" : "libpng: \(text)")
        }
        defer { free(buffer) }
        return try body(UnsafeRawBufferPointer(start: buffer, count: length))
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
