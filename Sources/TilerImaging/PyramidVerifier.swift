import CTilerShims
import Foundation
import TilerCore
import TilerStorage
import TilerSystem

/// `tiler verify`: checks that a stored pyramid (folder or archive) has every tile the
/// geometry says, and that each tile and the thumbnail is what the server would serve
/// and a client could draw.
///
/// For each tile of every level:
/// - it exists: in a folder, `LEVEL/ROW/COLUMN.EXT` is a regular file reached without
///   following a link (the server follows none) and no larger than the server serves
///   (twice the decoded tile plus 64 KiB); in an archive, its directories address it;
/// - it looks like a whole file of the pyramid's format (the server's own check: else it
///   answers 500);
/// - libvips decodes it whole, with the loader of that format, failing on any decoder
///   warning, at its expected size: the tile's rectangle in its level (clipped at the
///   image's edge), or the full tile size for a padded pyramid (`tiler cut --pad`).
///   The size in the header is compared before any pixel is decoded, so each check
///   costs at most one tile's decoding whatever the file claims.
///
/// The thumbnail is checked the same way at the manifest's thumbnail size. An archive
/// must also be readable at all (header, directories, metadata and manifest are checked
/// when it opens), address no tile outside the geometry, and list its tiles in order.
/// Tiles are checked on every core (in batches of rows, or of archive entries, reported
/// in order); memory holds one batch of tiles.
public struct PyramidVerifier: Sendable {
    /// One thing wrong, as one line: the tile (`LEVEL/ROW/COLUMN`, or nil for the
    /// pyramid as a whole, or `thumbnail`), the file, and why.
    public struct Problem: Sendable, Codable, Equatable, CustomStringConvertible {
        public var tile: String?
        public var path: String
        public var reason: String

        public init(tile: String?, path: String, reason: String) {
            self.tile = tile
            self.path = path
            self.reason = reason
        }

        public var description: String { tile.map { "\(path): tile \($0): \(reason)" } ?? "\(path): \(reason)" }
    }

    /// What a run checked.
    public struct Outcome: Sendable, Codable, Equatable {
        /// Tiles checked (present or not).
        public var tiles: Int
        public var problems: Int
        /// True when interrupted before the end.
        public var interrupted: Bool
    }

    public let pyramid: StoredPyramid
    /// The cores the checks are spread over (batch sizes follow it).
    private let threads = max(1, ProcessInfo.processInfo.activeProcessorCount)

    public init(pyramid: StoredPyramid) {
        self.pyramid = pyramid
    }

    /// The tile size a tile must decode at.
    public func expectedSize(of tile: TileCoordinate) -> (width: Int, height: Int) {
        if pyramid.manifest.isPadded { return (pyramid.geometry.tileSize, pyramid.geometry.tileSize) }
        let rect = pyramid.geometry.rectInLevel(tile)
        return (rect.width, rect.height)
    }

    /// The largest tile file accepted: what the server serves and pack packs
    /// (`PyramidManifest.maximumTileBytes`).
    public var maximumTileBytes: Int { pyramid.manifest.maximumTileBytes }

    /// Checks everything, calling `report` with each problem in tile order (level, row,
    /// column for a folder; tile-id order for an archive), from the calling thread.
    public func run(
        isCancelled: @escaping @Sendable () -> Bool = { false },
        report: (Problem) -> Void
    ) -> Outcome {
        do { try Vips.start(for: .verifying) } catch {
            report(Problem(tile: nil, path: pyramid.path, reason: error.description))
            return Outcome(tiles: 0, problems: 1, interrupted: false)
        }
        var problems = 0
        let counting: (Problem) -> Void = {
            problems += 1; report($0)
        }
        let (tiles, interrupted) =
            pyramid.archive == nil
            ? verifyFolder(isCancelled: isCancelled, report: counting)
            : verifyArchive(isCancelled: isCancelled, report: counting)
        if !interrupted { verifyThumbnail(report: counting) }
        return Outcome(tiles: tiles, problems: problems, interrupted: interrupted)
    }

    // MARK: Folders

