import CTilerShims

/// The 2×2 box filter that makes each pyramid level from the level above.
///
/// Every output pixel is the rounded mean of the input pixels its 2×2 block holds. On the
/// right and bottom edges of an odd-sized image the block is cut off, and the mean is
/// taken over the 1 or 2 pixels that exist, so a `W × H` level shrinks to exactly
/// `ceil(W/2) × ceil(H/2)` (as `PyramidGeometry` says) without inventing pixels.
/// Rounding is half up: `(sum + n/2) / n`, as libvips' `shrink` does for 8-bit images.
public enum AreaAverage {
    /// Shrinks one pair of rows, or a lone last row when `lower` is nil, of `width`
    /// pixels with `bands` 8-bit bands each (1...4), into one row of `(width + 1) / 2`
    /// pixels. The loops are C (`tiler_shrink_rows`), where they vectorise.
    @inline(__always)
    public static func shrinkRows(
        _ upper: UnsafePointer<UInt8>, _ lower: UnsafePointer<UInt8>?,
        width: Int, bands: Int, into out: UnsafeMutablePointer<UInt8>
    ) {
        precondition((1...4).contains(bands), "\(bands) bands")
        tiler_shrink_rows(upper, lower, Int32(width), Int32(bands), out)
    }

    /// Shrinks a whole image held as rows of `width * bands` bytes: the same filter as
    /// the cutter applies strip by strip, for callers with a small image in memory.
    public static func shrink(_ pixels: [UInt8], width: Int, height: Int, bands: Int) -> (pixels: [UInt8], width: Int, height: Int) {
        precondition(pixels.count == width * height * bands, "pixel count does not match \(width)×\(height)×\(bands)")
        let outWidth = (width + 1) / 2
        let outHeight = (height + 1) / 2
        var out = [UInt8](repeating: 0, count: outWidth * outHeight * bands)
        let rowBytes = width * bands
        let outRowBytes = outWidth * bands
        pixels.withUnsafeBufferPointer { source in
            out.withUnsafeMutableBufferPointer { target in
                for y in 0..<outHeight {
                    let upper = source.baseAddress! + 2 * y * rowBytes
                    let lower = 2 * y + 1 < height ? source.baseAddress! + (2 * y + 1) * rowBytes : nil
                    shrinkRows(
                        upper, lower.map { UnsafePointer($0) }, width: width, bands: bands,
                        into: target.baseAddress! + y * outRowBytes)
                }
            }
        }
        return (out, outWidth, outHeight)
    }
}
