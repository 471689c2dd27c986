import CPNG
import TilerSettings

/// How tiles are compressed: the library, the row filter, and the compression level
/// (and, for libpng, zlib's strategy).
///
/// The default, ``tiles``, was chosen by measuring (see `docs/cutting.md`): tiles of
/// photographic and noise-like images cost least per byte saved with a cheap
/// predictive filter and a fast compressor. `TILER_PNG_LIBRARY`, `TILER_PNG_LEVEL`,
/// `TILER_PNG_FILTER` and `TILER_PNG_STRATEGY` override it, for benchmarks (``Setting``).
public struct PNGSettings: Sendable, Hashable, CustomStringConvertible {
    /// libpng row filters.
    public enum Filter: String, Sendable, CaseIterable {
        case none, sub, up, average, paeth
        /// libpng tries every filter on each row and keeps the one it predicts smallest.
        case adaptive

        var mask: Int32 {
            switch self {
            case .none: Int32(PNG_FILTER_NONE)
            case .sub: Int32(PNG_FILTER_SUB)
            case .up: Int32(PNG_FILTER_UP)
            case .average: Int32(PNG_FILTER_AVG)
            case .paeth: Int32(PNG_FILTER_PAETH)
            case .adaptive: Int32(PNG_FILTER_NONE | PNG_FILTER_SUB | PNG_FILTER_UP | PNG_FILTER_AVG | PNG_FILTER_PAETH)
            }
        }
    }

    /// Who compresses: libdeflate behind tiler's own PNG writer (one IDAT chunk), or
    /// libpng with zlib.
    public enum Library: String, Sendable, CaseIterable {
        case libdeflate, libpng
    }

    /// zlib strategies (`Z_DEFAULT_STRATEGY`, `Z_FILTERED`, `Z_HUFFMAN_ONLY`, `Z_RLE`).
    public enum Strategy: String, Sendable, CaseIterable {
        case `default`, filtered, huffman, rle

        var zlibValue: Int32 {
            switch self {
            case .default: 0
            case .filtered: 1
            case .huffman: 2
            case .rle: 3
            }
        }
    }

    /// Compression level, 0 (store) to 9 (smallest, slowest), zlib's or libdeflate's.
    public var zlibLevel: Int
    public var filter: Filter
    /// zlib's strategy; libpng only.
    public var strategy: Strategy
    /// libdeflate cannot choose filters per row: with ``Filter/adaptive`` libpng is used.
    public var library: Library

    public init(zlibLevel: Int, filter: Filter, strategy: Strategy, library: Library = .libpng) {
        precondition((0...9).contains(zlibLevel), "zlib level \(zlibLevel) outside 0...9")
        self.zlibLevel = zlibLevel
        self.filter = filter
        self.strategy = strategy
        self.library = library
    }

    /// The settings tiler cuts with: the Up filter, libdeflate at level 1.
    ///
    /// Measured on the benchmark's noise pyramid (`docs/cutting.md`): libdeflate level 1
    /// after the Up filter takes 2.2x less CPU than libpng with Paeth and zlib `Z_RLE`
    /// (tiler's setting before), for 22 % more bytes, still 17 % fewer than
    /// `vips dzsave` writes (zlib 6, no filter) on the benchmark image. Per tile, zlib sets up and clears its
    /// stream state (hundreds of KB); libdeflate's compressor is made once per thread.
    public static let tiles = PNGSettings(zlibLevel: 1, filter: .up, strategy: .default, library: .libdeflate)

    /// ``tiles`` with the `TILER_PNG_*` variables of `environment` applied (``Setting``);
    /// a value that cannot be read is ignored, its default kept.
    public static func tiles(environment: [String: String]) -> PNGSettings {
        var settings = tiles
        for setting in Setting.allCases {
            guard let (text, source) = setting.given(flags: [:], environment: environment) else { continue }
            try? setting.apply(text, from: source, to: &settings)
        }
        return settings
    }

    /// The `TILER_PNG_*` variables, declared once: each overrides one part of ``tiles``,
    /// for benchmarks and for inputs where LZ77 matters (flat synthetic graphics). A table
    /// without flags, read by ``tiles(environment:)``.
    public enum Setting: String, SettingTable {
        case library
        case level
        case filter
        case strategy

        public var variable: String? {
            switch self {
            case .library: "TILER_PNG_LIBRARY"
            case .level: "TILER_PNG_LEVEL"
            case .filter: "TILER_PNG_FILTER"
            case .strategy: "TILER_PNG_STRATEGY"
            }
        }

        public static var takesFlags: Bool { false }

        public static var defaults: PNGSettings { .tiles }

        public var declaration: SettingDeclaration<PNGSettings> {
            switch self {
            case .library:
                Self.choice("Who compresses: libdeflate behind tiler's own PNG writer, or libpng with zlib", \.library)
            case .level:
                SettingDeclaration(
                    summary: "The compression level, 0 (store) to 9 (smallest, slowest)", value: .integer(\.zlibLevel, 0...9))
            case .filter:
                Self.choice("The row filter; adaptive (libpng's choice per row) is libpng's alone", \.filter)
            case .strategy:
                Self.choice("zlib's strategy, with libpng", \.strategy)
            }
        }

        /// One of `T`'s cases by its name, set at `keyPath`.
        private static func choice<T: CaseIterable & RawRepresentable>(
            _ summary: String, _ keyPath: WritableKeyPath<PNGSettings, T>
        ) -> SettingDeclaration<PNGSettings> where T.RawValue == String {
            let names = T.allCases.map(\.rawValue).joined(separator: ", ")
            return SettingDeclaration(
                summary: summary,
                value: .other(emptyIsValue: false) { settings, text, source throws(SettingError) in
                    guard let value = T(rawValue: text) else { throw SettingError("\(source)='\(text)' is not \(names)") }
                    settings[keyPath: keyPath] = value
                },
                defaultText: defaults[keyPath: keyPath].rawValue, rangeText: names)
        }
    }

    public var description: String {
        switch usedLibrary {
        case .libdeflate: "libdeflate \(zlibLevel), filter \(filter.rawValue)"
        case .libpng: "libpng, zlib \(zlibLevel), filter \(filter.rawValue), strategy \(strategy.rawValue)"
        }
    }

    /// The library that encodes: libpng when the filter is adaptive.
    var usedLibrary: Library { filter == .adaptive ? .libpng : library }

    /// The PNG filter type of a single filter (0 none ... 4 Paeth).
    var filterType: Int32 {
        switch filter {
        case .none, .adaptive: 0
        case .sub: 1
        case .up: 2
        case .average: 3
        case .paeth: 4
        }
    }
}
