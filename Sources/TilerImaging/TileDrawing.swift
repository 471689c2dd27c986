import CTilerShims
import Foundation
import TilerCore

/// Draws a job from a pyramid's tiles without libvips: the cost of a drawing is its
/// pixels. Each covering tile of the job's level is decoded once, by libjpeg (scaled by its
/// DCT, 1/2, 1/4, 1/8, where the output is that much smaller), libpng or libwebp, into one
/// buffer, or taken decoded from the tiles drawings keep (`DecodedTiles`); the region
/// is resampled once with Lanczos' three-lobed kernel stretched to the scale (as libvips'
/// `resize` reduces); turned by quarter turns and mirrored, greyed or made bitonal; and encoded with
/// libjpeg, libdeflate or libwebp directly. The libvips path (`RegionRenderer`) stays for
/// what this does not draw: tiles with transparency (or 16-bit PNG), padded JPEG
/// pyramids, colour from grey, enlargements and turns by other angles.
///
/// Quality: the resampling is never nearest-neighbour; `TileDrawingTests` compare its
/// pixels with libvips' `resize` of the same region from the full-resolution source.
struct TileDrawing {
    let job: RegionRenderer.Job
    let geometry: PyramidGeometry
    let format: TileFormat
    let bands: Int
    /// libjpeg's DCT scaling: tiles are decoded at 1/`denominator` of their size.
    let denominator: Int

    /// The drawing of `job` from tiles in `format`, or nil when this path does not draw it.
    init?(job: RegionRenderer.Job, format: TileFormat, bands: Int?, padded: Bool, geometry: PyramidGeometry) {
        // Padded edge tiles (`cut --pad`) hold the padding in the JPEG blocks that also
        // hold the image's last pixels, and DCT scaling mixes it into them: libvips' path
        // draws those pyramids (TileDrawingTests.paddedPyramidsDrawTheirPixelsOnly).
        // (A PNG or WebP tile's padding is pixels of its own, left out like any outside
        // the level.)
        guard format != .jpeg || !padded, job.rotation.isRightAngle,
            job.width <= job.rect.width, job.height <= job.rect.height
        else { return nil }
        // Bands as the manifest says; a tile that decodes otherwise (transparency) is
        // drawn by libvips.
        let bands = bands ?? 3
        guard bands == 3 || (bands == 1 && format != .webp) else { return nil }
        // Colour from a grey pyramid is libvips' to make.
        if bands == 1, job.quality == .color { return nil }
        self.job = job
        self.geometry = geometry
        self.format = format
        self.bands = bands
        // The most the tiles can be scaled down by and still have twice the output's
        // pixels: the resampling after the DCT's scaling then reduces by two or more, which
        // keeps fine detail from folding into coarser (a DCT scaled to the output's size
        // alone averages 8 × 8 blocks, a filter with little to stop it).
        var denominator = format == .jpeg ? 8 : 1
        while denominator > 1
            && (job.rect.width / denominator < 2 * job.width || job.rect.height / denominator < 2 * job.height
                || geometry.tileSize % denominator != 0)
        {
            denominator /= 2
        }
        self.denominator = denominator
    }

