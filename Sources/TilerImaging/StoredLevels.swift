import TilerCore

/// A level of a source file as libvips opens it: the file itself (`option` nil), a TIFF
/// `page` or `subifd`, or a JPEG `shrink`; `width × height` as stored, and
/// `levelWidth × levelHeight` the size of the pyramid's level it is (before
/// autorotation), which its last column or row is repeated to fill.
struct StoredLevel: Sendable, Hashable {
    let option: String?
    let value: Int
    let width: Int
    let height: Int
    var levelWidth: Int
    var levelHeight: Int
    /// The temporary disk libvips takes to read regions of it (0 for a tiled TIFF).
    var spill = 0
}

/// Which of a pyramid's levels the levels a file stores are (`SourcePyramid`): pure
/// arithmetic on sizes and the EXIF orientation, no file opened.
struct StoredLevels {
    let geometry: PyramidGeometry
    let orientation: ExifOrientation
    /// The file's full-resolution size as stored (before autorotation).
    let width: Int
    let height: Int

    /// The stored level `w × h` (named by `option` = `value`) as level `maxLevel - k`,
    /// with that `k`: nil when its size (after autorotation, within one pixel: TIFF
    /// pyramids and libvips' shrink-on-load round down where the geometry rounds up) is no
    /// level's, or when its pixel grid is not the level's.
    ///
    /// Autorotation reverses the stored x axis in orientations 2, 3, 7 and 8, and the y
    /// axis in 3, 4, 6 and 7. Pixel i of a level stored 2^k smaller covers the source's
    /// pixels from i·2^k on, counted from the stored left (top) edge, while the pyramid's
    /// levels count from the turned image's: along a reversed axis the two grids agree only
    /// when the source's size is a multiple of 2^k (else every pixel is shifted by the
    /// remainder). Such a level is not used.
    func match(_ option: String, _ value: Int, width w: Int, height h: Int) -> (k: Int, level: StoredLevel)? {
        let (tw, th) = orientation.swapsAxes ? (h, w) : (w, h)
        for k in 1...max(1, geometry.maxLevel) where k <= geometry.maxLevel {
            let level = geometry.level(geometry.maxLevel - k)
            guard abs(level.width - tw) <= 1, abs(level.height - th) <= 1 else { continue }
            guard isAligned(k) else { return nil }
            let (lw, lh) = orientation.swapsAxes ? (level.height, level.width) : (level.width, level.height)
            return (k, StoredLevel(option: option, value: value, width: w, height: h, levelWidth: max(w, lw), levelHeight: max(h, lh)))
        }
        return nil
    }

    private func isAligned(_ k: Int) -> Bool {
        (!orientation.reversesX || width % (1 << k) == 0) && (!orientation.reversesY || height % (1 << k) == 0)
    }

    /// Per level number, coarsest first: the stored level it is cropped from, or nil when
    /// it is made from the level above. `stored` is keyed by `k` (0: the file itself).
    /// Small stored levels are not used: a JPEG-compressed page of a few hundred pixels
    /// differs from the area average by more than a big one (3.8 mean absolute difference
    /// at 187 px, 1.3 at 1500 px, with libvips' default quality 75), while making such a
    /// level from the one above costs a few tiles.
    func plan(_ stored: [Int: StoredLevel]) -> [StoredLevel?] {
        let smallest = Self.smallestStoredSide(tileSize: geometry.tileSize)
        return geometry.levelNumbers.map { level in
            let k = geometry.maxLevel - level
            guard let found = stored[k], k == 0 || max(found.width, found.height) >= smallest else { return nil }
            return found
        }
    }

    /// The longest side a stored level below full resolution must have to be used:
    /// four tiles.
    static func smallestStoredSide(tileSize: Int) -> Int { 4 * tileSize }
}

/// An EXIF orientation, 1...8: how the stored pixels are turned to stand upright.
struct ExifOrientation: Sendable, Hashable {
    let value: Int

    /// `value`, or 1 (as stored) for anything outside 1...8.
    init(_ value: Int) {
        self.value = (1...8).contains(value) ? value : 1
    }

    /// Orientations 5-8 turn by a quarter: width and height swap.
    var swapsAxes: Bool { value >= 5 }
    /// The stored x axis runs right to left once upright (2, 3, 7, 8).
    var reversesX: Bool { [2, 3, 7, 8].contains(value) }
    /// The stored y axis runs bottom to top once upright (3, 4, 6, 7).
    var reversesY: Bool { [3, 4, 6, 7].contains(value) }
    /// Orientations 3-8 cannot stream top to bottom: the image must be read with random
    /// access.
    var needsRandomAccess: Bool { value >= 3 }

    /// The upright size of an image stored `width × height`.
    func upright(width: Int, height: Int) -> (width: Int, height: Int) {
        swapsAxes ? (height, width) : (width, height)
    }
}

extension CutOptions {
    /// The orientation a cut applies to an image whose EXIF says `stored`: none without
    /// `autorotate`.
    func orientation(stored: Int) -> ExifOrientation { ExifOrientation(autorotate ? stored : 1) }

    /// Refuses an image of more than `maxPixels` pixels, from its header, before any
    /// pixel is decoded: the check `tiler cut` and `--sources` share.
    func checkPixels(width: Int, height: Int) throws(CutError) {
        let (pixels, overflow) = width.multipliedReportingOverflow(by: height)
        if overflow || pixels > maxPixels { throw .tooManyPixels(width: width, height: height, limit: maxPixels) }
    }

    /// The pyramid of an upright image `width × height` in these options' tiles; an
    /// image too large for one is refused (`unsupportedSize`).
    func geometry(width: Int, height: Int) throws(CutError) -> PyramidGeometry {
        do {
            return try PyramidGeometry(width: width, height: height, tileSize: tileSize)
        } catch {
            throw .unsupportedSize(error.description)
        }
    }
}
