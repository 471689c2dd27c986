import Dispatch
import Foundation
import TilerCore
import TilerStorage
import Synchronization

/// Builds every level of a pyramid from full-resolution rows that arrive top to bottom,
/// the way libvips' dzsave does: each level keeps one strip of `tileSize` rows; when a
/// strip is full its tiles are encoded and written to the sink (a folder or an
/// archive), and its rows are shrunk 2×2 into the level below. Memory is two strips per level (one filling, one encoding), so it
/// grows with the width, not the height.
///
/// Encoding runs on all cores in the background while the next strip is decoded,
/// copied and shrunk: finished strips are queued, and handed to the encoders as one
/// batch when a strip's buffer is needed again. At most one batch is in flight.
///
/// Not thread-safe: rows must come from one thread at a time, in order.
final class PyramidBuilder {
    /// One level's strip of rows, double-buffered.
    final class LevelStrip {
        let level: Level
        let rowBytes: Int
        /// The strip being filled: `tileSize` rows of `rowBytes`.
        private(set) var rows: UnsafeMutablePointer<UInt8>
        /// The other buffer, holding the previous strip (maybe still being encoded).
        private var spare: UnsafeMutablePointer<UInt8>
        /// Rows filled in `rows`.
        var filled = 0
        /// The level row that `rows` starts at.
        var firstRow = 0
        /// A row still waiting for its partner before it can be shrunk into the level below.
        let waiting: UnsafeMutablePointer<UInt8>
        var hasWaiting = false
        /// Whether the full strip in `rows` is queued for encoding but not yet handed over.
        var queued = false
        /// Every row of the level, kept for the thumbnail (one small level only).
        var whole: UnsafeMutablePointer<UInt8>?

        init(level: Level, bands: Int, tileSize: Int, keepWhole: Bool) {
            self.level = level
            rowBytes = level.width * bands
            let stripRows = min(tileSize, level.height)
            rows = .allocate(capacity: rowBytes * stripRows)
            spare = level.height > tileSize ? .allocate(capacity: rowBytes * stripRows) : rows
            waiting = .allocate(capacity: rowBytes)
            if keepWhole { whole = .allocate(capacity: rowBytes * level.height) }
        }

        deinit {
            if spare != rows { spare.deallocate() }
            rows.deallocate()
            waiting.deallocate()
            whole?.deallocate()
        }

        var isComplete: Bool { firstRow + filled == level.height }

        /// Starts the next strip in the other buffer, which the caller knows is free.
        func startNextStrip() {
            swap(&rows, &spare)
            firstRow += filled
            filled = 0
        }
    }

    /// A finished strip whose tiles are to be encoded. Unchecked `Sendable`: the encoders
    /// only read `rows`, and nothing writes that buffer until their batch is done.
    private struct StripJob: @unchecked Sendable {
        let level: Level
        let rows: UnsafePointer<UInt8>
        let rowBytes: Int
        let tileRow: Int
        let height: Int
    }

    /// The batch of tiles being encoded in the background.
    private struct Batch {
        let done: DispatchGroup
        let outcome: TileWriteOutcome
        let tiles: Int
    }

    let geometry: PyramidGeometry
    let bands: Int
    let sink: any PyramidSink
    let encoder: TileEncoder
    /// Strips indexed by level number.
    let strips: [LevelStrip]
    /// The level kept whole for the thumbnail.
    let thumbnailLevel: Int
    private var jobs: [StripJob] = []
    private var queuedStrips: [LevelStrip] = []
    private var inFlight: Batch?
    private(set) var tilesWritten = 0
    private(set) var bytesWritten = 0
    private(set) var fullResolutionRows = 0

    /// - Parameter thumbnailSize: the smallest level whose longest side is at least this
    ///   is kept whole, to make the thumbnail from.
    init(geometry: PyramidGeometry, bands: Int, sink: any PyramidSink, encoder: TileEncoder, thumbnailSize: Int) {
        self.geometry = geometry
        self.bands = bands
        self.sink = sink
        self.encoder = encoder
        let thumbnailLevel =
            geometry.levelNumbers.first { max(geometry.level($0).width, geometry.level($0).height) >= thumbnailSize }
            ?? geometry.maxLevel
        self.thumbnailLevel = thumbnailLevel
        strips = geometry.levels.map {
            LevelStrip(level: $0, bands: bands, tileSize: geometry.tileSize, keepWhole: $0.level == thumbnailLevel)
        }
    }

