import CTilerShims
import CVips
import Foundation
import TilerCore

/// How to cut: tile size and format, what the input may be, how its pixels are read,
/// and what to do with an existing pyramid.
public struct CutOptions: Sendable {
    /// The largest input `tiler cut` accepts by default, in pixels (width × height): a
    /// gigapixel scan or panorama fits (2 Gpx is 50000 × 40000), a header that claims
    /// 65500 × 65500 does not.
    public static let defaultMaxPixels = 2_000_000_000

    public var tileSize: Int
    public var format: TileFormat
    /// JPEG or WebP quality, 1-100; nil for the format's default.
    public var quality: Int?
    public var png: PNGSettings
    /// The longest side of the thumbnail (smaller images keep their size).
    public var thumbnailSize: Int
    /// Replace an existing pyramid of the same id.
    public var force: Bool
    /// Inputs with more pixels than this are refused before any pixel is decoded.
    public var maxPixels: Int
    /// Accept SVG, PDF and ImageMagick inputs (refused by default: their size and cost
    /// are whatever the file says).
    public var allowVector: Bool
    /// Apply the EXIF orientation.
    public var autorotate: Bool
    /// Convert an embedded ICC profile (RGB or CMYK input) to sRGB.
    public var convertProfile: Bool
    /// Write edge tiles at the full tile size.
    public var pad: Bool
    /// The padding colour, and with JPEG tiles the colour alpha is flattened on; nil for
    /// the default (transparent padding where the format has alpha, else white).
    public var background: BackgroundColour?

    public init(tileSize: Int = 256, format: TileFormat = .png, quality: Int? = nil,
                png: PNGSettings = .tiles, thumbnailSize: Int = 256, force: Bool = false,
                maxPixels: Int = CutOptions.defaultMaxPixels, allowVector: Bool = false,
                autorotate: Bool = true, convertProfile: Bool = true, pad: Bool = false,
                background: BackgroundColour? = nil) {
        self.tileSize = tileSize
        self.format = format
        self.quality = quality
        self.png = png
        self.thumbnailSize = thumbnailSize
        self.force = force
        self.maxPixels = maxPixels
        self.allowVector = allowVector
        self.autorotate = autorotate
        self.convertProfile = convertProfile
        self.pad = pad
        self.background = background
    }

    /// The padding colour `--pad` uses: `background`, else transparent where the tile
    /// format has alpha (PNG, WebP) and white for JPEG.
    public var paddingColour: BackgroundColour {
        background ?? (format == .jpeg ? .white : .transparent)
    }
}

/// What one successful cut produced.
public struct CutResult: Sendable {
    public let id: PyramidID
    /// The pyramid folder, `ROOT/ID`.
    public let folder: URL
    public let manifest: PyramidManifest
    /// Tile files written, without the thumbnail.
    public let tiles: Int
    /// Bytes of every file written: tiles, thumbnail and manifest.
    public let bytes: Int
    public let seconds: Double
}

/// Why one input could not be cut. `description` is the reason only; the caller names
/// the file.
public enum CutError: Error, Sendable, CustomStringConvertible {
    case missing
    case isDirectory
    /// A FIFO, device or socket: what it is.
    case notARegularFile(String)
    case tooManyPixels(width: Int, height: Int, limit: Int)
    /// A vector or scripted format, refused without `--allow-vector`: the loader.
    case vector(loader: String)
    case unreadable(String)
    case notAnImage(String)
    case unreadablePixels(String)
    case unsupportedSize(String)
    case exists(id: PyramidID, folder: String)
    case duplicate(id: PyramidID)
    case noUsableName
    case output(String)
    case interrupted

    public var description: String {
        switch self {
        case .missing: "no such file"
        case .isDirectory: "is a directory, not an image"
        case let .notARegularFile(what): "is \(what), not a regular file; tiler cuts image files only"
        case let .tooManyPixels(width, height, limit):
            "is \(width)×\(height) = \(width * height) pixels, more than --max-pixels \(limit) (a decompression bomb, or a real image that needs a larger --max-pixels)"
        case let .vector(loader) where loader.hasPrefix("magickload"):
            "can only be read by ImageMagick (\(loader)), which also renders vector and scripted formats; refused unless --allow-vector"
        case let .vector(loader):
            "is a vector image (\(loader)); vector inputs are refused unless --allow-vector, because their size and rendering cost are whatever the file says"
        case let .unreadable(why): "cannot be read (\(why))"
        case let .notAnImage(why): "not a supported image (\(why))"
        case let .unreadablePixels(why): "corrupt or truncated image (\(why))"
        case let .unsupportedSize(why): why
        case let .exists(id, folder): "a pyramid named '\(id)' already exists at \(folder); use --force to replace it or --name to choose another id"
        case let .duplicate(id): "another input of this run already uses the id '\(id)'; cut it separately with --name"
        case .noUsableName: "cannot derive a pyramid id from the file name; use --name"
        case let .output(why): "cannot write the pyramid: \(why)"
        case .interrupted: "interrupted; nothing was kept"
        }
    }
}

