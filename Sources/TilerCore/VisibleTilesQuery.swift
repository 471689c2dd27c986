/// The question a client asks: which tiles do I need for this viewport at this zoom?
public struct VisibleTilesQuery: Sendable, Hashable {
    /// The viewport in full-resolution image pixels.
    public let viewport: Viewport
    /// Display pixels per full-resolution pixel.
    public let scale: Double
    /// Extra rings of neighbouring tiles to list for prefetching.
    public let margin: Int
    /// Whether the image repeats horizontally with period `width` (panoramas).
    public let wrapX: Bool

    /// Coordinates beyond ±2^50 pixels are refused: no image is that large, and past it
    /// `Double` can no longer place a tile to the pixel.
    public static let coordinateLimit = Double(1 << 50)
    /// The largest margin accepted.
    public static let maximumMargin = 64

    public init(viewport: Viewport, scale: Double, margin: Int = 0, wrapX: Bool = false) throws(VisibleTilesError) {
        let v = viewport
        for (name, value) in [("x", v.x), ("y", v.y), ("width", v.width), ("height", v.height), ("scale", scale)] {
            guard value.isFinite else { throw .invalidParameter(name, "must be a finite number") }
            guard abs(value) <= Self.coordinateLimit else { throw .invalidParameter(name, "is out of range") }
        }
        guard v.width > 0 else { throw .invalidParameter("width", "must be positive") }
        guard v.height > 0 else { throw .invalidParameter("height", "must be positive") }
        guard scale > 0 else { throw .invalidParameter("scale", "must be positive") }
        guard (0...Self.maximumMargin).contains(margin) else {
            throw .invalidParameter("margin", "must be an integer in 0...\(Self.maximumMargin)")
        }
        self.viewport = viewport
        self.scale = scale
        self.margin = margin
        self.wrapX = wrapX
    }

    /// Parses the query string of `/images/ID/visible`: `x`, `y`, `width`, `height`,
    /// `scale` (required), `margin` (default 0) and `wrap` (`x` or absent).
    /// Items are already percent-decoded `(name, value)` pairs; unknown names are ignored,
    /// a repeated name is an error.
    public init(queryItems: [(name: String, value: String)]) throws(VisibleTilesError) {
        var values: [String: String] = [:]
        for item in queryItems {
            guard values[item.name] == nil else { throw .invalidParameter(item.name, "is given more than once") }
            values[item.name] = item.value
        }
        func number(_ name: String) throws(VisibleTilesError) -> Double {
            guard let text = values[name] else { throw .missingParameter(name) }
            guard let value = parseDecimal(text) else {
                throw .invalidParameter(name, "is not a number: '\(text.prefix(32))'")
            }
            return value
        }
        let viewport = Viewport(
            x: try number("x"), y: try number("y"),
            width: try number("width"), height: try number("height"))
        let scale = try number("scale")
        var margin = 0
        if let text = values["margin"] {
            guard let m = Int(text), m >= 0, m <= Self.maximumMargin else {
                throw .invalidParameter("margin", "must be an integer in 0...\(Self.maximumMargin)")
            }
            margin = m
        }
        var wrapX = false
        if let text = values["wrap"] {
            switch text {
            case "x": wrapX = true
            case "", "none": wrapX = false
            default: throw .invalidParameter("wrap", "must be 'x'")
            }
        }
        try self.init(viewport: viewport, scale: scale, margin: margin, wrapX: wrapX)
    }
}

extension VisibleTilesQuery {
    /// The same query as `init(queryItems:)` would build from `query` (the bytes after `?`),
    /// read straight from the bytes: no `String` per item, no dictionary. Returns nil for
    /// anything off the common path (a `%` escape, an unknown or repeated name, a value that
    /// is not a plain number), so that the caller decodes the items and asks
    /// `init(queryItems:)`, which gives the exact answer or error. A query it does read
    /// still goes through `init(viewport:scale:margin:wrapX:)` and its checks.
    public static func parsingCommonForm(_ query: ArraySlice<UInt8>) throws(VisibleTilesError) -> VisibleTilesQuery? {
        var numbers: (x: Double, y: Double, width: Double, height: Double, scale: Double) = (0, 0, 0, 0, 0)
        var seen: UInt8 = 0
        var margin = 0
        var wrapX = false
        var i = query.startIndex
        let end = query.endIndex
        while i < end {
            var partEnd = i
            while partEnd < end && query[partEnd] != UInt8(ascii: "&") { partEnd += 1 }
            defer { i = partEnd + 1 }
            if partEnd == i { continue }
            var eq = i
            while eq < partEnd && query[eq] != UInt8(ascii: "=") { eq += 1 }
            guard eq < partEnd else { return nil }
            let name = query[i..<eq], value = query[(eq + 1)..<partEnd]
            guard !value.isEmpty, value.count <= 64, !value.contains(UInt8(ascii: "%")),
                !name.contains(UInt8(ascii: "%"))
            else { return nil }
            let bit: UInt8
            switch name.count {
            case 1 where name.first == UInt8(ascii: "x"): bit = 1
            case 1 where name.first == UInt8(ascii: "y"): bit = 2
            case 5 where name.matches("width"): bit = 4
            case 6 where name.matches("height"): bit = 8
            case 5 where name.matches("scale"): bit = 16
            case 6 where name.matches("margin"): bit = 32
            case 4 where name.matches("wrap"): bit = 64
            default: return nil
            }
            guard seen & bit == 0 else { return nil }
            seen |= bit
            switch bit {
            case 32:
                guard value.count <= 2, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
                margin = value.reduce(0) { $0 * 10 + Int($1 - 0x30) }
                guard margin <= maximumMargin else { return nil }
            case 64:
                guard value.count == 1, value.first == UInt8(ascii: "x") else { return nil }
                wrapX = true
            default:
                // The common form straight from the bytes; anything else as the item parser
                // reads it (a short value makes a small, inline String).
                guard let d = plainDecimal(value) ?? parseDecimal(String(decoding: value, as: UTF8.self))
                else { return nil }
                switch bit {
                case 1: numbers.x = d
                case 2: numbers.y = d
                case 4: numbers.width = d
                case 8: numbers.height = d
                default: numbers.scale = d
                }
            }
        }
        guard seen & 31 == 31 else { return nil }
        return try VisibleTilesQuery(
            viewport: Viewport(x: numbers.x, y: numbers.y, width: numbers.width, height: numbers.height),
            scale: numbers.scale, margin: margin, wrapX: wrapX)
    }
}

extension ArraySlice<UInt8> {
    /// Whether these are `name`'s bytes (`elementsEqual`, without the generic iterators,
    /// which cost hundreds of instructions per query name).
    @inline(__always)
    fileprivate func matches(_ name: StaticString) -> Bool {
        guard count == name.utf8CodeUnitCount else { return false }
        var p = name.utf8Start
        for byte in self {
            guard byte == p.pointee else { return false }
            p += 1
        }
        return true
    }
}
