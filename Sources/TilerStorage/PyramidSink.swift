import Foundation
import PMTiles
import TilerCore
import Synchronization
import TilerSystem

/// Where a pyramid being written goes: a folder `ROOT/ID/` (``FolderSink``) or a PMTiles
/// archive `ROOT/ID.pmtiles` (``ArchiveSink``). Either is staged under a hidden name and
/// appears under its final name only at ``commit(manifest:replace:)``; ``discard()``
/// removes everything written so far. The cutter, `pack` and `unpack` all write through
/// this.
public protocol PyramidSink: AnyObject, Sendable {
    /// Where the pyramid appears once committed.
    var destination: String { get }
    /// Called once for each row of tiles of a level before any of its tiles is written,
    /// from one thread at a time.
    func prepareRow(level: Int, row: Int) throws(StorageError)
    /// Stores one tile's encoded bytes. Called from many threads at once.
    func writeTile(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer) throws(StorageError)
    /// Stores the thumbnail under `name` (the manifest's `thumbnail.file`).
    func writeThumbnail(named name: String, _ bytes: UnsafeRawBufferPointer) throws(StorageError)
    /// Stores the manifest (`pyramid.json`'s bytes, a JSON object) and makes the pyramid
    /// appear under ``destination``, replacing an existing one in one step if `replace`,
    /// else failing with ``StorageError/exists(path:)``. Returns the bytes the pyramid
    /// takes (every file of a folder, or the archive's size).
    func commit(manifest: [UInt8], replace: Bool) throws(StorageError) -> Int
    /// Removes everything written (after a failure or an interrupt). Idempotent.
    func discard()
}

extension PyramidSink {
    public func writeTile(_ tile: TileCoordinate, _ bytes: [UInt8]) throws(StorageError) {
        try bytes.withBytes { (raw) throws(StorageError) in try writeTile(tile, raw) }
    }
}

/// Writes `ROOT/ID/LEVEL/ROW/COLUMN.EXT` files into a hidden partial folder, then
/// `pyramid.json` last (to a temporary name, renamed), then renames the folder into place.
public final class FolderSink: PyramidSink, Sendable {
    private let staged: StagedOutput
    private let fileExtension: String
    /// Bytes written so far.
    private let bytes = Atomic<Int>(0)

    public var destination: String { staged.destination }

    public init(root: String, id: PyramidID, format: TileFormat) throws(StorageError) {
        staged = try StagedOutput(root: root, name: id.rawValue, kind: .folder)
        fileExtension = format.fileExtension
    }

    /// Makes `LEVEL/ROW/` one folder at a time, never the pyramid folder itself: once a
    /// signal has moved that away (``UnfinishedOutput``), writing fails instead of
    /// re-creating it.
    public func prepareRow(level: Int, row: Int) throws(StorageError) {
        let levelPath = "\(staged.path)/\(level)"
        for path in [levelPath, "\(levelPath)/\(row)"] {
            do {
                try FileSystem.makeDirectoryIfMissing(path)
            } catch {
                throw .system(path, error)
            }
        }
    }

    public func writeTile(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        try Self.writeFile("\(staged.path)/\(tile.level)/\(tile.row)/\(tile.column).\(fileExtension)", bytes)
        self.bytes.add(bytes.count, ordering: .relaxed)
    }

    public func writeThumbnail(named name: String, _ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        try Self.writeFile("\(staged.path)/\(name)", bytes)
        self.bytes.add(bytes.count, ordering: .relaxed)
    }

    public func commit(manifest: [UInt8], replace: Bool) throws(StorageError) -> Int {
        let final = "\(staged.path)/\(PyramidManifest.fileName)"
        do {
            try AtomicFile.write(manifest, to: final, through: "\(staged.path)/.\(PyramidManifest.fileName).tmp")
        } catch {
            throw .system(final, error)
        }
        try staged.install(replace: replace)
        return bytes.load(ordering: .relaxed) + manifest.count
    }

    public func discard() { staged.discard() }

    /// Writes `bytes` to a new file at `path` (0666 less the umask, like any file a user
    /// makes: 0644 under umask 022).
    static func writeFile(_ path: String, _ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        do {
            try FileSystem.write(bytes, to: path)
        } catch {
            throw .system(path, error)
        }
    }
}