    /// Draws the job from the tiles `columns` × `rows` of its level, each read by `readTile`
    /// and decoded, or taken decoded from `kept` (where the tiles it decodes are kept). Nil
    /// when a tile is not one this path draws (transparency): libvips draws the job.
    func draw(
        columns: ClosedRange<Int>, rows: ClosedRange<Int>, encoderQuality: Int,
        readTile: RegionRenderer.TileReader, kept: DecodedTiles? = nil
    ) throws(RenderError) -> [UInt8]? {
        let d = denominator
        // Each tile gets a slot of T/d × T/d, holding its pixels of the level (an edge
        // tile's fewer: `rectInLevel`). The content ends where the level does: that is the
        // edge the resampling extends.
        func scaled(_ n: Int) -> Int { (n + d - 1) / d }
        func pixels(column: Int, row: Int) -> PixelRect {
            geometry.rectInLevel(TileCoordinate(level: job.level, row: row, column: column))
        }
        let slot = geometry.tileSize / d
        let last = pixels(column: columns.upperBound, row: rows.upperBound)
        let contentWidth = (columns.count - 1) * slot + scaled(last.width)
        let contentHeight = (rows.count - 1) * slot + scaled(last.height)
        let stride = columns.count * slot * bands
        // Not zeroed: the resampling reads the content only, and every pixel of it is
        // written by a tile's decoding (each is checked to be at least its expected size).
        let mosaicBytes = stride * rows.count * slot
        var mosaic = [UInt8](unsafeUninitializedCapacity: mosaicBytes) { _, count in count = mosaicBytes }
        var message = [CChar](repeating: 0, count: 256)
        var drawable = true

        try mosaic.withUnsafeMutableBufferPointer { (m: inout UnsafeMutableBufferPointer<UInt8>) throws(RenderError) in
            tiles: for row in rows {
                for column in columns {
                    let tile = TileCoordinate(level: job.level, row: row, column: column)
                    let x = (column - columns.lowerBound) * slot, y = (row - rows.lowerBound) * slot
                    let expected = pixels(column: column, row: row)
                    let (tileWidth, tileHeight) = (scaled(expected.width), scaled(expected.height))
                    let at = m.baseAddress! + y * stride + x * bands
                    let rowBytes = tileWidth * bands
                    if let hit = kept?.pixels(of: tile, denominator: d), hit.width == tileWidth, hit.height == tileHeight {
                        hit.bytes.withUnsafeBufferPointer { p in
                            Self.copyRows(tileHeight, of: rowBytes, from: p.baseAddress!, rowBytes, to: at, stride)
                        }
                        continue
                    }
                    let bytes = try readTile(tile)
                    var width: Int32 = 0, height: Int32 = 0
                    let status = bytes.withUnsafeBytes { b in
                        let data = b.bindMemory(to: UInt8.self).baseAddress
                        let (s, n) = (Int32(slot), message.count)
                        switch format {
                        case .jpeg:
                            return tiler_draw_decode_jpeg(
                                data, b.count, Int32(d), Int32(bands), at, stride, s, s, &width, &height, &message, n)
                        case .png:
                            return tiler_draw_decode_png(data, b.count, Int32(bands), at, stride, s, s, &width, &height, &message, n)
                        case .webp:
                            return tiler_draw_decode_webp(data, b.count, Int32(bands), at, stride, s, s, &width, &height, &message, n)
                        }
                    }
                    if status == -2 {
                        drawable = false
                        break tiles
                    }
                    guard status == 0 else { throw .badTile("tile \(tile): \(Self.text(message))") }
                    guard Int(width) >= tileWidth, Int(height) >= tileHeight else {
                        throw .badTile("tile \(tile) is \(width)×\(height) at 1/\(d), less than \(tileWidth)×\(tileHeight)")
                    }
                    if let kept {
                        let copy = [UInt8](unsafeUninitializedCapacity: rowBytes * tileHeight) { b, count in
                            Self.copyRows(tileHeight, of: rowBytes, from: at, stride, to: b.baseAddress!, rowBytes)
                            count = rowBytes * tileHeight
                        }
                        kept.keep(TilePixels(bytes: copy, width: tileWidth, height: tileHeight), of: tile, denominator: d)
                    }
                }
            }
        }

        guard drawable else { return nil }

        // The region in the mosaic's pixels.
        let r = job.rect
        let first = pixels(column: columns.lowerBound, row: rows.lowerBound)
        let x = Double(r.x - first.x) / Double(d), y = Double(r.y - first.y) / Double(d)
        let regionWidth = Double(r.width) / Double(d), regionHeight = Double(r.height) / Double(d)
        var resampled = [UInt8](repeating: 0, count: job.width * job.height * bands)
        let status = mosaic.withUnsafeBufferPointer { m in
            resampled.withUnsafeMutableBufferPointer { o in
                tiler_draw_resample(
                    m.baseAddress, stride, Int32(contentWidth), Int32(contentHeight), Int32(bands), x, y, regionWidth,
                    regionHeight, o.baseAddress, job.width * bands, Int32(job.width), Int32(job.height))
            }
        }
        guard status == 0 else { throw .badJob("cannot resample \(r) to \(job.width)×\(job.height)") }
        mosaic = []

        var pixels = resampled
        var width = job.width, height = job.height, outBands = bands
        // Quality before the turn: fewer bands to turn.
        if job.quality == .gray || job.quality == .bitonal {
            let threshold: Int32 = job.quality == .bitonal ? 128 : -1
            if bands == 3 {
                var grey = [UInt8](repeating: 0, count: width * height)
                pixels.withUnsafeBufferPointer { p in
                    grey.withUnsafeMutableBufferPointer { g in
                        tiler_draw_grey(p.baseAddress, width * 3, Int32(width), Int32(height), g.baseAddress, width, threshold)
                    }
                }
                pixels = grey
            } else if threshold >= 0 {
                for i in pixels.indices { pixels[i] = pixels[i] >= UInt8(threshold) ? 255 : 0 }
            }
            outBands = 1
        }
        let turns = Int(job.rotation.degrees / 90) % 4
        if turns != 0 || job.rotation.mirror {
            var turned = [UInt8](repeating: 0, count: pixels.count)
            let (w, h) = turns % 2 == 1 ? (height, width) : (width, height)
            pixels.withUnsafeBufferPointer { p in
                turned.withUnsafeMutableBufferPointer { t in
                    tiler_draw_turn(
                        p.baseAddress, width * outBands, Int32(width), Int32(height), Int32(outBands), Int32(turns),
                        job.rotation.mirror ? 1 : 0, t.baseAddress, w * outBands)
                }
            }
            pixels = turned
            width = w
            height = h
        }
        return try Self.encode(pixels, width: width, height: height, bands: outBands, as: job.format, quality: encoderQuality)
    }