    private func verifyFolder(isCancelled: @Sendable () -> Bool, report: (Problem) -> Void) -> (Int, Bool) {
        let folder: FileDescriptor
        do {
            folder = try FileDescriptor.open(pyramid.path, O_RDONLY | O_DIRECTORY)
        } catch {
            report(Problem(tile: nil, path: pyramid.path, reason: "cannot open: \(error.reason)"))
            return (0, false)
        }
        defer { folder.close() }
        var checked = 0
        for level in pyramid.geometry.levels {
            let levelName = "\(level.level)"
            let levelFolder = Result { () throws(SystemCallError) in
                try folder.open(at: levelName, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
            }
            defer { if case .success(let fd) = levelFolder { fd.close() } }
            // Rows in batches, each batch's rows checked in parallel and reported in order.
            var row = 0
            while row < level.rows {
                if isCancelled() { return (checked, true) }
                let rows = Array(row..<min(level.rows, row + max(threads, 64 / max(1, level.columns), 1)))
                var results = [[Problem]](repeating: [], count: rows.count)
                results.withUnsafeMutableBufferPointer { slots in
                    nonisolated(unsafe) let slots = slots
                    DispatchQueue.concurrentPerform(iterations: rows.count) { i in
                        slots[i] = checkFolderRow(level: level, row: rows[i], levelFolder: levelFolder)
                    }
                }
                for problem in results.joined() { report(problem) }
                checked += rows.count * level.columns
                row += rows.count
            }
        }
        return (checked, false)
    }

    private func checkFolderRow(level: Level, row: Int, levelFolder: Result<FileDescriptor, SystemCallError>) -> [Problem] {
        let ext = pyramid.manifest.format.fileExtension
        let rowPath = "\(pyramid.path)/\(level.level)/\(row)"
        func missingAll(_ reason: String) -> [Problem] {
            (0..<level.columns).map { Problem(tile: "\(level.level)/\(row)/\($0)", path: "\(rowPath)/\($0).\(ext)", reason: reason) }
        }
        let levelFD: FileDescriptor
        switch levelFolder {
        case .success(let fd): levelFD = fd
        case .failure(let error): return missingAll("missing (\(Self.reason(error, for: "\(pyramid.path)/\(level.level)")))")
        }
        let rowFD: FileDescriptor
        do {
            rowFD = try levelFD.open(at: "\(row)", O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        } catch {
            return missingAll("missing (\(Self.reason(error, for: rowPath)))")
        }
        defer { rowFD.close() }
        var problems: [Problem] = []
        for column in 0..<level.columns {
            let tile = TileCoordinate(level: level.level, row: row, column: column)
            let path = "\(rowPath)/\(column).\(ext)"
            switch Self.readFile(in: rowFD, "\(column).\(ext)", maximumBytes: maximumTileBytes) {
            case let .failure(reason):
                problems.append(Problem(tile: "\(tile)", path: path, reason: reason))
            case let .success(bytes):
                let size = expectedSize(of: tile)
                if let reason = Self.check(bytes, format: pyramid.manifest.format, width: size.width, height: size.height) {
                    problems.append(Problem(tile: "\(tile)", path: path, reason: reason))
                }
            }
        }
        return problems
    }

    // MARK: Archives

    private func verifyArchive(isCancelled: @Sendable () -> Bool, report: (Problem) -> Void) -> (Int, Bool) {
        guard let archive = pyramid.archive else { return (0, false) }
        let path = pyramid.path
        let format = pyramid.manifest.format
        struct Blob {
            var location: TileLocation
            var tiles: [TileCoordinate]
        }
        var batch: [Blob] = []
        var batchTiles = 0
        var present = 0
        var interrupted = false
        let batchLimit = max(64, 8 * threads)

        func flush() {
            guard !batch.isEmpty else { return }
            var results = [[Problem]](repeating: [], count: batch.count)
            let blobs = batch
            results.withUnsafeMutableBufferPointer { slots in
                nonisolated(unsafe) let slots = slots
                DispatchQueue.concurrentPerform(iterations: blobs.count) { i in
                    let blob = blobs[i]
                    let bytes: [UInt8]
                    do {
                        bytes = try archive.reader.read(blob.location)
                    } catch {
                        slots[i] = [Problem(tile: "\(blob.tiles[0])", path: path, reason: "unreadable: \(error)")]
                        return
                    }
                    // Identical tiles share their bytes: decoded once per expected size.
                    var verdicts: [String: String?] = [:]
                    var found: [Problem] = []
                    for tile in blob.tiles {
                        let size = expectedSize(of: tile)
                        let key = "\(size.width)x\(size.height)"
                        let verdict = verdicts[key] ?? Self.check(bytes, format: format, width: size.width, height: size.height)
                        verdicts[key] = verdict
                        if let verdict { found.append(Problem(tile: "\(tile)", path: path, reason: verdict)) }
                    }
                    slots[i] = found
                }
            }
            for problem in results.joined() { report(problem) }
            batch.removeAll(keepingCapacity: true)
            batchTiles = 0
        }

        do {
            try archive.forEachTile { (tiles, location) throws(StorageError) in
                if isCancelled() {
                    interrupted = true
                    throw StorageError.invalid(path: path, reason: "interrupted")
                }
                present += tiles.count
                guard location.length <= maximumTileBytes else {
                    for tile in tiles {
                        report(
                            Problem(
                                tile: "\(tile)", path: path,
                                reason: "its entry claims \(location.length) bytes, more than the server serves (\(maximumTileBytes))"))
                    }
                    return
                }
                batch.append(Blob(location: location, tiles: tiles))
                batchTiles += tiles.count
                if batch.count >= batchLimit || batchTiles >= 4096 { flush() }
            }
            flush()
        } catch {
            flush()
            if interrupted { return (present, true) }
            report(Problem(tile: nil, path: path, reason: "\(error)"))
            return (present, false)
        }
        let expected = pyramid.expectedTiles
        if present < expected {
            // Name the missing tiles: a lookup per tile of the geometry.
            for level in pyramid.geometry.levels {
                for row in 0..<level.rows {
                    if isCancelled() { return (present, true) }
                    for column in 0..<level.columns {
                        let tile = TileCoordinate(level: level.level, row: row, column: column)
                        do {
                            if try archive.location(of: tile) == nil {
                                report(
                                    Problem(tile: "\(tile)", path: path, reason: "missing (the archive's directories do not address it)"))
                            }
                        } catch {
                            report(Problem(tile: "\(tile)", path: path, reason: "\(error)"))
                        }
                    }
                }
            }
        }
        return (expected, false)
    }

    // MARK: The thumbnail

    private func verifyThumbnail(report: (Problem) -> Void) {
        let thumbnail = pyramid.manifest.thumbnail
        let bytes: [UInt8]
        let path: String
        if let archive = pyramid.archive {
            path = pyramid.path
            do { bytes = try archive.thumbnailBytes() } catch {
                report(Problem(tile: "thumbnail", path: path, reason: "unreadable: \(error)"))
                return
            }
        } else {
            path = "\(pyramid.path)/\(thumbnail.file)"
            guard !thumbnail.file.isEmpty, !thumbnail.file.hasPrefix("."), !thumbnail.file.contains("/") else {
                report(
                    Problem(
                        tile: "thumbnail", path: "\(pyramid.path)/\(PyramidManifest.fileName)",
                        reason: "the thumbnail '\(thumbnail.file)' is not a file name in the folder"))
                return
            }
            let folder: FileDescriptor
            do {
                folder = try FileDescriptor.open(pyramid.path, O_RDONLY | O_DIRECTORY)
            } catch {
                report(Problem(tile: "thumbnail", path: path, reason: error.reason))
                return
            }
            defer { folder.close() }
            switch Self.readFile(in: folder, thumbnail.file, maximumBytes: pyramid.manifest.maximumThumbnailBytes) {
            case let .failure(reason):
                report(Problem(tile: "thumbnail", path: path, reason: reason))
                return
            case let .success(read): bytes = read
            }
        }
        let format = TileFormat(fileExtension: (thumbnail.file as NSString).pathExtension) ?? pyramid.manifest.format
        if let reason = Self.check(bytes, format: format, width: thumbnail.width, height: thumbnail.height) {
            report(Problem(tile: "thumbnail", path: path, reason: reason))
        }
    }

    // MARK: One file

    /// Why `bytes` are not a whole `format` image of `width × height`, or nil.
    public static func check(_ bytes: [UInt8], format: TileFormat, width: Int, height: Int) -> String? {
        guard !bytes.isEmpty else { return "empty file" }
        guard format.looksComplete(bytes) else {
            return "not a complete \(format.rawValue) file (\(bytes.count) bytes; the server answers 500 for it)"
        }
        var loader: UnsafePointer<CChar>?
        var w: Int32 = 0, h: Int32 = 0, b: Int32 = 0
        let status = bytes.withUnsafeBytes { raw in
            format.rawValue.withCString { name in
                tiler_vips_check_encoded(
                    raw.baseAddress, raw.count, name, Int32(clamping: width), Int32(clamping: height),
                    &loader, &w, &h, &b)
            }
        }
        switch status {
        case TILER_CHECK_OK:
            return nil
        case TILER_CHECK_WRONG_FORMAT:
            return "not a \(format.rawValue) image (libvips reads it as \(loader.map { String(cString: $0) } ?? "nothing"))"
        case TILER_CHECK_WRONG_SIZE:
            return "\(w)×\(h) pixels, expected \(width)×\(height)"
        default:
            return "does not decode: \(Vips.takeError())"
        }
    }

    /// A file's bytes, or why they could not be read.
    enum FileRead {
        case success([UInt8])
        case failure(String)
    }

    /// A regular file's bytes, opened beneath `directory` without following a link.
    static func readFile(in directory: FileDescriptor, _ name: String, maximumBytes: Int) -> FileRead {
        let fd: FileDescriptor
        do {
            fd = try directory.open(at: name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        } catch {
            return .failure(
                error.errno == ENOENT ? "missing" : error.errno == ELOOP ? "is a link (the server follows none)" : error.reason)
        }
        defer { fd.close() }
        let info: FileInfo
        do {
            info = try fd.info()
        } catch {
            return .failure(error.reason)
        }
        guard info.isRegularFile else { return .failure("not a regular file") }
        guard info.size <= maximumBytes else {
            return .failure("\(info.size) bytes, more than the server serves (\(maximumBytes))")
        }
        var bytes = [UInt8](repeating: 0, count: info.size)
        let read = bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(SystemCallError) in try fd.readFully(into: buffer, at: 0) }
        }
        switch read {
        case .failure(let error): return .failure(error.reason)
        case .success(let n) where n < bytes.count: return .failure("shorter than its size while read")
        case .success: return .success(bytes)
        }
    }

    private static func reason(_ error: SystemCallError, for path: String) -> String {
        switch error.errno {
        case ENOENT: "no folder \(path)"
        case ELOOP: "\(path) is a link (the server follows none)"
        case ENOTDIR: "\(path) is not a folder"
        default: "\(path): \(error.reason)"
        }
    }
}
