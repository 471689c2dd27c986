import TilerHTTP

/// What kind of thing a request asked for: the `route` label of the HTTP metrics. A
/// fixed set, so that no path, id or query ever becomes a label value (a scraper's memory
/// stays flat however many distinct URLs are requested).
public enum RouteClass: Int, CaseIterable, Sendable {
    case tile, thumbnail, manifest, list, visible, deepzoom
    case iiifInfo, iiifImage, iiifPresentation
    case viewer, health, metrics, other

    /// The label value.
    public var label: String {
        switch self {
        case .tile: "tile"
        case .thumbnail: "thumbnail"
        case .manifest: "manifest"
        case .list: "list"
        case .visible: "visible"
        case .deepzoom: "deepzoom"
        case .iiifInfo: "iiif_info"
        case .iiifImage: "iiif_image"
        case .iiifPresentation: "iiif_presentation"
        case .viewer: "viewer"
        case .health: "health"
        case .metrics: "metrics"
        case .other: "other"
        }
    }

    /// The class of a request target, from its path alone (the query is ignored), as the
    /// routes would answer it; `other` for anything else. Reads the first four segments at
    /// most; allocates nothing.
    public static func of(target: [UInt8]) -> RouteClass {
        target.withUnsafeBufferPointer { t in
            if let tile = tileFastPath(t) { return tile }
            return classify(path: t)
        }
    }

    /// `/images/ID/tiles/…`, the answer to nearly every request, told in a few instructions:
    /// eight bytes compared as one word, a scan of the id for its slash, six bytes. nil for
    /// anything else (the full classification decides).
    @inline(__always)
    static func tileFastPath(_ t: UnsafeBufferPointer<UInt8>) -> RouteClass? {
        guard t.count > 15, let base = t.baseAddress else { return nil }
        let raw = UnsafeRawPointer(base)
        // "/images/" little-endian.
        guard raw.loadUnaligned(as: UInt64.self) == 0x2F73_6567_616D_692F else { return nil }
        // The id ends at the first `/`, `?` or `#`: looked for eight bytes at a time.
        var i = 8
        while i + 8 <= t.count {
            let found = stopBytes(in: raw.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            if found != 0 {
                i += found.trailingZeroBitCount / 8
                break
            }
            i += 8
        }
        while i < t.count, t[i] != UInt8(ascii: "/"), t[i] != UInt8(ascii: "?"), t[i] != UInt8(ascii: "#") { i += 1 }
        guard i < t.count, t[i] == UInt8(ascii: "/") else { return nil }
        // The id may not be empty nor end with `_files` or `.dzi` for this to be a tile path;
        // "tiles/" after its slash settles it.
        guard i > 8, t.count - i >= 8 else { return nil }
        // "_files" little-endian: the six bytes before the slash (a DeepZoom folder).
        guard raw.loadUnaligned(fromByteOffset: i - 8, as: UInt64.self) >> 16 != 0x7365_6C69_665F else { return nil }
        let next = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x00FF_FFFF_FFFF_FFFF
        // "/tiles/" little-endian, seven bytes.
        return next == 0x002F_7365_6C69_742F ? .tile : nil
    }

    /// The high bit of each byte of `word` (read little-endian) that is `/`, `?` or `#`,
    /// and perhaps of some bytes after the first such one: the lowest bit set is exact.
    @inline(__always)
    static func stopBytes(in word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        @inline(__always) func zeroBytes(_ x: UInt64) -> UInt64 { (x &- ones) & ~x & (ones << 7) }
        return zeroBytes(word ^ (ones &* 0x2F)) | zeroBytes(word ^ (ones &* 0x3F)) | zeroBytes(word ^ (ones &* 0x23))
    }

    static func classify(path t: UnsafeBufferPointer<UInt8>) -> RouteClass {
        // Cuts: the index of the slash before each of the first five segments, then the end.
        var cuts = (0, 0, 0, 0, 0, 0)
        var found = 0
        var end = t.count
        guard end > 0, t[0] == UInt8(ascii: "/") else { return .other }
        for i in 1..<max(1, end) {
            let b = t[i]
            if b == UInt8(ascii: "?") || b == UInt8(ascii: "#") {
                end = i
                break
            }
            if b == UInt8(ascii: "/") {
                found += 1
                switch found {
                case 1: cuts.1 = i
                case 2: cuts.2 = i
                case 3: cuts.3 = i
                case 4: cuts.4 = i
                default: break
                }
            }
        }
        let segments = found + 1  // "/" is one empty segment
        /// The slash before segment `k` (k ≤ 4).
        func cut(_ k: Int) -> Int {
            switch k {
            case 0: cuts.0
            case 1: cuts.1
            case 2: cuts.2
            case 3: cuts.3
            default: cuts.4
            }
        }
        /// Segment `k` (k ≤ 3; empty past the last).
        func segment(_ k: Int) -> UnsafeBufferPointer<UInt8> {
            guard k < segments else { return UnsafeBufferPointer(rebasing: t[0..<0]) }
            let start = cut(k) + 1
            let stop = k + 1 <= found ? cut(k + 1) : end
            return UnsafeBufferPointer(rebasing: t[start..<max(start, stop)])
        }
        func equals(_ s: UnsafeBufferPointer<UInt8>, _ word: StaticString) -> Bool {
            s.count == word.utf8CodeUnitCount && (0..<s.count).allSatisfy { s[$0] == word.utf8Start[$0] }
        }
        func hasSuffix(_ s: UnsafeBufferPointer<UInt8>, _ word: StaticString) -> Bool {
            let n = word.utf8CodeUnitCount
            return s.count > n && (0..<n).allSatisfy { s[s.count - n + $0] == word.utf8Start[$0] }
        }
        func hasPrefix(_ s: UnsafeBufferPointer<UInt8>, _ word: StaticString) -> Bool {
            let n = word.utf8CodeUnitCount
            return s.count >= n && (0..<n).allSatisfy { s[$0] == word.utf8Start[$0] }
        }
        let first = segment(0)
        if first.isEmpty { return segments == 1 ? .viewer : .other }
        if equals(first, "images") {
            if segments == 1 || (segments == 2 && segment(1).isEmpty) { return .list }
            let id = segment(1)
            if segments == 2 { return hasSuffix(id, ".dzi") ? .deepzoom : .manifest }
            if hasSuffix(id, "_files") { return .deepzoom }
            let part = segment(2)
            if equals(part, "tiles") { return .tile }
            if equals(part, "visible") { return .visible }
            if hasPrefix(part, "thumbnail") { return .thumbnail }
            return .other
        }
        if equals(first, "iiif") {
            guard segments >= 3 else { return .other }
            if segments == 3 {
                return hasSuffix(segment(2), "collection.json") || equals(segment(2), "collection.json")
                    ? .iiifPresentation : .iiifInfo
            }
            if segments == 4 {
                let last = segment(3)
                if equals(last, "info.json") { return .iiifInfo }
                if equals(last, "manifest.json") || equals(segment(2), "collection") { return .iiifPresentation }
                return .other
            }
            if equals(segment(2), "collection") { return .iiifPresentation }
            if segments == 5 && equals(segment(2), "albums") && equals(segment(4), "collection.json") {
                return .iiifPresentation
            }
            return .iiifImage
        }
        if equals(first, "albums") { return segments == 1 ? .list : .other }
        if equals(first, "healthz") || equals(first, "readyz") { return .health }
        if equals(first, "metrics") { return .metrics }
        if equals(first, "viewer") || equals(first, "index.html") || equals(first, "embed") { return .viewer }
        return .other
    }
}
