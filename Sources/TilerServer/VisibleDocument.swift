import Glibc
import TilerCore
import TilerHTTP

/// The `/images/ID/visible` answer as JSON bytes.
///
/// This is the one document the server builds per request, and a viewport lists around a
/// hundred tiles, so it is written in a single pass into an array sized up front from the
/// largest each tile can take. A tile's numbers depend only on its row or only on its
/// column, so each row's and each column's pieces are formatted once (into a temporary
/// buffer) and a tile is seven copies of them. The tiles come nearest first straight from
/// the plan (`VisibleTilesPlan.forEachOffsetInDistanceOrder`: no list of tiles, no sort),
/// so the answer's bytes are the only allocation. There is no per-byte capacity or
/// uniqueness check, and no `String` is created. The bytes are the same as `JSONWriter`
/// would produce for the same fields in the same order.
///
/// A piece is copied 16 bytes at a time (`putPiece`), not with `memcpy`: a piece is 1 to
/// about 60 bytes (more with a long `linkPrefix`), and a call to `memcpy` cost more than
/// the copy. Each chunk may read and write up to 15 bytes past the piece's end, so the
/// scratch buffer and the answer both have `Chunk.slack` bytes to spare after their last
/// byte; what a chunk writes past a piece's end is overwritten by the next piece, or lies
/// past the answer's end.
///
/// `linkPrefix` is what every tile URL starts with, JSON-escaped: the base URL
/// (`--base-url`) or nothing, for root-relative URLs (`PublicAddress.linkPrefix`).
func visibleDocument(_ answer: VisibleTilesPlan, of pyramid: Pyramid, linkPrefix: [UInt8] = []) -> [UInt8] {
    // Everything but the tiles depends only on the pyramid and the level: made once per
    // pyramid (`VisiblePieces`), so an answer formats nothing but its tiles' numbers.
    let pieces = pyramid.visiblePieces
    let head = pieces.heads[answer.level.level]
    let level = pieces.levelDigits[answer.level.level]
    let span = pieces.spanDigits[answer.level.level]
    let urlStart = pieces.urlStart, urlEnd = pieces.urlEnd

    let fixed =
        Piece.level.count + Piece.row.count + Piece.column.count + Piece.url.count + linkPrefix.count
        + urlStart.count + 2 + urlEnd.count
        + Piece.y.count + Piece.width.count + Piece.height.count + 2
    // 10 integers per tile (3 in the URL), each at most 20 bytes.
    let perTile = fixed + 10 * 20
    let capacity = head.count + answer.count * perTile + 2
    let allocated = capacity + Chunk.slack
    // The full tile span, which every tile but those on the right and bottom edges has
    // as its size (written from `span`).
    let step = pyramid.geometry.tileSize * answer.level.downscale

    // A tile's bytes are seven pieces, four that depend only on its row and three only on
    // its column, so each row's and each column's are formatted once, into `scratch`, and
    // a tile is seven copies:
    //   {"level":L,"row":R,"column":  C  ,"url":"PREFIX/images/ID/tiles/L/R/
    //   C.EXT","x":X  ,"y":Y,"width":  W  ,"height":H}
    let rowCount = answer.rowCount, columnCount = answer.columnCount
    let rowBytes =
        2 * Piece.level.count + Piece.row.count + Piece.column.count + Piece.url.count + linkPrefix.count
        + urlStart.count + Piece.y.count + Piece.width.count + Piece.height.count + 2 * level.count + 6 * 20 + 4
    let columnBytes = urlEnd.count + 5 * 20
    // Where each piece is in `scratch`, and its length: four per row, three per column.
    let pieceCount = 4 * rowCount + 3 * columnCount
    let scratchBytes = rowCount * rowBytes + columnCount * columnBytes

    return [UInt8](unsafeUninitializedCapacity: allocated) { buffer, initialized in
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: scratchBytes + Chunk.slack) { scratch in
            withUnsafeTemporaryAllocation(of: ScratchPiece.self, capacity: pieceCount) { pieces in
                let s = scratch.baseAddress!
                let at = pieces.baseAddress!
                var q = s
                func mark(_ k: Int, _ write: (inout UnsafeMutablePointer<UInt8>) -> Void) {
                    let start = q
                    write(&q)
                    (at + k).initialize(to: ScratchPiece(start: start, count: q - start))
                }
                for i in 0..<rowCount {
                    let r = answer.rowSpan(i)
                    var rowStart = q, rowEnd = q
                    mark(4 * i) { q in
                        q.put(Piece.level); q.put(level)
                        q.put(Piece.row)
                        rowStart = q
                        q.putDecimal(r.row)
                        rowEnd = q
                        q.put(Piece.column)
                    }
                    let rowDigits = UnsafeBufferPointer(start: rowStart, count: rowEnd - rowStart)
                    mark(4 * i + 1) { q in
                        q.put(Piece.url)
                        if linkPrefix.count > 0 { q.put(linkPrefix) }
                        q.put(urlStart)
                        q.put(level); q.put(UInt8(ascii: "/"))
                        q.put(rowDigits); q.put(UInt8(ascii: "/"))
                    }
                    mark(4 * i + 2) { q in
                        q.put(Piece.y); q.putDecimal(r.y)
                        q.put(Piece.width)
                    }
                    mark(4 * i + 3) { q in
                        q.put(Piece.height)
                        if r.height == step { q.put(span) } else { q.putDecimal(r.height) }
                        q.put(UInt8(ascii: "}"))
                    }
                }
                let c0 = 4 * rowCount
                for j in 0..<columnCount {
                    let c = answer.columnSpan(j)
                    mark(c0 + 3 * j) { q in q.putDecimal(c.column) }
                    mark(c0 + 3 * j + 1) { q in
                        q.putDecimal(c.column)
                        q.put(urlEnd); q.putDecimal(c.x)
                    }
                    mark(c0 + 3 * j + 2) { q in
                        if c.width == step { q.put(span) } else { q.putDecimal(c.width) }
                    }
                }
                precondition(q - s <= scratchBytes)

                let base = buffer.baseAddress!
                var p = base
                p.put(head)
                var first = true
                answer.forEachOffsetInDistanceOrder { i, j in
                    var q = p  // in a register while the tile is written
                    if !first { q.put(UInt8(ascii: ",")) }
                    first = false
                    let r = at + 4 * i, c = at + c0 + 3 * j
                    q.putPiece(r[0]); q.putPiece(c[0]); q.putPiece(r[1]); q.putPiece(c[1])
                    q.putPiece(r[2]); q.putPiece(c[2]); q.putPiece(r[3])
                    p = q
                }
                p.put(UInt8(ascii: "]"))
                p.put(UInt8(ascii: "}"))
                initialized = p - base
                precondition(initialized <= capacity)
                at.deinitialize(count: pieceCount)
            }
        }
    }
}

