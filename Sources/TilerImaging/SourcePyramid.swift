import CTilerShims
import CVips
import Dispatch
import Foundation
import Synchronization
import TilerCore

/// One image file served as the pyramid `tiler cut` would make of it, without cutting it
/// (`tiler serve --sources`): the same geometry, manifest, tile pixels and encoder, with
/// each tile made when asked for.
///
/// **How each level is made is fixed by the geometry and the file, never by what happens
/// to be cached**, so a tile's pixels do not depend on the order of requests:
/// - the full-resolution level is cropped from the source (libvips reads only the tiles or
///   strips it needs from a TIFF; a JPEG, PNG or other format without random access is
///   decoded once, by libvips, to a temporary file it then reads regions of);
/// - a level the source stores itself (a page or sub-IFD of a pyramidal TIFF one
///   `2^k` step down, or JPEG shrink-on-load 2, 4 or 8) whose longest side is at least
///   four tiles is cropped from that level (autorotated), its last row or column (as
///   stored) repeated when it is one pixel short of the geometry (TIFF pyramids and
///   libvips' shrink-on-load round sizes down, the geometry rounds up). A stored level
///   whose pixel grid autorotation shifts against the level's (an odd size along an
///   axis it reverses) is not used;
/// - every other level is the 2×2 area average of the level above (`AreaAverage`, the
///   cutter's filter): each tile from its four children, which come from the pixel cache
///   or are made the same way. Without a stored level this equals what `tiler cut`
///   writes, pixel for pixel.
///
/// Concurrent requests for one tile make it once (`SingleFlight`). Tiles' pixels are kept
/// in a shared byte-bounded `PixelCache` to make the levels below from.
// Unchecked `Sendable`: its mutable state is under Mutexes and Atomics; the open file
// and the libvips images are only read.
public final class SourcePyramid: @unchecked Sendable {
    /// The file as the user named it, for messages.
    public let path: String
    public let id: PyramidID
    public let geometry: PyramidGeometry
    /// The manifest `tiler cut` would write (same fields; `created` is the file's
    /// modification time).
    public let manifest: PyramidManifest
    public let bands: Int
    /// The libvips loader that reads the file.
    public let loader: String
    let options: CutOptions
    /// The tiles' format (`options.format`, or for `auto` decided by the file's alpha).
    let format: TileFormat
    let encoder: TileEncoder
    let file: InputFile
    let orientation: Int
    /// Per level number: the stored level it is cropped from, or nil when it is made from
    /// the level above.
    let plan: [StoredLevel?]
    private let cache: PixelCache
    /// The temporary disk opened levels may take, shared by every source; nil for no bound.
    private let spill: SpillBudget?
    private let serial: UInt64
    private let pixelFlights = SingleFlight<TileCoordinate, TilePixels>()
    private let tileFlights = SingleFlight<TileCoordinate, [UInt8]>()
    /// The stored levels opened so far (each opened once, under the lock).
    private let opened = Mutex<[StoredLevel: OpenedLevel]>([:])
    private let made = Atomic<Int>(0)

    private static let serials = Atomic<UInt64>(0)

    /// Why a file no libvips loader recognises is refused: such files in a sources folder
    /// are not images and are skipped without a word.
    public static let unrecognised = "no libvips loader recognises its content"

