/// A request's `Accept` header (RFC 9110 §12.5.1), for the few answers that come in more
/// than one media type.
public struct AcceptHeader: Sendable {
    /// One media range: `type/subtype`, `type/*` or `*/*`, lowercased, with its weight.
    struct Range: Equatable {
        var type: Substring
        var subtype: Substring
        var quality: Double
    }

    let ranges: [Range]
    /// Whether the request had no `Accept` at all (anything goes, at weight 1).
    let isAbsent: Bool

    /// The most ranges read; a longer list is cut short (the rest weigh nothing).
    static let maximumRanges = 32

    /// Parses a raw `Accept` value; a malformed range (no `type/subtype`, a `*/subtype`,
    /// a weight that is not an RFC 9110 qvalue) is skipped, as if not sent. Commas and
    /// semicolons inside quoted parameter values do not split.
    public init(_ raw: [UInt8]) {
        isAbsent = raw.allSatisfy { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        var ranges: [Range] = []
        for item in Self.split(String(decoding: raw, as: UTF8.self).lowercased()[...], at: ",") {
            guard ranges.count < Self.maximumRanges else { break }
            let parts = Self.split(item, at: ";")
            let names = parts[0].trimmingBlanks.split(separator: "/", omittingEmptySubsequences: false)
            guard names.count == 2, !names[0].isEmpty, !names[1].isEmpty, names[0] != "*" || names[1] == "*" else { continue }
            var quality: Double? = 1
            for parameter in parts.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard pair.count == 2, pair[0].trimmingBlanks == "q" else { continue }
                quality = Self.qvalue(pair[1].trimmingBlanks)
            }
            guard let quality else { continue }
            ranges.append(Range(type: names[0], subtype: names[1], quality: quality))
        }
        self.ranges = ranges
    }

    /// `text` split at `separator` outside double quotes (a backslash escapes the next
    /// character inside them).
    static func split(_ text: Substring, at separator: Character) -> [Substring] {
        var pieces: [Substring] = []
        var start = text.startIndex, i = text.startIndex
        var quoted = false, escaped = false
        while i < text.endIndex {
            let c = text[i]
            if escaped {
                escaped = false
            } else if quoted && c == "\\" {
                escaped = true
            } else if c == "\"" {
                quoted.toggle()
            } else if c == separator && !quoted {
                pieces.append(text[start..<i])
                start = text.index(after: i)
            }
            i = text.index(after: i)
        }
        pieces.append(text[start...])
        return pieces
    }

    /// An RFC 9110 qvalue, `0` to `1` with at most three decimals (`0.5`, `1.000`), or nil.
    static func qvalue(_ text: Substring) -> Double? {
        let bytes = Array(text.utf8)
        guard let first = bytes.first, first == UInt8(ascii: "0") || first == UInt8(ascii: "1") else { return nil }
        if bytes.count == 1 { return Double(first - UInt8(ascii: "0")) }
        guard bytes[1] == UInt8(ascii: "."), bytes.count <= 5 else { return nil }
        let decimals = bytes[2...]
        guard decimals.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
        if first == UInt8(ascii: "1") { return decimals.allSatisfy { $0 == UInt8(ascii: "0") } ? 1 : nil }
        return Double(String(decoding: bytes, as: UTF8.self))
    }

    /// How much the client wants `type/subtype`: the weight of the most specific range
    /// that matches it (`type/subtype`, then `type/*`, then `*/*`), 1 when the request
    /// had no `Accept`, 0 when no range matches.
    public func quality(type: String, subtype: String) -> Double {
        if isAbsent { return 1 }
        var best: (specificity: Int, quality: Double) = (-1, 0)
        for range in ranges {
            let specificity: Int
            if range.type == type && range.subtype == subtype {
                specificity = 2
            } else if range.type == type && range.subtype == "*" {
                specificity = 1
            } else if range.type == "*" {
                specificity = 0
            } else {
                continue
            }
            // Equally specific ranges (the same one sent twice): the higher weight.
            if specificity > best.specificity || (specificity == best.specificity && range.quality > best.quality) {
                best = (specificity, range.quality)
            }
        }
        return best.quality
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs.
    fileprivate var trimmingBlanks: Substring {
        var s = self
        while let c = s.first, c == " " || c == "\t" { s.removeFirst() }
        while let c = s.last, c == " " || c == "\t" { s.removeLast() }
        return s
    }
}
