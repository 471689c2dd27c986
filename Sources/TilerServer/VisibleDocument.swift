import Glibc
import TilerCore
import TilerHTTP

/// The `/images/ID/visible` answer as JSON bytes.
///
/// This is the one document the server builds per request, and a viewport lists around a
/// hundred tiles, so it is written in a single pass into an array sized up front from the
/// largest each tile can take: every fixed piece is copied with `memcpy`, and every number
/// is formatted in place. There is no per-byte capacity or uniqueness check, and no
/// `String` is created. The bytes are the same as `JSONWriter` would produce for the
/// same fields in the same order.
func visibleDocument(_ answer: VisibleTiles, of pyramid: Pyramid) -> [UInt8] {
    // Everything up to the first tile, through the generic writer (a handful of fields).
    var head = JSONWriter(capacity: 256)
    head.beginObject()
    head.field("id", pyramid.id.rawValue)
    head.field("level", answer.level.level)
    head.field("scale", answer.scale)
    head.field("tileSize", pyramid.geometry.tileSize)
    head.field("columns", answer.level.columns)
    head.field("rows", answer.level.rows)
    head.key("tiles")
    head.beginArray()

    // `"url":"` + the escaped `/images/ID/tiles/` prefix, and `.EXT","x":` after it.
    var prefix = JSONWriter(capacity: 64)
    prefix.stringValue { $0.appendEscaped("/images/\(pyramid.id)/tiles/") }
    let urlStart = Array(#","url":""#.utf8) + prefix.bytes.dropFirst().dropLast()
    var ext = JSONWriter(capacity: 16)
    ext.stringValue { $0.appendEscaped("." + pyramid.manifest.format.fileExtension) }
    let urlEnd = Array(ext.bytes.dropFirst()) + Array(#","x":"#.utf8)

    let fixed = Piece.level.count + Piece.row.count + Piece.column.count + urlStart.count + 2 + urlEnd.count
        + Piece.y.count + Piece.width.count + Piece.height.count + 2
    // 10 integers per tile (3 in the URL), each at most 20 bytes.
    let perTile = fixed + 10 * 20
    let capacity = head.bytes.count + answer.tiles.count * perTile + 2

    return [UInt8](unsafeUninitializedCapacity: capacity) { buffer, initialized in
        let base = buffer.baseAddress!
        var p = base
        p.put(head.bytes)
        urlStart.withUnsafeBufferPointer { urlStart in
            urlEnd.withUnsafeBufferPointer { urlEnd in
                for (i, t) in answer.tiles.enumerated() {
                    let c = t.coordinate
                    if i > 0 { p.put(UInt8(ascii: ",")) }
                    p.put(Piece.level); p.putDecimal(c.level)
                    p.put(Piece.row); p.putDecimal(c.row)
                    p.put(Piece.column); p.putDecimal(c.column)
                    p.put(urlStart)
                    p.putDecimal(c.level); p.put(UInt8(ascii: "/"))
                    p.putDecimal(c.row); p.put(UInt8(ascii: "/"))
                    p.putDecimal(c.column)
                    p.put(urlEnd); p.putDecimal(t.x)
                    p.put(Piece.y); p.putDecimal(t.y)
                    p.put(Piece.width); p.putDecimal(t.width)
                    p.put(Piece.height); p.putDecimal(t.height)
                    p.put(UInt8(ascii: "}"))
                }
            }
        }
        p.put(UInt8(ascii: "]"))
        p.put(UInt8(ascii: "}"))
        initialized = p - base
        precondition(initialized <= capacity)
    }
}

/// The fixed pieces between a tile's values.
private enum Piece {
    static let level: StaticString = #"{"level":"#
    static let row: StaticString = #","row":"#
    static let column: StaticString = #","column":"#
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

    /// `v` in decimal (at most 20 bytes), written backwards from its last digit.
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
        repeat {
            q -= 1
            q.pointee = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: m % 10)
            m /= 10
        } while m > 0
    }
}