    /// Opens `path` and reads its header (and the headers of its stored levels), checked
    /// as `tiler cut` checks its inputs: a regular file, a loader that is not a vector one
    /// unless allowed, at most `options.maxPixels` pixels, and, with `spill`, no level
    /// whose decoding needs more temporary disk than the whole budget. No pixel is
    /// decoded.
    public init(
        path: String, id: PyramidID, options: CutOptions, cache: PixelCache, spill: SpillBudget? = nil
    ) throws(CutError) {
        self.path = path
        self.id = id
        self.options = options
        self.cache = cache
        self.spill = spill
        serial = Self.serials.add(1, ordering: .relaxed).newValue
        file = try InputFile.open(path)
        let base: VipsImageHandle
        (base, loader) = try Self.open(file, option: nil, value: 0, allowVector: options.allowVector)
        try options.checkPixels(width: base.width, height: base.height)
        let orientation = options.orientation(stored: base.orientation)
        self.orientation = orientation.value
        let upright = orientation.upright(width: base.width, height: base.height)
        geometry = try options.geometry(width: upright.width, height: upright.height)
        let format = options.tileFormat(hasAlpha: base.hasAlpha)
        self.format = format
        let converted: VipsImageHandle
        do {
            converted = try base.tilePixels(options.tilePixelSettings(for: format))
        } catch {
            throw .notAnImage(file.scrub(error.description))
        }
        bands = converted.bands
        var encoder = TileEncoder(format: format, quality: options.quality, png: options.png)
        if options.pad { encoder.padding = TilePadding(tileSize: options.tileSize, colour: options.paddingColour(for: format)) }
        self.encoder = encoder

        // The levels the file stores, matched to the geometry's levels.
        let file = self.file, loader = self.loader
        func spillBytes(_ image: VipsImageHandle) -> Int {
            Int(clamping: tiler_source_spill_bytes(image.pointer, loader, file.descriptor.rawValue))
        }
        let full = StoredLevel(
            option: nil, value: 0, width: base.width, height: base.height,
            levelWidth: base.width, levelHeight: base.height, spill: spillBytes(base))
        var stored: [Int: StoredLevel] = [0: full]
        let levels = StoredLevels(geometry: geometry, orientation: orientation, width: base.width, height: base.height)
        if loader.hasPrefix("jpegload") {
            for (k, shrink) in [(1, 2), (2, 4), (3, 8)] where k <= geometry.maxLevel {
                if let (image, _) = try? Self.open(file, option: "shrink", value: shrink, allowVector: false),
                    let (found, level) = levels.match("shrink", shrink, width: image.width, height: image.height), found == k
                {
                    stored[k] = level
                    stored[k]?.spill = spillBytes(image)
                }
            }
        } else if loader.hasPrefix("tiffload") {
            let hasICC = tiler_source_has_icc(base.pointer) != 0
            for (option, count) in [
                ("page", Int(tiler_source_get_int(base.pointer, "n-pages", 1))),
                ("subifd", Int(tiler_source_get_int(base.pointer, "n-subifds", 0))),
            ] {
                let first = option == "page" ? 1 : 0
                guard count > first else { continue }
                for n in first..<min(count, 64) {
                    guard let (image, _) = try? Self.open(file, option: option, value: n, allowVector: false),
                        image.bands == base.bands, image.pointer.pointee.BandFmt == base.pointer.pointee.BandFmt,
                        (tiler_source_has_icc(image.pointer) != 0) == hasICC,
                        options.orientation(stored: image.orientation) == orientation,
                        let (k, level) = levels.match(option, n, width: image.width, height: image.height), stored[k] == nil
                    else { continue }
                    stored[k] = level
                    stored[k]?.spill = spillBytes(image)
                }
            }
        }
        plan = levels.plan(stored)
        if let spill, let largest = plan.compactMap({ $0?.spill }).max(), largest > spill.capacity {
            throw .unsupportedSize(
                "decoding it needs \((largest + (1 << 20) - 1) >> 20) MiB of temporary disk, more than the "
                    + "\(spill.capacity >> 20) MiB --sources-spill-mb allows")
        }

        let thumbnailLevel = Self.thumbnailLevel(geometry, size: options.thumbnailSize)
        let level = geometry.level(thumbnailLevel)
        var tw: Int32 = 0, th: Int32 = 0
        guard
            tiler_source_thumbnail_size(
                Int32(level.width), Int32(level.height), Int32(bands),
                Int32(options.thumbnailSize), &tw, &th) == 0
        else {
            throw .notAnImage(Vips.takeError())
        }
        var manifest = PyramidManifest(
            id: id, geometry: geometry, format: format,
            thumbnail: .init(file: "thumbnail.\(format.fileExtension)", width: Int(tw), height: Int(th)),
            quality: encoder.quality, bands: bands,
            created: ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(file.modificationSeconds))))
        manifest.source = PyramidManifest.Source(file: (path as NSString).lastPathComponent, bytes: file.size)
        manifest.tilerVersion = TilerVersion.current
        manifest.metadata = options.metadata(of: base)
        if options.pad { manifest.setPadded(background: options.paddingColour(for: format).description) }
        self.manifest = manifest
    }

    /// The level the cutter keeps whole for the thumbnail: the smallest whose longest side
    /// is at least `size`.
    static func thumbnailLevel(_ geometry: PyramidGeometry, size: Int) -> Int {
        geometry.levelNumbers.first { max(geometry.level($0).width, geometry.level($0).height) >= size } ?? geometry.maxLevel
    }

    /// How each level is made, for logs and tests: `page 2`, `subifd 1`, `shrink 4`, `file`
    /// or `from the level above`, coarsest level first.
    public var levelSources: [String] {
        plan.map { level in
            guard let level else { return "from the level above" }
            return level.option.map { "\($0) \(level.value)" } ?? "file"
        }
    }

    /// Opens the source (or one of its stored levels: `option` = `value`) with random
    /// access.
    private static func open(
        _ file: InputFile, option: String?, value: Int,
        allowVector: Bool
    ) throws(CutError) -> (VipsImageHandle, String) {
        do {
            return try VipsImageHandle.open(
                file, for: .sources, randomAccess: true, allowVector: allowVector, loaderOption: option.map { (name: $0, value: value) })
        } catch {
            throw CutError(opening: error)
        }
    }

    /// A stored level opened for reading pixels, once, then shared by every thread. A level
    /// libvips decodes whole to a temporary file first holds its size in the spill budget
    /// while open (reserved before it is opened, outside the lock: making room closes the
    /// least recently used levels of any source, which takes their locks).
    private func image(_ level: StoredLevel) throws(ImagingError) -> OpenedLevel {
        if let hit = opened.withLock({ $0[level] }) {
            hit.reservation?.touch()
            return hit
        }
        var reservation: SpillBudget.Reservation?
        if let spill, level.spill > 0 {
            do throws(SpillBudget.Refusal) {
                reservation = try spill.reserve(level.spill)
            } catch {
                let mib = (level.spill + (1 << 20) - 1) >> 20
                switch error {
                case .tooLarge:
                    throw .libvips("\(path): decoding it needs \(mib) MiB of temporary disk, more than --sources-spill-mb")
                case .busy:
                    throw .busy("\(path): no room within \(spill.wait) s for the \(mib) MiB of temporary disk decoding it needs")
                }
            }
        }
        let outcome = opened.withLock { opened -> Result<OpenedLevel, ImagingError> in
            // Opened by another thread meanwhile: this reservation goes back.
            if let image = opened[level] { return .success(image) }
            do {
                var image = try Self.open(file, option: level.option, value: level.value, allowVector: options.allowVector).0
                if image.width != level.levelWidth || image.height != level.levelHeight {
                    image = try image.extended(toWidth: level.levelWidth, height: level.levelHeight)
                }
                if orientation != 1 { image = try image.autorotated() }
                image = try image.tilePixels(options.tilePixelSettings(for: format))
                guard image.bands == bands else {
                    return .failure(.libvips("\(path): a stored level has \(image.bands) bands, not \(bands)"))
                }
                let made = OpenedLevel(image: image, reservation: reservation)
                opened[level] = made
                return .success(made)
            } catch let error as ImagingError {
                return .failure(error)
            } catch {
                return .failure(.libvips("\(path): \(error)"))
            }
        }
        let made = try outcome.get()
        if let reservation, made.reservation === reservation {
            reservation.whenRoomIsNeeded { [weak self, weak made] in
                guard let self, let made else { return }
                self.opened.withLock { opened in
                    if opened[level] === made { opened[level] = nil }
                }
            }
        }
        return made
    }

    /// Closes every level opened (the source is no longer served): their temporary disk
    /// is freed once no tile is being made from them.
    public func closeLevels() {
        let closed = opened.withLock { opened in
            defer { opened.removeAll() }
            return Array(opened.values)
        }
        _ = closed  // released here, outside the lock
    }

    // MARK: Tiles

    /// The encoded tile, as `tiler cut` would write it.
    public func tile(_ t: TileCoordinate) throws(ImagingError) -> [UInt8] {
        do {
            return try tileFlights.run(t) {
                let pixels = try self.pixels(t)
                return try self.encode(pixels, with: self.encoder)
            }
        } catch let error as ImagingError {
            throw error
        } catch {
            throw .libvips("\(error)")
        }
    }

    /// The encoded thumbnail, as `tiler cut` would write it (from the same level, by the
    /// same libvips call).
    public func thumbnail() throws(ImagingError) -> [UInt8] {
        let level = geometry.level(Self.thumbnailLevel(geometry, size: options.thumbnailSize))
        let rowBytes = level.width * bands
        var whole = [UInt8](repeating: 0, count: rowBytes * level.height)
        for row in 0..<level.rows {
            for column in 0..<level.columns {
                let part: TilePixels
                do {
                    part = try pixels(TileCoordinate(level: level.level, row: row, column: column))
                } catch let error as ImagingError {
                    throw error
                } catch {
                    throw .libvips("\(error)")
                }
                copy(part, into: &whole, rowBytes: rowBytes, x: column * geometry.tileSize, y: row * geometry.tileSize)
            }
        }
        let size = options.thumbnailSize
        let bands = self.bands
        let small = try whole.withUnsafeBufferPointer { buffer throws(ImagingError) in
            try VipsImageHandle.withBorrowed(
                pixels: buffer.baseAddress!, width: level.width, height: level.height,
                bands: bands, for: .sources
            ) { image throws(ImagingError) in
                let small = try image.thumbnail(size: size)
                return TilePixels(bytes: try small.pixels(), width: small.width, height: small.height)
            }
        }
        do {
            return try encode(small, with: TileEncoder(format: format, quality: options.quality, png: options.png))
        } catch let error as ImagingError {
            throw error
        } catch {
            throw .encoding("\(error)")
        }
    }

    /// The most memory one request for `t` (or the thumbnail, nil) holds while it is
    /// made, estimated before it starts: the tile, four children and their 2×2 canvas per
    /// level made from the level above, and the region libvips computes (with a strip of
    /// the stored level's rows for its loaders' buffers).
    public func estimatedPeakBytes(_ t: TileCoordinate?) -> Int {
        let tileBytes = geometry.tileSize * geometry.tileSize * max(bands, 1)
        var level = t?.level ?? Self.thumbnailLevel(geometry, size: options.thumbnailSize)
        var derived = 0
        if let t, plan[t.level] != nil, storedLevel(for: t) == nil {
            derived = 1
            level += 1
        }
        while level < geometry.maxLevel, plan[level] == nil {
            derived += 1
            level += 1
        }
        let stored =
            plan[level]
            ?? StoredLevel(
                option: nil, value: 0, width: geometry.width, height: geometry.height,
                levelWidth: geometry.width, levelHeight: geometry.height)
        let strip = stored.width * max(bands, 1) * 2 * geometry.tileSize
        var total = tileBytes * (2 + 9 * derived) + 4 * tileBytes + strip
        if t == nil {
            let whole = geometry.level(Self.thumbnailLevel(geometry, size: options.thumbnailSize))
            total += 3 * whole.width * whole.height * max(bands, 1)
        }
        return total
    }

    /// The tile's pixels, made by the level's fixed rule (see the type's comment).
    func pixels(_ t: TileCoordinate) throws -> TilePixels {
        let key = PixelCache.Key(owner: serial, tile: t, denominator: 1)
        if let hit = cache.value(for: key) { return hit }
        return try pixelFlights.run(t) {
            if let hit = self.cache.value(for: key) { return hit }
            let made = try self.make(t)
            self.cache.insert(made, for: key)
            return made
        }
    }

    /// Tiles made so far (each tile's pixels, from the source or the level above), for tests.
    var tilesMade: Int { made.load(ordering: .relaxed) }

    private func make(_ t: TileCoordinate) throws -> TilePixels {
        made.add(1, ordering: .relaxed)
        let size = geometry.tileSize
        let rect = geometry.rectInLevel(t)
        let (x, y, width, height) = (rect.x, rect.y, rect.width, rect.height)
        if let stored = storedLevel(for: t) {
            // Held while the region is read, so that its temporary disk stays counted.
            let level = try image(stored)
            defer { withExtendedLifetime(level) {} }
            let image = level.image
            // libvips writes the region's rows straight into the tile's array.
            var status: Int32 = -1
            let bytes = [UInt8](unsafeUninitializedCapacity: width * height * bands) { buffer, count in
                status = tiler_source_region(
                    image.pointer, Int32(x), Int32(y), Int32(width), Int32(height), buffer.baseAddress, buffer.count)
                count = status == 0 ? buffer.count : 0
            }
            guard status == 0 else { throw ImagingError.libvips(file.scrub(Vips.takeError())) }
            return TilePixels(bytes: bytes, width: width, height: height)
        }
        // The 2×2 area average of the (up to) four tiles of the level above.
        let above = geometry.level(t.level + 1)
        let canvasWidth = min(2 * x + 2 * size, above.width) - 2 * x
        let canvasHeight = min(2 * y + 2 * size, above.height) - 2 * y
        let rowBytes = canvasWidth * bands
        var canvas = [UInt8](repeating: 0, count: rowBytes * canvasHeight)
        for dy in 0..<2 {
            for dx in 0..<2 {
                let child = TileCoordinate(level: t.level + 1, row: 2 * t.row + dy, column: 2 * t.column + dx)
                guard child.row < above.rows, child.column < above.columns else { continue }
                copy(try pixels(child), into: &canvas, rowBytes: rowBytes, x: dx * size, y: dy * size)
            }
        }
        let shrunk = AreaAverage.shrink(canvas, width: canvasWidth, height: canvasHeight, bands: bands)
        precondition(shrunk.width == width && shrunk.height == height, "2×2 of \(canvasWidth)×\(canvasHeight) is not \(width)×\(height)")
        return TilePixels(bytes: shrunk.pixels, width: width, height: height)
    }

    /// The stored level tile `t` is cropped from: its level's, unless the tile lies wholly
    /// in the last row or column that level lacks where it is a pixel short (then, like
    /// any level without one, it is made from the level above, as the cut makes it).
    private func storedLevel(for t: TileCoordinate) -> StoredLevel? {
        guard let stored = plan[t.level] else { return nil }
        let rect = geometry.rectInLevel(t)
        let turned = orientation >= 5 && orientation <= 8
        // Where a stored level is short, autorotation keeps the gap at the right or the
        // bottom: levels it would move to the left or top are not used (see `init`).
        let (width, height) = turned ? (stored.height, stored.width) : (stored.width, stored.height)
        return rect.x < width && rect.y < height ? stored : nil
    }

    private func copy(_ part: TilePixels, into canvas: inout [UInt8], rowBytes: Int, x: Int, y: Int) {
        let partRow = part.width * bands
        part.bytes.withUnsafeBufferPointer { source in
            canvas.withUnsafeMutableBufferPointer { target in
                for row in 0..<part.height {
                    (target.baseAddress! + (y + row) * rowBytes + x * bands)
                        .update(from: source.baseAddress! + row * partRow, count: partRow)
                }
            }
        }
    }

    private func encode(_ pixels: TilePixels, with encoder: TileEncoder) throws -> [UInt8] {
        try pixels.bytes.withUnsafeBufferPointer { buffer in
            try encoder.withEncoded(
                pixels: buffer.baseAddress!, stride: pixels.width * bands, width: pixels.width,
                height: pixels.height, bands: bands
            ) { Array($0) }
        }
    }
}

/// A stored level opened for reading pixels. Unchecked `Sendable`: libvips images are
/// read from any number of threads at once (each computes its own regions), and nothing
/// changes one after it is opened.
final class OpenedLevel: @unchecked Sendable {
    private var handle: VipsImageHandle?
    /// Its share of the spill budget, given back once the image is closed.
    let reservation: SpillBudget.Reservation?

    var image: VipsImageHandle { handle! }

    init(image: VipsImageHandle, reservation: SpillBudget.Reservation?) {
        handle = image
        self.reservation = reservation
    }

    // The image (and its temporary file) goes before the reservation does.
    deinit { handle = nil }
}