/// Cuts images into pyramids under one output root:
/// `ROOT/ID/LEVEL/ROW/COLUMN.EXT`, `ROOT/ID/thumbnail.EXT` and `ROOT/ID/pyramid.json`.
///
/// Each cut is written into a hidden folder `ROOT/.ID.partial-PID-XXXXXX` and renamed to
/// `ROOT/ID` only when complete, with `pyramid.json` written last; a failed or
/// interrupted cut removes its hidden folder, so nothing that looks like a pyramid is
/// left behind. `force` swaps the new pyramid for the old one in one rename
/// (`RENAME_EXCHANGE` on Linux) and then deletes the old one.
public struct PyramidCutter: Sendable {
    public let root: URL
    public let options: CutOptions

    public init(root: URL, options: CutOptions) {
        self.root = root
        self.options = options
    }

    /// Cuts `input` into `ROOT/id`.
    ///
    /// - Parameters:
    ///   - progress: called with the fraction of full-resolution rows done, 0...1.
    ///   - isCancelled: polled while cutting; when it turns true the cut stops with
    ///     ``CutError/interrupted`` and leaves nothing behind.
    public func cut(_ input: String, id: PyramidID,
                    progress: (Double) -> Void = { _ in },
                    isCancelled: @escaping () -> Bool = { false }) throws(CutError) -> CutResult {
        let started = DispatchTime.now()
        let file = try InputFile.open(input)
        let destination = root.appendingPathComponent(id.rawValue, isDirectory: true)
        if !options.force, FileManager.default.fileExists(atPath: destination.path) {
            throw .exists(id: id, folder: destination.path)
        }

        // Open and describe; only the header is read.
        let image = try openPixels(file)
        let geometry: PyramidGeometry
        do {
            geometry = try PyramidGeometry(width: image.width, height: image.height, tileSize: options.tileSize)
        } catch {
            throw .unsupportedSize(error.description)
        }

        do {
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        } catch {
            throw .output("\(root.path): \(Self.reason(error))")
        }
        removeAbandonedPartials(of: id)
        let (partial, partialLock, registration) = try makePartialFolder(for: id)
        defer {
            UnfinishedOutput.shared.unregister(registration)
            close(partialLock)
        }

        var builderInUse: PyramidBuilder?
        do {
            let encoder = TileEncoder(format: options.format, quality: options.quality, png: options.png)
            var tileEncoder = encoder
            if options.pad { tileEncoder.padding = TilePadding(tileSize: options.tileSize, colour: options.paddingColour) }
            let builder = PyramidBuilder(geometry: geometry, bands: image.bands, folder: partial, encoder: tileEncoder,
                                         thumbnailSize: options.thumbnailSize)
            builderInUse = builder
            try stream(image, into: builder, progress: progress, isCancelled: isCancelled)
            try builder.finish()
            if isCancelled() { throw CutError.interrupted }

            let thumbnail = try writeThumbnail(builder, encoder: encoder, folder: partial)
            var manifest = PyramidManifest(id: id, geometry: geometry, format: options.format, thumbnail: thumbnail.entry,
                                           quality: encoder.quality, bands: image.bands,
                                           created: ISO8601DateFormatter().string(from: Date()))
            manifest.source = PyramidManifest.Source(file: (input as NSString).lastPathComponent, bytes: file.size)
            manifest.tilerVersion = TilerVersion.current
            if options.pad { manifest.setPadded(background: options.paddingColour.description) }
            let manifestBytes = try writeManifest(manifest, folder: partial)
            if isCancelled() { throw CutError.interrupted }
            try install(partial, at: destination)
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
            return CutResult(id: id, folder: destination, manifest: manifest, tiles: builder.tilesWritten,
                             bytes: builder.bytesWritten + thumbnail.bytes + manifestBytes, seconds: seconds)
        } catch {
            builderInUse?.drain()
            try? FileManager.default.removeItem(at: partial)
            if isCancelled() { throw .interrupted }
            switch error {
            case let error as CutError: throw error
            case let .libvips(why) as ImagingError: throw .unreadablePixels(file.scrub(why))
            default: throw .output(Self.reason(error))
            }
        }
    }

