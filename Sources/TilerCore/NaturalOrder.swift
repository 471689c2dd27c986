/// The order people expect of names (`/images`, albums): a run of digits counts by its
/// value, so `img2` comes before `img10`, and letters compare without case, so `bridge`
/// and `Bridge` sit together rather than every capital before every small letter.
///
/// A key is made once per name (a listing of 20,000 is sorted by comparing arrays of
/// numbers, not by folding case in each comparison): each letter is its lowercase Unicode
/// scalar, raised above the digits' codes; each run of ASCII digits is a marker (below
/// every letter, so `a1` comes before `aa`), the count of its digits without leading zeros,
/// then those digits. Names whose keys are equal (`img01` and `img1`, `A` and `a`) are
/// ordered by their bytes (`NaturalSortKey.areInOrder`), so the order is total.
public struct NaturalSortKey: Sendable, Hashable, Comparable {
    private let units: [UInt32]

    /// Below every letter: a digit run starts here.
    private static let numberMarker: UInt32 = 0x10
    /// Letters (lowercase scalars) start here.
    private static let letterBase: UInt32 = 0x100

    public init(_ name: String) {
        var units: [UInt32] = []
        units.reserveCapacity(name.utf8.count + 4)
        var digits: [UInt32] = []
        func endDigits() {
            guard !digits.isEmpty else { return }
            let significant = digits.drop { $0 == 0 }
            units.append(Self.numberMarker)
            units.append(UInt32(significant.count))
            units.append(contentsOf: significant)
            digits.removeAll(keepingCapacity: true)
        }
        for scalar in name.lowercased().unicodeScalars {
            if scalar.value >= 0x30 && scalar.value <= 0x39 {
                digits.append(scalar.value - 0x30)
            } else {
                endDigits()
                units.append(Self.letterBase + scalar.value)
            }
        }
        endDigits()
        self.units = units
    }

    public static func < (a: NaturalSortKey, b: NaturalSortKey) -> Bool {
        a.units.lexicographicallyPrecedes(b.units)
    }

    /// Whether `a` (with its key) comes before `b` in natural order, their bytes deciding
    /// between equal keys.
    public static func areInOrder(_ a: (key: NaturalSortKey, name: String), _ b: (key: NaturalSortKey, name: String))
        -> Bool
    {
        if a.key != b.key { return a.key < b.key }
        return a.name.utf8.lexicographicallyPrecedes(b.name.utf8)
    }
}
