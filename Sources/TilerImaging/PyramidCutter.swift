import CTilerShims
import CVips
import Foundation
import TilerCore
import TilerStorage

/// Cuts images into pyramids under one output root, each into a folder
/// (`ROOT/ID/LEVEL/ROW/COLUMN.EXT`, `ROOT/ID/thumbnail.EXT`, `ROOT/ID/pyramid.json`) or
/// an archive (`ROOT/ID.pmtiles`), through a ``PyramidSink``.
///
/// The sink stages the pyramid under a hidden name in ROOT and makes it appear under its
/// final name only when complete, with the manifest written last; a failed or
/// interrupted cut discards it (and a signal that the cut cannot notice in time removes
/// it through ``UnfinishedOutput``), so nothing that looks like a pyramid is left
/// behind. `force` swaps the new pyramid for the old one in one step.
public struct PyramidCutter: Sendable {
    /// Where pyramids go: a folder, or a bucket prefix (archives only).
    public let output: any PyramidOutput
    public let options: CutOptions

    /// Cuts into the folder `root`.
    public init(root: URL, options: CutOptions) {
        self.init(output: FolderOutput(root: root.path), options: options)
    }

    public init(output: any PyramidOutput, options: CutOptions) {
        self.output = output
        self.options = options
    }

    /// Cuts `input` into `ROOT/id` or `ROOT/id.pmtiles`.
    ///
    /// - Parameters:
    ///   - progress: called with the fraction of full-resolution rows done, 0...1.
    ///   - isCancelled: polled while cutting; when it turns true the cut stops with
    ///     ``CutError/interrupted`` and leaves nothing behind.
    public func cut(
        _ input: String, id: PyramidID,
        progress: (Double) -> Void = { _ in },
        isCancelled: @escaping () -> Bool = { false }
    ) throws(CutError) -> CutResult {
        let started = DispatchTime.now()
        let file = try InputFile.open(input)
        let destination = output.destination(of: id, layout: options.layout)
        if !options.force {
            // The id in either layout: an archive cut beside a folder of the same id
            // would never be served (the folder wins), and a folder cut beside an
            // archive would hide it.
            let existing: String?
            do throws(StorageError) {
                existing = try output.existing(id, layout: options.layout)
            } catch {
                throw .output(error.description)
            }
            if let existing { throw .exists(id: id, path: existing) }
        }

        // Open and describe; only the header is read.
        let (image, format, metadata) = try openPixels(file)
        let geometry = try options.geometry(width: image.width, height: image.height)

        let sink: any PyramidSink
        do {
            sink = try output.makeSink(id: id, layout: options.layout, geometry: geometry, format: format)
        } catch {
            throw .output(error.description)
        }
        var builderInUse: PyramidBuilder?
        var result: CutResult
        do {
            let encoder = TileEncoder(format: format, quality: options.quality, png: options.png)
            var tileEncoder = encoder
            if options.pad {
                tileEncoder.padding = TilePadding(tileSize: options.tileSize, colour: options.paddingColour(for: format))
            }
            let builder = PyramidBuilder(
                geometry: geometry, bands: image.bands, sink: sink, encoder: tileEncoder,
                thumbnailSize: options.thumbnailSize)
            builderInUse = builder
            try stream(image, into: builder, progress: progress, isCancelled: isCancelled)
            try builder.finish()
            if isCancelled() { throw CutError.interrupted }

            let thumbnail = try writeThumbnail(builder, encoder: encoder, into: sink)
            var manifest = PyramidManifest(
                id: id, geometry: geometry, format: format, thumbnail: thumbnail,
                quality: encoder.quality, bands: image.bands,
                created: ISO8601DateFormatter().string(from: Date()))
            manifest.source = PyramidManifest.Source(file: (input as NSString).lastPathComponent, bytes: file.size)
            manifest.tilerVersion = TilerVersion.current
            manifest.metadata = metadata
            if options.pad { manifest.setPadded(background: options.paddingColour(for: format).description) }
            if isCancelled() { throw CutError.interrupted }
            let bytes = try sink.commit(manifest: manifest.fileBytes(), replace: options.force)
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
            let url = destination.hasPrefix("s3://") ? URL(string: destination) : nil
            result = CutResult(
                id: id, output: url ?? URL(fileURLWithPath: destination), destination: destination, manifest: manifest,
                tiles: builder.tilesWritten, bytes: bytes, seconds: seconds)
        } catch {
            builderInUse?.drain()
            sink.discard()
            if isCancelled() { throw .interrupted }
            switch error {
            case let error as CutError: throw error
            case let .libvips(why) as ImagingError: throw .unreadablePixels(file.scrub(why))
            case StorageError.exists: throw .exists(id: id, path: destination)
            case let error as StorageError: throw .output(error.description)
            default: throw .output(String(describing: error))
            }
        }
        // Committed: the same id in the other layout goes (after the sink is done with,
        // so that a failure here cannot discard the new pyramid).
        if options.force {
            do throws(StorageError) {
                result.retiredFolder = try output.removeOtherLayout(of: id, keeping: options.layout)
            } catch {
                throw .output("\(destination) is in place, but the same id in the other layout is not removed: \(error)")
            }
        }
        return result
    }

