import Dispatch
import Foundation
import TilerCore

/// Builds every level of a pyramid from full-resolution rows that arrive top to bottom,
/// the way libvips' dzsave does: each level keeps one strip of `tileSize` rows; when a
/// strip is full its tiles are encoded and written, and its rows are shrunk 2×2 into
/// the level below. Memory is a strip per level, so it grows with the width, not the
/// height. Tiles are encoded on all cores.
///
/// Not thread-safe: rows must come from one thread at a time, in order.
final class PyramidBuilder {
    /// One level's strip of rows. Unchecked `Sendable`: the encoding threads only read
    /// `rows` while the strip is queued, and nothing writes it until they are done.
    final class LevelStrip: @unchecked Sendable {
        let level: Level
        let rowBytes: Int
        /// `tileSize` rows of `rowBytes`.
        let rows: UnsafeMutablePointer<UInt8>
        /// Rows filled in `rows`.
        var filled = 0
        /// The level row that `rows` starts at.
        var firstRow = 0
        /// A row still waiting for its partner before it can be shrunk into the level below.
        let waiting: UnsafeMutablePointer<UInt8>
        var hasWaiting = false
        /// Whether the strip's tiles are queued for encoding and its rows must not change yet.
        var queued = false
        /// Every row of the level, kept for the thumbnail (one small level only).
        var whole: UnsafeMutablePointer<UInt8>?

        init(level: Level, bands: Int, tileSize: Int, keepWhole: Bool) {
            self.level = level
            rowBytes = level.width * bands
            rows = .allocate(capacity: rowBytes * tileSize)
            waiting = .allocate(capacity: rowBytes)
            if keepWhole { whole = .allocate(capacity: rowBytes * level.height) }
        }

        deinit {
            rows.deallocate()
            waiting.deallocate()
            whole?.deallocate()
        }

        var isComplete: Bool { firstRow + filled == level.height }
    }

    /// A strip whose tiles are to be encoded.
    private struct StripJob: Sendable {
        let strip: LevelStrip
        let tileRow: Int
        let height: Int
    }

    let geometry: PyramidGeometry
    let bands: Int
    let folder: URL
    let encoder: TileEncoder
    /// Strips indexed by level number.
    let strips: [LevelStrip]
    /// The level kept whole for the thumbnail.
    let thumbnailLevel: Int
    private var jobs: [StripJob] = []
    private(set) var tilesWritten = 0
    private(set) var bytesWritten = 0
    private(set) var fullResolutionRows = 0

    /// - Parameter thumbnailSize: the smallest level whose longest side is at least this
    ///   is kept whole, to make the thumbnail from.
    init(geometry: PyramidGeometry, bands: Int, folder: URL, encoder: TileEncoder, thumbnailSize: Int) {
        self.geometry = geometry
        self.bands = bands
        self.folder = folder
        self.encoder = encoder
        let thumbnailLevel = geometry.levelNumbers.first { max(geometry.level($0).width, geometry.level($0).height) >= thumbnailSize }
            ?? geometry.maxLevel
        self.thumbnailLevel = thumbnailLevel
        strips = geometry.levels.map {
            LevelStrip(level: $0, bands: bands, tileSize: geometry.tileSize, keepWhole: $0.level == thumbnailLevel)
        }
    }

    /// Takes `count` full-resolution rows, row `i` at `first + i * stride`.
    func append(_ first: UnsafePointer<UInt8>, stride: Int, count: Int) throws {
        let top = strips[geometry.maxLevel]
        for i in 0..<count {
            let row = try reserveRow(in: top)
            row.update(from: first + i * stride, count: top.rowBytes)
            try commitRow(in: top)
        }
        fullResolutionRows += count
    }

    /// Encodes whatever is still queued and checks that every level received all its rows.
    func finish() throws {
        try flushJobs()
        for strip in strips where !strip.isComplete {
            preconditionFailure("level \(strip.level.level) has \(strip.firstRow + strip.filled) of \(strip.level.height) rows")
        }
    }

    /// The whole thumbnail level, rows of `width * bands` bytes.
    var thumbnailSource: (pixels: UnsafePointer<UInt8>, width: Int, height: Int) {
        let strip = strips[thumbnailLevel]
        return (UnsafePointer(strip.whole!), strip.level.width, strip.level.height)
    }

    /// The next free row of a level's strip, starting a new strip when the last is full.
    private func reserveRow(in strip: LevelStrip) throws -> UnsafeMutablePointer<UInt8> {
        if strip.filled == geometry.tileSize {
            if strip.queued { try flushJobs() }
            strip.firstRow += strip.filled
            strip.filled = 0
        }
        return strip.rows + strip.filled * strip.rowBytes
    }

