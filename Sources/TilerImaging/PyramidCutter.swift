import CTilerShims
import CVips
import Foundation
import TilerCore

/// How to cut: tile size and format, and what to do with an existing pyramid.
public struct CutOptions: Sendable {
    public var tileSize: Int
    public var format: TileFormat
    /// JPEG or WebP quality, 1-100; nil for the format's default.
    public var quality: Int?
    public var png: PNGSettings
    /// The longest side of the thumbnail (smaller images keep their size).
    public var thumbnailSize: Int
    /// Replace an existing pyramid of the same id.
    public var force: Bool

    public init(tileSize: Int = 256, format: TileFormat = .png, quality: Int? = nil,
                png: PNGSettings = .tiles, thumbnailSize: Int = 256, force: Bool = false) {
        self.tileSize = tileSize
        self.format = format
        self.quality = quality
        self.png = png
        self.thumbnailSize = thumbnailSize
        self.force = force
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
        try checkReadable(input)
        let destination = root.appendingPathComponent(id.rawValue, isDirectory: true)
        if !options.force, FileManager.default.fileExists(atPath: destination.path) {
            throw .exists(id: id, folder: destination.path)
        }

        // Open and describe; only the header is read.
        let image: VipsImageHandle
        do {
            image = try VipsImageHandle.openSequential(path: input).tilePixels(flattenAlpha: options.format == .jpeg)
        } catch {
            throw .notAnImage(error.description)
        }
        let geometry: PyramidGeometry
        do {
            geometry = try PyramidGeometry(width: image.width, height: image.height, tileSize: options.tileSize)
        } catch {
            throw .unsupportedSize(error.description)
        }

        let partial: URL
        let partialLock: Int32
        do {
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        } catch {
            throw .output("\(root.path): \(Self.reason(error))")
        }
        removeAbandonedPartials(of: id)
        // The folder is made (mkdtemp: a unique name, even for cuts with the same PID in
        // different containers sharing ROOT) and locked under a name the clean-up above
        // never matches, then renamed: a partial folder is locked from the moment another
        // cut can see it, so no other cut can take it for abandoned.
        var template = Array(root.appendingPathComponent(".\(id.rawValue).staging-XXXXXX").path.utf8CString)
        guard mkdtemp(&template) != nil else {
            throw .output("\(root.path): cannot create a working folder: \(String(cString: strerror(errno)))")
        }
        let staging = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        partialLock = Self.lockFolder(staging)
        partial = root.appendingPathComponent(".\(id.rawValue).partial-\(getpid())-\(staging.suffix(6))", isDirectory: true)
        guard partialLock >= 0, rename(staging, partial.path) == 0 else {
            let reason = String(cString: strerror(errno))
            if partialLock >= 0 { close(partialLock) }
            rmdir(staging)
            throw .output("\(partial.path): \(reason)")
        }
        defer { close(partialLock) }

        var builderInUse: PyramidBuilder?
        do {
            let encoder = TileEncoder(format: options.format, quality: options.quality, png: options.png)
            let builder = PyramidBuilder(geometry: geometry, bands: image.bands, folder: partial, encoder: encoder,
                                         thumbnailSize: options.thumbnailSize)
            builderInUse = builder
            try stream(image, into: builder, progress: progress, isCancelled: isCancelled)
            try builder.finish()
            if isCancelled() { throw CutError.interrupted }

            let thumbnail = try writeThumbnail(builder, encoder: encoder, folder: partial)
            let manifest = PyramidManifest(id: id, geometry: geometry, format: options.format, thumbnail: thumbnail.entry,
                                           quality: encoder.quality, bands: image.bands,
                                           created: ISO8601DateFormatter().string(from: Date()))
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
            case let .libvips(why) as ImagingError: throw .unreadablePixels(why)
            default: throw .output(Self.reason(error))
            }
        }
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

    /// A missing file, a directory or a file without read permission, caught before
    /// libvips gives a vaguer message.
    private func checkReadable(_ input: String) throws(CutError) {
        var info = stat()
        guard stat(input, &info) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { throw .missing }
            throw .unreadable(String(cString: strerror(errno)))
        }
        if (info.st_mode & S_IFMT) == S_IFDIR { throw .isDirectory }
        guard access(input, R_OK) == 0 else { throw .unreadable(String(cString: strerror(errno))) }
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
    private func install(_ partial: URL, at destination: URL) throws {
        if rename(partial.path, destination.path) == 0 { return }
        let renameError = errno
        guard options.force, renameError == EEXIST || renameError == ENOTEMPTY || renameError == EISDIR || renameError == ENOTDIR else {
            if renameError == EEXIST || renameError == ENOTEMPTY {
                throw CutError.exists(id: PyramidID(destination.lastPathComponent)!, folder: destination.path)
            }
            throw FileWriteError(path: destination.path, reason: String(cString: strerror(renameError)))
        }
        if tiler_exchange_paths(partial.path, destination.path) == 0 {
            // `partial` now holds the old pyramid.
            try FileManager.default.removeItem(at: partial)
            return
        }
        // No atomic exchange here: move the old one aside, the new one in, delete the old.
        let aside = root.appendingPathComponent(".\(destination.lastPathComponent).old-\(getpid())")
        guard rename(destination.path, aside.path) == 0 else {
            throw FileWriteError(path: destination.path, reason: String(cString: strerror(errno)))
        }
        guard rename(partial.path, destination.path) == 0 else {
            let why = String(cString: strerror(errno))
            _ = rename(aside.path, destination.path)
            throw FileWriteError(path: destination.path, reason: why)
        }
        try FileManager.default.removeItem(at: aside)
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