    /// The input's pixels as tiles hold them, with only the header read, the format of
    /// its tiles (`auto` decided by its alpha channel) and its metadata: checked against `maxPixels`
    /// first, turned upright (EXIF orientation), colour-managed to sRGB and converted to
    /// 8 bits. Orientations 3-8 cannot stream top to bottom, so such an image is opened
    /// again with random access (libvips decodes it to memory, or to a temporary file in
    /// TMPDIR when large).
    private func openPixels(_ file: InputFile) throws(CutError) -> (VipsImageHandle, TileFormat, PhotoMetadata?) {
        var image: VipsImageHandle
        do {
            image = try VipsImageHandle.open(file, for: .cutting, allowVector: options.allowVector).image
        } catch {
            throw CutError(opening: error)
        }
        try options.checkPixels(width: image.width, height: image.height)
        let metadata = options.metadata(of: image)
        do {
            let orientation = options.orientation(stored: image.orientation)
            if orientation.needsRandomAccess {
                image = try VipsImageHandle.open(file, for: .cutting, randomAccess: true, allowVector: options.allowVector).image
            }
            if orientation.value != 1 { image = try image.autorotated() }
        } catch let error as ImageOpenError {
            throw .notAnImage("\(error)")
        } catch {
            throw .notAnImage(file.scrub("\(error)"))
        }
        let format = options.tileFormat(hasAlpha: image.hasAlpha)
        do {
            return (try image.tilePixels(options.tilePixelSettings(for: format)), format, metadata)
        } catch {
            throw .notAnImage(file.scrub(error.description))
        }
    }

    /// Pulls the image through libvips top to bottom into the builder.
    private func stream(
        _ image: VipsImageHandle, into builder: PyramidBuilder,
        progress: (Double) -> Void, isCancelled: @escaping () -> Bool
    ) throws {
        try withoutActuallyEscaping(progress) { progress in
            let sink = RowSink(builder: builder, height: image.height, progress: progress, isCancelled: isCancelled)
            let context = Unmanaged.passUnretained(sink).toOpaque()
            let status = tiler_vips_stream_rows(
                image.pointer,
                { first, stride, _, count, context in
                    let sink = Unmanaged<RowSink>.fromOpaque(context!).takeUnretainedValue()
                    return sink.take(first!, stride: stride, count: Int(count)) ? 0 : 1
                }, context)
            withExtendedLifetime(sink) {}
            if let failure = sink.failure { throw failure }
            if status != 0 {
                if isCancelled() { throw CutError.interrupted }
                throw ImagingError.libvips(Vips.takeError())
            }
        }
    }

    /// Encodes the thumbnail from the level the builder kept whole and hands it to the
    /// sink; returns the manifest's entry for it.
    private func writeThumbnail(
        _ builder: PyramidBuilder, encoder: TileEncoder,
        into sink: any PyramidSink
    ) throws -> PyramidManifest.Thumbnail {
        let source = builder.thumbnailSource
        let file = "thumbnail.\(encoder.format.fileExtension)"
        let bands = builder.bands
        let size = options.thumbnailSize
        let (pixels, width, height) = try VipsImageHandle.withBorrowed(
            pixels: source.pixels, width: source.width, height: source.height, bands: bands, for: .cutting
        ) { image throws(ImagingError) in
            let small = try image.thumbnail(size: size)
            return (try small.pixels(), small.width, small.height)
        }
        try pixels.withUnsafeBufferPointer { buffer in
            try encoder.withEncoded(
                pixels: buffer.baseAddress!, stride: width * bands, width: width, height: height,
                bands: bands
            ) { bytes in
                try sink.writeThumbnail(named: file, bytes)
            }
        }
        return PyramidManifest.Thumbnail(file: file, width: width, height: height)
    }
}

/// Receives rows from libvips' sink thread and feeds the builder, remembering the first
/// failure so that the stream can stop.
private final class RowSink {
    let builder: PyramidBuilder
    let height: Int
    let progress: (Double) -> Void
    let isCancelled: () -> Bool
    var failure: (any Error)?

    init(builder: PyramidBuilder, height: Int, progress: @escaping (Double) -> Void, isCancelled: @escaping () -> Bool) {
        self.builder = builder
        self.height = height
        self.progress = progress
        self.isCancelled = isCancelled
    }

    func take(_ first: UnsafePointer<UInt8>, stride: Int, count: Int) -> Bool {
        if isCancelled() {
            failure = CutError.interrupted
            return false
        }
        do {
            try builder.append(first, stride: stride, count: count)
        } catch {
            failure = error
            return false
        }
        progress(Double(builder.fullResolutionRows) / Double(height))
        return true
    }
}