    /// Counts the row just written at `reserveRow`; a full strip is queued for encoding
    /// and shrunk into the level below.
    private func commitRow(in strip: LevelStrip) throws {
        if let whole = strip.whole {
            let y = strip.firstRow + strip.filled
            (whole + y * strip.rowBytes).update(from: strip.rows + strip.filled * strip.rowBytes, count: strip.rowBytes)
        }
        strip.filled += 1
        guard strip.filled == geometry.tileSize || strip.isComplete else { return }
        try prepareFolder(level: strip.level.level, row: strip.firstRow / geometry.tileSize)
        jobs.append(StripJob(strip: strip, tileRow: strip.firstRow / geometry.tileSize, height: strip.filled))
        strip.queued = true
        if strip.level.level > 0 { try shrinkStrip(strip, into: strips[strip.level.level - 1]) }
    }

    /// Shrinks the rows of a full strip, pairing the first with a row left waiting by the
    /// previous strip (odd tile sizes), into the level below.
    private func shrinkStrip(_ strip: LevelStrip, into below: LevelStrip) throws {
        let width = strip.level.width
        var y = 0
        if strip.hasWaiting, strip.filled > 0 {
            let out = try reserveRow(in: below)
            AreaAverage.shrinkRows(strip.waiting, strip.rows, width: width, bands: bands, into: out)
            strip.hasWaiting = false
            y = 1
            try commitRow(in: below)
        }
        while y + 1 < strip.filled {
            let out = try reserveRow(in: below)
            AreaAverage.shrinkRows(strip.rows + y * strip.rowBytes, strip.rows + (y + 1) * strip.rowBytes,
                                   width: width, bands: bands, into: out)
            y += 2
            try commitRow(in: below)
        }
        if y < strip.filled {
            if strip.isComplete {
                // The last row of an odd height shrinks alone.
                let out = try reserveRow(in: below)
                AreaAverage.shrinkRows(strip.rows + y * strip.rowBytes, nil, width: width, bands: bands, into: out)
                try commitRow(in: below)
            } else {
                strip.waiting.update(from: strip.rows + y * strip.rowBytes, count: strip.rowBytes)
                strip.hasWaiting = true
            }
        }
    }

    private func prepareFolder(level: Int, row: Int) throws {
        let path = folder.appendingPathComponent("\(level)/\(row)", isDirectory: true).path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// Encodes and writes every queued tile, on all cores.
    private func flushJobs() throws {
        guard !jobs.isEmpty else { return }
        var allTiles: [(job: Int, column: Int)] = []
        for (index, job) in jobs.enumerated() {
            for column in 0..<job.strip.level.columns { allTiles.append((index, column)) }
        }
        let tiles = allTiles
        let outcome = TileWriteOutcome(count: tiles.count)
        let jobs = self.jobs
        let tileSize = geometry.tileSize
        let bands = self.bands
        let encoder = self.encoder
        let extensionName = encoder.format.fileExtension
        let folderPath = folder.path
        DispatchQueue.concurrentPerform(iterations: tiles.count) { index in
            let (jobIndex, column) = tiles[index]
            let job = jobs[jobIndex]
            let strip = job.strip
            let x = column * tileSize
            let width = min(x + tileSize, strip.level.width) - x
            let path = "\(folderPath)/\(strip.level.level)/\(job.tileRow)/\(column).\(extensionName)"
            do {
                let written = try encoder.withEncoded(pixels: strip.rows + x * bands, stride: strip.rowBytes,
                                                      width: width, height: job.height, bands: bands) { bytes in
                    try writeFile(path, bytes)
                    return bytes.count
                }
                outcome.record(index: index, bytes: written)
            } catch {
                outcome.fail(error)
            }
        }
        for job in jobs { job.strip.queued = false }
        self.jobs.removeAll(keepingCapacity: true)
        if let error = outcome.firstError { throw error }
        tilesWritten += tiles.count
        bytesWritten += outcome.totalBytes
    }
}

/// What the encoding threads report back: bytes per tile and the first error.
private final class TileWriteOutcome: @unchecked Sendable {
    private let lock = NSLock()
    private var bytes: [Int]
    private var error: (any Error)?

    init(count: Int) { bytes = Array(repeating: 0, count: count) }

    func record(index: Int, bytes count: Int) {
        lock.lock()
        bytes[index] = count
        lock.unlock()
    }

    func fail(_ error: any Error) {
        lock.lock()
        if self.error == nil { self.error = error }
        lock.unlock()
    }

    var firstError: (any Error)? { lock.lock(); defer { lock.unlock() }; return error }
    var totalBytes: Int { lock.lock(); defer { lock.unlock() }; return bytes.reduce(0, +) }
}

/// Why a file could not be written.
struct FileWriteError: Error, CustomStringConvertible {
    let path: String
    let reason: String
    var description: String { "cannot write \(path): \(reason)" }
}

/// Writes `bytes` to a new file at `path` in one `write` call (looping only on short writes).
func writeFile(_ path: String, _ bytes: UnsafeRawBufferPointer) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw FileWriteError(path: path, reason: String(cString: strerror(errno))) }
    defer { close(fd) }
    var offset = 0
    while offset < bytes.count {
        let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
        if n < 0 {
            if errno == EINTR { continue }
            throw FileWriteError(path: path, reason: String(cString: strerror(errno)))
        }
        offset += n
    }
}
