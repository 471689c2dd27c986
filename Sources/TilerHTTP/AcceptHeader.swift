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

    /// Parses a raw `Accept` value; a malformed range is skipped, as if not sent.
    public init(_ raw: [UInt8]) {
        isAbsent = raw.allSatisfy { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        var ranges: [Range] = []
        let text = String(decoding: raw, as: UTF8.self).lowercased()
        for item in text.split(separator: ",").prefix(Self.maximumRanges) {
            let parts = item.split(separator: ";")
            guard let media = parts.first?.trimmingBlanks else { continue }
            let names = media.split(separator: "/", omittingEmptySubsequences: false)
            guard names.count == 2, !names[0].isEmpty, !names[1].isEmpty, names[0] != "*" || names[1] == "*" else { continue }
            var quality = 1.0
            for parameter in parts.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1)
                guard pair.count == 2, pair[0].trimmingBlanks == "q" else { continue }
                // RFC 9110 qvalue: 0 to 1, three decimals at most; anything else is 0.
                let q = pair[1].trimmingBlanks
                guard q.count <= 5, let value = Double(q), (0...1).contains(value) else {
                    quality = 0
                    continue
                }
                quality = value
            }
            ranges.append(Range(type: names[0], subtype: names[1], quality: quality))
        }
        self.ranges = ranges
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
