/// The 2×2 box filter that makes each pyramid level from the level above.
///
/// Every output pixel is the rounded mean of the input pixels its 2×2 block holds. On the
/// right and bottom edges of an odd-sized image the block is cut off, and the mean is
/// taken over the 1 or 2 pixels that exist, so a `W × H` level shrinks to exactly
/// `ceil(W/2) × ceil(H/2)` (as `PyramidGeometry` says) without inventing pixels.
/// Rounding is half up: `(sum + n/2) / n`, as libvips' `shrink` does for 8-bit images.
public enum AreaAverage {
    /// Shrinks one pair of rows, or a lone last row when `lower` is nil, of `width`
    /// pixels with `bands` 8-bit bands each, into one row of `(width + 1) / 2` pixels.
    @inline(__always)
    public static func shrinkRows(_ upper: UnsafePointer<UInt8>, _ lower: UnsafePointer<UInt8>?,
                                  width: Int, bands: Int, into out: UnsafeMutablePointer<UInt8>) {
        let pairs = width / 2
        let pairBytes = pairs * bands
        if let lower {
            // Whole 2×2 blocks: out[i] = (a + b + c + d + 2) / 4, band by band.
            var o = 0
            var i = 0
            while o < pairBytes {
                for band in 0..<bands {
                    let sum = UInt16(upper[i &+ band]) &+ UInt16(upper[i &+ bands &+ band])
                        &+ UInt16(lower[i &+ band]) &+ UInt16(lower[i &+ bands &+ band]) &+ 2
                    out[o &+ band] = UInt8(truncatingIfNeeded: sum &>> 2)
                }
                o &+= bands
                i &+= 2 &* bands
            }
            if width % 2 == 1 {
                // Last column of an odd width: a 1×2 block.
                for band in 0..<bands {
                    let sum = UInt16(upper[i &+ band]) &+ UInt16(lower[i &+ band]) &+ 1
                    out[o &+ band] = UInt8(truncatingIfNeeded: sum &>> 1)
                }
            }
        } else {
            // Last row of an odd height: 2×1 blocks, and a lone corner pixel.
            var o = 0
            var i = 0
            while o < pairBytes {
                for band in 0..<bands {
                    let sum = UInt16(upper[i &+ band]) &+ UInt16(upper[i &+ bands &+ band]) &+ 1
                    out[o &+ band] = UInt8(truncatingIfNeeded: sum &>> 1)
                }
                o &+= bands
                i &+= 2 &* bands
            }
            if width % 2 == 1 {
                for band in 0..<bands { out[o &+ band] = upper[i &+ band] }
            }
        }
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
                    shrinkRows(upper, lower.map { UnsafePointer($0) }, width: width, bands: bands,
                               into: target.baseAddress! + y * outRowBytes)
                }
            }
        }
        return (out, outWidth, outHeight)
    }
}
