import Testing
import TilerImaging
import TilerSettings

/// The `TILER_PNG_*` variables as a table without flags (`PNGSettings.Setting`): each
/// read over the default `tiles`, a value that cannot be read (out of range, not a name)
/// ignored, and the defaults the table gives those of `tiles`.
@Suite struct PNGSettingsTests {
    @Test func everyNameIsReadAndTheRestIgnored() {
        for filter in PNGSettings.Filter.allCases {
            #expect(PNGSettings.tiles(environment: ["TILER_PNG_FILTER": filter.rawValue]).filter == filter)
        }
        for strategy in PNGSettings.Strategy.allCases {
            #expect(PNGSettings.tiles(environment: ["TILER_PNG_STRATEGY": strategy.rawValue]).strategy == strategy)
        }
        #expect(PNGSettings.tiles(environment: ["TILER_PNG_LEVEL": "0"]).zlibLevel == 0)
        for level in ["10", "-1", "x", " 3", ""] {
            #expect(PNGSettings.tiles(environment: ["TILER_PNG_LEVEL": level]) == .tiles, "\(level)")
        }
        #expect(PNGSettings.tiles(environment: ["TILER_PNG_FILTER": "Up", "TILER_PNG_LIBRARY": ""]) == .tiles)
    }

    @Test func theDefaultsAreTiles() {
        typealias Setting = PNGSettings.Setting
        #expect(!Setting.takesFlags)
        #expect(Setting.library.defaultDescription == PNGSettings.tiles.library.rawValue)
        #expect(Setting.level.defaultDescription == "\(PNGSettings.tiles.zlibLevel)")
        #expect(Setting.filter.defaultDescription == PNGSettings.tiles.filter.rawValue)
        #expect(Setting.strategy.defaultDescription == PNGSettings.tiles.strategy.rawValue)
        #expect(Setting.level.rangeDescription == "0–9")
        #expect(Setting.filter.rangeDescription == "none, sub, up, average, paeth, adaptive")
    }
}