    /// The input's pixels as tiles hold them, with only the header read: checked against
    /// `maxPixels` first, turned upright (EXIF orientation), colour-managed to sRGB and
    /// converted to 8 bits. Orientations 3-8 cannot stream top to bottom, so such an
    /// image is opened again with random access (libvips decodes it to memory, or to a
    /// temporary file in TMPDIR when large).
    private func openPixels(_ file: InputFile) throws(CutError) -> VipsImageHandle {
        var image: VipsImageHandle
        do {
            image = try VipsImageHandle.open(file, allowVector: options.allowVector).image
        } catch {
            switch error {
            case .unknownFormat: throw .notAnImage("no libvips loader recognises its content")
            case let .vector(loader): throw .vector(loader: loader)
            case let .libvips(why): throw .notAnImage(why)
            }
        }
        let (pixels, overflow) = image.width.multipliedReportingOverflow(by: image.height)
        if overflow || pixels > options.maxPixels {
            throw .tooManyPixels(width: image.width, height: image.height, limit: options.maxPixels)
        }
        do {
            let orientation = options.autorotate ? image.orientation : 1
            if orientation >= 3, orientation <= 8 {
                image = try VipsImageHandle.open(file, randomAccess: true, allowVector: options.allowVector).image
            }
            if orientation != 1 { image = try image.autorotated() }
        } catch let error as ImageOpenError {
            throw .notAnImage("\(error)")
        } catch {
            throw .notAnImage(file.scrub("\(error)"))
        }
        let background = options.background ?? .white
        let settings = tiler_tile_pixels(
            convert_profile: options.convertProfile ? 1 : 0,
            flatten_alpha: options.format == .jpeg ? 1 : 0,
            add_alpha: options.pad && !options.paddingColour.isOpaque ? 1 : 0,
            background: (Double(background.red), Double(background.green), Double(background.blue)))
        do {
            return try image.tilePixels(settings)
        } catch {
            throw .notAnImage(file.scrub(error.description))
        }
    }

    /// Makes and locks the hidden folder a cut writes into, registered with
    /// ``UnfinishedOutput`` so that a signal can remove it whatever the cut is doing.
    ///
    /// The folder is made (mkdtemp: a unique name, even for cuts with the same PID in
    /// different containers sharing ROOT) and locked under a name the clean-up of
    /// abandoned partials never matches, then renamed: a partial folder is locked from the
    /// moment another cut can see it, so no other cut can take it for abandoned. mkdtemp
    /// makes it 0700; it gets the mode the umask gives any new folder (0755 under 022), so
    /// that a server running as another user can read the pyramid.
    private func makePartialFolder(for id: PyramidID) throws(CutError) -> (URL, Int32, Int) {
        let result: Result<(URL, Int32, Int), CutError> = UnfinishedOutput.shared.withLock { register in
            var template = Array(root.appendingPathComponent(".\(id.rawValue).staging-XXXXXX").path.utf8CString)
            guard mkdtemp(&template) != nil else {
                return .failure(.output("\(root.path): cannot create a working folder: \(String(cString: strerror(errno)))"))
            }
            let staging = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            chmod(staging, 0o777 & ~FileCreationMask.current)
            let lock = Self.lockFolder(staging)
            let partial = root.appendingPathComponent(".\(id.rawValue).partial-\(getpid())-\(staging.suffix(6))", isDirectory: true)
            guard lock >= 0, rename(staging, partial.path) == 0 else {
                let reason = String(cString: strerror(errno))
                if lock >= 0 { close(lock) }
                rmdir(staging)
                return .failure(.output("\(partial.path): \(reason)"))
            }
            return .success((partial, lock, register(partial.path)))
        }
        return try result.get()
    }