/// Writes `ROOT/ID.pmtiles` into a hidden partial file: tiles go straight into its tile
/// data section as they come (``ArchiveWriter``); at commit the thumbnail, metadata and
/// directories are added and the file is renamed into place. The thumbnail is kept in
/// memory (it is small) until then.
public final class ArchiveSink: PyramidSink, Sendable {
    private let staged: StagedOutput
    private let writer: ArchiveWriter
    private let geometry: PyramidGeometry
    private let format: TileFormat
    private let thumbnail = Mutex<[UInt8]?>(nil)
    private let name: String

    public var destination: String { staged.destination }

    public convenience init(root: String, id: PyramidID, geometry: PyramidGeometry, format: TileFormat) throws(StorageError) {
        try self.init(root: root, id: id, geometry: geometry, format: format, kernelCopy: true)
    }

    /// `kernelCopy` false makes commit copy a cut's tiles into tile-id order through
    /// memory (`pread`/`pwrite`) rather than with `copy_file_range`: the fallback, for tests.
    init(root: String, id: PyramidID, geometry: PyramidGeometry, format: TileFormat, kernelCopy: Bool) throws(StorageError) {
        let name = "\(id.rawValue).\(PyramidLayout.archiveExtension)"
        self.name = name
        guard geometry.maxLevel <= PyramidArchive.maximumLevel else {
            throw .invalid(
                path: "\(root)/\(name)",
                reason: "\(geometry.maxLevel + 1) levels do not fit in a PMTiles archive (at most \(PyramidArchive.maximumLevel + 1))")
        }
        // Also what a killed removal of the folder of this id left (`PyramidRemoval.delete`,
        // or a `cut --archive --force` that replaced the folder).
        staged = try StagedOutput(root: root, name: name, kind: .file, alsoClearing: id.rawValue)
        writer = try ArchiveWriter(
            output: staged.descriptor, outputPath: staged.path,
            expectedTiles: geometry.levels.reduce(0) { $0 + $1.tileCount }, kernelCopy: kernelCopy)
        self.geometry = geometry
        self.format = format
    }

    public func prepareRow(level: Int, row: Int) throws(StorageError) {}

    public func writeTile(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        precondition(geometry.contains(tile), "tile \(tile) outside the pyramid")
        try writer.add(tileID: PyramidArchive.tileID(tile), bytes)
    }

    public func writeThumbnail(named name: String, _ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        let copy = Array(bytes)
        thumbnail.withLock { $0 = copy }
    }

    public func commit(manifest: [UInt8], replace: Bool) throws(StorageError) -> Int {
        guard let thumbnail = thumbnail.withLock({ $0 }), !thumbnail.isEmpty else {
            throw .invalid(path: staged.destination, reason: "no thumbnail was written")
        }
        let expected = geometry.levels.reduce(0) { $0 + $1.tileCount }
        guard writer.count == expected else {
            throw .invalid(path: staged.destination, reason: "\(writer.count) of the pyramid's \(expected) tiles were written")
        }
        let header = PyramidArchive.header(geometry: geometry, format: format)
        // Tiles that did not come in tile-id order (a cut's) are copied in that order into
        // a second partial file, which is installed instead, so the archive is clustered.
        var ordered: StagedOutput?
        defer { ordered?.discard() }  // nothing once installed
        let summary = try writer.finish(
            header: header, extras: [thumbnail],
            reorderInto: { () throws(StorageError) in
                let made = try StagedOutput(root: self.staged.root, name: self.name, kind: .file)
                ordered = made
                return (made.descriptor, made.path)
            }
        ) { (offsets) throws(StorageError) in
            try PyramidArchive.metadata(
                manifest: manifest, geometry: geometry, format: format,
                thumbnail: (offsets[0], UInt64(thumbnail.count)), path: staged.destination)
        }
        if let ordered {
            try ordered.install(replace: replace)
            staged.discard()
        } else {
            try staged.install(replace: replace)
        }
        return Int(summary.bytes)
    }

    public func discard() { staged.discard() }
}

extension PyramidManifest {
    /// `pyramid.json`'s bytes: pretty-printed with sorted keys and a final newline.
    public func fileBytes() throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(self)) + [0x0A]
    }
}