    deinit {
        // Never free buffers under the encoders' feet, even after an error.
        inFlight?.done.wait()
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

    /// Encodes whatever is still queued, waits for it, and checks that every level
    /// received all its rows.
    func finish() throws {
        try submitQueued()
        try waitForEncoding()
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
            // The full strip goes to the encoders (if it has not yet); its spare buffer
            // held a strip of an earlier batch, which submitQueued waited for.
            if strip.queued { try submitQueued() }
            strip.startNextStrip()
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
        let tileRow = strip.firstRow / geometry.tileSize
        try sink.prepareRow(level: strip.level.level, row: tileRow)
        jobs.append(
            StripJob(
                level: strip.level, rows: UnsafePointer(strip.rows), rowBytes: strip.rowBytes,
                tileRow: tileRow, height: strip.filled))
        strip.queued = true
        queuedStrips.append(strip)
        if strip.level.level > 0 { try shrinkStrip(strip, into: strips[strip.level.level - 1]) }
    }

    /// Shrinks the rows of a full strip, pairing the first with a row left waiting by the
    /// previous strip (odd tile sizes), into the level below. The strip's buffer does not
    /// change meanwhile: only `reserveRow` on this strip swaps it.
    private func shrinkStrip(_ strip: LevelStrip, into below: LevelStrip) throws {
        let width = strip.level.width
        let rows = strip.rows, rowBytes = strip.rowBytes, filled = strip.filled
        var y = 0
        if strip.hasWaiting, filled > 0 {
            let out = try reserveRow(in: below)
            AreaAverage.shrinkRows(strip.waiting, rows, width: width, bands: bands, into: out)
            strip.hasWaiting = false
            y = 1
            try commitRow(in: below)
        }
        while y + 1 < filled {
            let out = try reserveRow(in: below)
            AreaAverage.shrinkRows(rows + y * rowBytes, rows + (y + 1) * rowBytes, width: width, bands: bands, into: out)
            y += 2
            try commitRow(in: below)
        }
        if y < filled {
            if strip.isComplete {
                // The last row of an odd height shrinks alone.
                let out = try reserveRow(in: below)
                AreaAverage.shrinkRows(rows + y * rowBytes, nil, width: width, bands: bands, into: out)
                try commitRow(in: below)
            } else {
                strip.waiting.update(from: rows + y * rowBytes, count: rowBytes)
                strip.hasWaiting = true
            }
        }
    }

    /// Waits for the batch in flight, then starts encoding every queued tile in the
    /// background, on all cores.
    private func submitQueued() throws {
        try waitForEncoding()
        guard !jobs.isEmpty else { return }
        var allTiles: [(job: Int, column: Int)] = []
        for (index, job) in jobs.enumerated() {
            for column in 0..<job.level.columns { allTiles.append((index, column)) }
        }
        let tiles = allTiles
        let outcome = TileWriteOutcome(count: tiles.count)
        let jobs = self.jobs
        let tileSize = geometry.tileSize
        let bands = self.bands
        let encoder = self.encoder
        let sink = self.sink
        let done = DispatchGroup()
        DispatchQueue.global().async(group: done) {
            DispatchQueue.concurrentPerform(iterations: tiles.count) { index in
                let (jobIndex, column) = tiles[index]
                let job = jobs[jobIndex]
                let x = column * tileSize
                let width = min(x + tileSize, job.level.width) - x
                let tile = TileCoordinate(level: job.level.level, row: job.tileRow, column: column)
                do {
                    let written = try encoder.withEncoded(
                        pixels: job.rows + x * bands, stride: job.rowBytes,
                        width: width, height: job.height, bands: bands
                    ) { bytes in
                        try sink.writeTile(tile, bytes)
                        return bytes.count
                    }
                    outcome.record(index: index, bytes: written)
                } catch {
                    outcome.fail(error)
                }
            }
        }
        inFlight = Batch(done: done, outcome: outcome, tiles: tiles.count)
        for strip in queuedStrips { strip.queued = false }
        queuedStrips.removeAll(keepingCapacity: true)
        self.jobs.removeAll(keepingCapacity: true)
    }

    /// Waits for the batch in flight, if any, ignoring its result: after a failure, before
    /// the sink is discarded.
    func drain() {
        inFlight?.done.wait()
        inFlight = nil
    }

    /// Waits for the batch in flight, if any, and takes its result.
    private func waitForEncoding() throws {
        guard let batch = inFlight else { return }
        batch.done.wait()
        inFlight = nil
        if let error = batch.outcome.firstError { throw error }
        tilesWritten += batch.tiles
        bytesWritten += batch.outcome.totalBytes
    }
}

/// What the encoding threads report back: bytes per tile and the first error.
private final class TileWriteOutcome: Sendable {
    private struct Tally {
        var bytes: [Int]
        var error: (any Error)?
    }

    private let tally: Mutex<Tally>

    init(count: Int) { tally = Mutex(Tally(bytes: Array(repeating: 0, count: count), error: nil)) }

    func record(index: Int, bytes count: Int) {
        tally.withLock { $0.bytes[index] = count }
    }

    func fail(_ error: any Error) {
        tally.withLock { t in
            if t.error == nil { t.error = error }
        }
    }

    var firstError: (any Error)? { tally.withLock { $0.error } }
    var totalBytes: Int { tally.withLock { $0.bytes.reduce(0, +) } }
}