    /// Encodes rows of 8-bit pixels as `format`, the way libvips' savers would (same
    /// libraries and settings for JPEG and WebP; PNG through libdeflate).
    static func encode(
        _ pixels: [UInt8], width: Int, height: Int, bands: Int, as format: IIIFFormat, quality: Int
    ) throws(RenderError) -> [UInt8] {
        var buffer: UnsafeMutablePointer<UInt8>?
        var length = 0
        var message = [CChar](repeating: 0, count: 256)
        let stride = width * bands
        let status: Int32
        switch format {
        case .jpg:
            status = pixels.withUnsafeBufferPointer {
                tiler_jpeg_encode(
                    $0.baseAddress, stride, Int32(width), Int32(height), Int32(bands), Int32(quality), &buffer, &length,
                    &message, message.count)
            }
        case .webp:
            status = pixels.withUnsafeBufferPointer {
                tiler_webp_encode(
                    $0.baseAddress, stride, Int32(width), Int32(height), Int32(bands), Int32(quality), &buffer, &length,
                    &message, message.count)
            }
        case .png:
            do {
                return try pixels.withUnsafeBufferPointer { p in
                    try PNGEncoder(settings: Self.png).withEncoded(
                        pixels: p.baseAddress!, stride: stride, width: width, height: height, bands: bands
                    ) { Array($0) }
                }
            } catch {
                throw .libvips("encoding png: \(error)")
            }
        }
        guard status == 0, let buffer else { throw .libvips("encoding \(format.rawValue): \(Self.text(message))") }
        defer { free(buffer) }
        return Array(UnsafeBufferPointer(start: buffer, count: length))
    }

    /// Copies `rows` rows of `length` bytes between buffers whose rows are `fromStride` and
    /// `toStride` bytes apart (a kept tile and its place in the mosaic).
    static func copyRows(
        _ rows: Int, of length: Int, from source: UnsafePointer<UInt8>, _ fromStride: Int,
        to target: UnsafeMutablePointer<UInt8>, _ toStride: Int
    ) {
        for r in 0..<rows { (target + r * toStride).update(from: source + r * fromStride, count: length) }
    }

    /// A C message buffer's text, up to its NUL.
    static func text(_ message: [CChar]) -> String {
        String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Drawn PNGs: zlib level 6 (libvips' pngsave default) after the Up filter.
    static let png = PNGSettings(zlibLevel: 6, filter: .up, strategy: .default, library: .libdeflate)
}