/// A piece of a `/visible` answer formatted into the scratch buffer.
private struct ScratchPiece {
    let start: UnsafeMutablePointer<UInt8>
    let count: Int
}

/// The parts of every `/visible` answer of one pyramid that do not depend on the
/// viewport, JSON-escaped and formatted once when the pyramid is loaded.
struct VisiblePieces: Sendable {
    /// Per level: `{"id":"ID","level":L,"scale":S,"tileSize":T,"columns":C,"rows":R,"tiles":[`.
    let heads: [[UInt8]]
    /// Per level: the level number, and the full tile span in image pixels, in decimal.
    let levelDigits: [[UInt8]]
    let spanDigits: [[UInt8]]
    /// `/images/ID/tiles/` (JSON-escaped, after `,"url":"` and the link prefix) and
    /// `.EXT","x":`.
    let urlStart: [UInt8]
    let urlEnd: [UInt8]

    init(id: PyramidID, geometry: PyramidGeometry, format: TileFormat) {
        var heads: [[UInt8]] = [], levels: [[UInt8]] = [], spans: [[UInt8]] = []
        for l in geometry.levels {
            var head = JSONWriter(capacity: 256)
            head.beginObject()
            head.field("id", id.rawValue)
            head.field("level", l.level)
            head.field("scale", geometry.scale(of: l.level))
            head.field("tileSize", geometry.tileSize)
            head.field("columns", l.columns)
            head.field("rows", l.rows)
            head.key("tiles")
            head.beginArray()
            heads.append(head.bytes)
            levels.append(decimalBytes(l.level))
            spans.append(decimalBytes(geometry.tileSize * l.downscale))
        }
        self.heads = heads
        levelDigits = levels
        spanDigits = spans
        var prefix = JSONWriter(capacity: 64)
        prefix.stringValue { $0.appendEscaped("/images/\(id)/tiles/") }
        urlStart = Array(prefix.bytes.dropFirst().dropLast())
        var ext = JSONWriter(capacity: 16)
        ext.stringValue { $0.appendEscaped("." + format.fileExtension) }
        urlEnd = Array(ext.bytes.dropFirst()) + Array(#","x":"#.utf8)
    }
}

private func decimalBytes(_ v: Int) -> [UInt8] {
    var w = JSONWriter(capacity: 24)
    w.appendDecimal(v)
    return w.bytes
}

/// The fixed pieces between a tile's values.
private enum Piece {
    static let level: StaticString = #"{"level":"#
    static let row: StaticString = #","row":"#
    static let column: StaticString = #","column":"#
    static let url: StaticString = #","url":""#
    static let y: StaticString = #","y":"#
    static let width: StaticString = #","width":"#
    static let height: StaticString = #","height":"#
}

extension StaticString {
    fileprivate var count: Int { utf8CodeUnitCount }
}

extension UnsafeMutablePointer<UInt8> {
    @inline(__always)
    fileprivate mutating func put(_ byte: UInt8) {
        pointee = byte
        self += 1
    }