    /// Opens `path` (a folder) and takes an exclusive `flock` on it, held until the
    /// descriptor is closed or the process dies; -1 if that fails (then the folder is
    /// simply unlocked, and a later cut may take it for abandoned only once it is).
    private static func lockFolder(_ path: String) -> Int32 {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return -1 }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            return -1
        }
        return fd
    }

    /// Removes `ROOT/.ID.partial-*` folders left by cuts that were killed outright
    /// (SIGKILL, OOM killer, power loss), which could not clean up after themselves. A
    /// running cut holds an `flock` on its partial folder, which the kernel drops when the
    /// process dies, so a folder whose lock can be taken is abandoned; one that is locked
    /// belongs to a live cut (in this or another PID namespace) and is left alone.
    private func removeAbandonedPartials(of id: PyramidID) {
        let prefix = ".\(id.rawValue).partial-"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: root.path) else { return }
        for name in names where name.hasPrefix(prefix) {
            let folder = root.appendingPathComponent(name, isDirectory: true)
            let fd = open(folder.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { continue }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { try? FileManager.default.removeItem(at: folder) }
            close(fd)
        }
    }

    /// Pulls the image through libvips top to bottom into the builder.
    private func stream(_ image: VipsImageHandle, into builder: PyramidBuilder,
                        progress: (Double) -> Void, isCancelled: @escaping () -> Bool) throws {
        try withoutActuallyEscaping(progress) { progress in
            let sink = RowSink(builder: builder, height: image.height, progress: progress, isCancelled: isCancelled)
            let context = Unmanaged.passUnretained(sink).toOpaque()
            let status = tiler_vips_stream_rows(image.pointer, { first, stride, _, count, context in
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

    private func writeThumbnail(_ builder: PyramidBuilder, encoder: TileEncoder,
                                folder: URL) throws -> (entry: PyramidManifest.Thumbnail, bytes: Int) {
        let source = builder.thumbnailSource
        let file = "thumbnail.\(options.format.fileExtension)"
        let path = folder.appendingPathComponent(file).path
        let bands = builder.bands
        let size = options.thumbnailSize
        let (pixels, width, height) = try VipsImageHandle.withBorrowed(
            pixels: source.pixels, width: source.width, height: source.height, bands: bands
        ) { image throws(ImagingError) in
            let small = try image.thumbnail(size: size)
            return (try small.pixels(), small.width, small.height)
        }
        let bytes = try pixels.withUnsafeBufferPointer { buffer in
            try encoder.withEncoded(pixels: buffer.baseAddress!, stride: width * bands, width: width, height: height,
                                    bands: bands) { bytes in
                try writeFile(path, bytes)
                return bytes.count
            }
        }
        return (PyramidManifest.Thumbnail(file: file, width: width, height: height), bytes)
    }

    /// Writes `pyramid.json` (sorted keys, pretty) to a temporary name and renames it.
    private func writeManifest(_ manifest: PyramidManifest, folder: URL) throws -> Int {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        var data = try encoder.encode(manifest)
        data.append(0x0A)
        let temporary = folder.appendingPathComponent(".\(PyramidManifest.fileName).tmp").path
        try data.withUnsafeBytes { try writeFile(temporary, $0) }
        let final = folder.appendingPathComponent(PyramidManifest.fileName).path
        guard rename(temporary, final) == 0 else {
            throw FileWriteError(path: final, reason: String(cString: strerror(errno)))
        }
        return data.count
    }

    /// Moves the finished folder into place, swapping out an existing pyramid if forced.
    /// The renames run under ``UnfinishedOutput``'s lock: a signal either finds the
    /// partial folder (and removes it) or a pyramid installed whole.
    private func install(_ partial: URL, at destination: URL) throws {
        let leftover: String? = try UnfinishedOutput.shared.withLock { register in
            if rename(partial.path, destination.path) == 0 { return nil }
            let renameError = errno
            guard options.force, renameError == EEXIST || renameError == ENOTEMPTY || renameError == EISDIR || renameError == ENOTDIR else {
                if renameError == EEXIST || renameError == ENOTEMPTY {
                    throw CutError.exists(id: PyramidID(destination.lastPathComponent)!, folder: destination.path)
                }
                throw FileWriteError(path: destination.path, reason: String(cString: strerror(renameError)))
            }
            if tiler_exchange_paths(partial.path, destination.path) == 0 {
                // `partial` now holds the old pyramid (still registered: removed on a signal).
                return partial.path
            }
            // No atomic exchange here: move the old one aside, the new one in, delete the old.
            let aside = root.appendingPathComponent(".\(destination.lastPathComponent).partial-\(getpid())-old")
            guard rename(destination.path, aside.path) == 0 else {
                throw FileWriteError(path: destination.path, reason: String(cString: strerror(errno)))
            }
            guard rename(partial.path, destination.path) == 0 else {
                let why = String(cString: strerror(errno))
                _ = rename(aside.path, destination.path)
                throw FileWriteError(path: destination.path, reason: why)
            }
            _ = register(aside.path)
            return aside.path
        }
        if let leftover { try FileManager.default.removeItem(atPath: leftover) }
    }

    private static func reason(_ error: any Error) -> String {
        if let error = error as? CocoaError, let underlying = error.underlying as? POSIXError {
            return String(cString: strerror(underlying.code.rawValue))
        }
        return String(describing: error)
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
