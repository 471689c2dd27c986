import Testing
import TilerCore
import TilerTestSupport

/// Natural order: digit runs by value, letters without case, ties by bytes; checked on
/// generated names against an independent sort of the same rule.
@Suite struct NaturalOrderTests {
    static func sorted(_ names: [String]) -> [String] {
        names.map { (key: NaturalSortKey($0), name: $0) }.sorted(by: NaturalSortKey.areInOrder).map(\.name)
    }

    @Test func namesAsPeopleSortThem() {
        #expect(Self.sorted(["Bridge_1", "Bridge_10", "Bridge_11", "Bridge_2"]) == ["Bridge_1", "Bridge_2", "Bridge_10", "Bridge_11"])
        #expect(Self.sorted(["b", "B", "a", "C", "A"]) == ["A", "a", "B", "b", "C"])
        #expect(Self.sorted(["img10", "img2", "Img1", "img"]) == ["img", "Img1", "img2", "img10"])
        #expect(Self.sorted(["a10b2", "a10b10", "a9b99", "a10b"]) == ["a9b99", "a10b", "a10b2", "a10b10"])
        #expect(Self.sorted(["x007", "x7", "x08", "x6"]) == ["x6", "x007", "x7", "x08"], "equal values: by bytes")
        #expect(Self.sorted(["a1", "aa", "a", "a-1"]) == ["a", "a1", "a-1", "aa"], "a number before any other character")
        #expect(
            Self.sorted(["99999999999999999999999", "100000000000000000000000", "2"]) == [
                "2", "99999999999999999999999", "100000000000000000000000",
            ])
        #expect(Self.sorted(["Été 2", "été 10", "ete 3"]) == ["ete 3", "Été 2", "été 10"])
    }

    /// Generated names (a prefix, a number, a suffix, in random case) sort as the rule
    /// says: by the prefix without case, then the number's value, then the suffix.
    @Test func generatedNamesFollowTheRule() {
        var rng = SplitMix(seed: 34)
        let prefixes = ["photo", "Photo", "scan", "SCAN", "img_", "map-"]
        var names: [(name: String, prefix: String, number: Int, suffix: String)] = []
        for _ in 0..<500 {
            let prefix = prefixes[Int(rng.next() % UInt64(prefixes.count))]
            let number = Int(rng.next() % 2000)
            let zeros = String(repeating: "0", count: Int(rng.next() % 3))
            let suffix = ["", "a", "b", "_final"][Int(rng.next() % 4)]
            names.append(("\(prefix)\(zeros)\(number)\(suffix)", prefix.lowercased(), number, suffix))
        }
        let byRule = names.sorted {
            ($0.prefix, $0.number, $0.suffix) < ($1.prefix, $1.number, $1.suffix)
        }
        let got = Self.sorted(names.map(\.name))
        for (g, r) in zip(got, byRule) {
            let parsed = names.first { $0.name == g }!
            #expect(parsed.prefix == r.prefix && parsed.number == r.number && parsed.suffix == r.suffix, "\(g) where \(r.name)")
        }
    }
}