    @inline(__always)
    fileprivate mutating func put(_ s: StaticString) {
        memcpy(self, s.utf8Start, s.utf8CodeUnitCount)
        self += s.utf8CodeUnitCount
    }

    @inline(__always)
    fileprivate mutating func put(_ bytes: UnsafeBufferPointer<UInt8>) {
        memcpy(self, bytes.baseAddress!, bytes.count)
        self += bytes.count
    }

    @inline(__always)
    fileprivate mutating func put(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { put($0) }
    }

    /// A piece formatted earlier, copied a `Chunk` at a time: reads and writes up to
    /// `Chunk.slack` bytes past the piece's end and past `self`'s new position (see
    /// `visibleDocument`).
    @inline(__always)
    fileprivate mutating func putPiece(_ piece: ScratchPiece) {
        var from = UnsafeRawPointer(piece.start), to = UnsafeMutableRawPointer(self)
        let end = to + piece.count
        repeat {
            to.storeBytes(of: from.loadUnaligned(as: Chunk.Bytes.self), as: Chunk.Bytes.self)
            from += Chunk.size
            to += Chunk.size
        } while to < end
        self += piece.count
    }

    /// `v` in decimal (at most 20 bytes), two digits at a time from the last.
    @inline(__always)
    fileprivate mutating func putDecimal(_ v: Int) {
        if v < 0 { put(UInt8(ascii: "-")) }
        var m = v.magnitude
        var digits = 1
        var limit: UInt = 10
        while m >= limit && digits < 20 {
            digits += 1
            if limit > UInt.max / 10 { break }
            limit *= 10
        }
        var q = self + digits
        self = q
        DigitPairs.table.withUnsafeBufferPointer { pairs in
            while m >= 100 {
                let r = Int(m % 100)
                m /= 100
                q -= 2
                q[0] = pairs[2 * r]
                q[1] = pairs[2 * r + 1]
            }
            if m >= 10 {
                q -= 2
                q[0] = pairs[2 * Int(m)]
                q[1] = pairs[2 * Int(m) + 1]
            } else {
                q -= 1
                q[0] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: m)
            }
        }
    }
}

/// What `putPiece` copies at once: 16 bytes, one vector register.
private enum Chunk {
    typealias Bytes = SIMD16<UInt8>
    // Computed, not stored: a constant the compiler folds, with no lazy global to check.
    static var size: Int { MemoryLayout<Bytes>.size }
    /// The bytes a copy by chunks may read or write past the end of what it copies.
    static var slack: Int { size }
}

/// "00" "01" … "99": two decimal digits per lookup.
private enum DigitPairs {
    static let table: [UInt8] = (0..<100).flatMap { [UInt8(ascii: "0") + UInt8($0 / 10), UInt8(ascii: "0") + UInt8($0 % 10)] }
}
