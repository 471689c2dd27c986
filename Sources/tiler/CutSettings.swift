import ArgumentParser
import TilerCore
import TilerImaging
import TilerServer
import TilerSettings

extension Tiler.Cut {
    /// `tiler cut`'s settings that have a range or a variable, declared once: their
    /// flags, help, ranges and defaults (the library's `CutOptions`), read from the flags
    /// and the environment by the table (`values(flags:environment:)`). The other flags
    /// are switches or free text.
    enum Setting: String, SettingTable {
        case tileSize = "tile-size"
        case format
        case quality
        case thumbnailSize = "thumbnail-size"
        case maxPixels = "max-pixels"

        /// `TILER_MAX_PIXELS`, which `tiler serve --sources` reads too; the others are
        /// flags alone.
        var variable: String? { self == .maxPixels ? "TILER_MAX_PIXELS" : nil }

        /// The library's defaults (`auto` tiles of `PyramidGeometry.defaultTileSize`).
        static var defaults: CutOptions { CutOptions() }

        var declaration: SettingDeclaration<CutOptions> {
            switch self {
            case .tileSize:
                let range = PyramidGeometry.tileSizeRange
                return SettingDeclaration(
                    summary: "Tile side in pixels, \(range.lowerBound)-\(range.upperBound)", value: .integer(\.tileSize, range),
                    valueName: "PIXELS")
            case .format:
                return SettingDeclaration(
                    summary:
                        "Tile format: auto (JPEG, quality \(TileEncoder.defaultJPEGQuality), for an image without an alpha channel, PNG for one with it; decided per image), png (lossless; libdeflate, or libpng with TILER_PNG_LIBRARY=libpng), jpeg (alpha flattened on --background, white by default) or webp",
                    value: .other(emptyIsValue: false) { options, text, source throws(SettingError) in
                        options.format = try TileSettings.format(text, from: source)
                    },
                    valueName: "format", defaultText: Self.defaults.format?.rawValue ?? "auto")
            case .quality:
                let range = TileSettings.qualityRange
                return SettingDeclaration(
                    summary: "JPEG or WebP quality, \(range.lowerBound)-\(range.upperBound)",
                    value: .other(emptyIsValue: false) { options, text, source throws(SettingError) in
                        options.quality = try SettingText.integer(text, from: source, in: range)
                    },
                    valueName: "Q", defaultText: TileSettings.qualityDefault, rangeText: "\(range.lowerBound)–\(range.upperBound)")
            case .thumbnailSize:
                let range = CutOptions.thumbnailSizeRange
                return SettingDeclaration(
                    summary:
                        "Longest side of the thumbnail in pixels, \(range.lowerBound)-\(range.upperBound); a smaller image keeps its size",
                    value: .integer(\.thumbnailSize, range), valueName: "PIXELS")
            case .maxPixels:
                return SettingDeclaration(
                    summary: "Refuse inputs with more pixels (width × height) than this, before decoding any",
                    value: .integer(\.maxPixels, TileSettings.maxPixelsRange), valueName: "N")
            }
        }
    }

    /// The flags of the settings table given, as typed.
    var settingFlags: [Setting: String] {
        let given: [Setting: String?] = [
            .tileSize: tileSize, .format: format, .quality: quality, .thumbnailSize: thumbnailSize, .maxPixels: maxPixels,
        ]
        return given.compactMapValues { $0 }
    }

    /// The cut's options as the table reads them from the flags and `environment`; a
    /// value that cannot be used is a usage error naming its flag or variable.
    func settings(environment: [String: String]) throws -> CutOptions {
        let options = try Setting.values(flags: settingFlags, environment: environment)
        if quality != nil, options.format == .png {
            throw ValidationError("\(TileSettings.qualityWithPNG(Setting.quality.flag, formatFlag: Setting.format.flag)).")
        }
        return options
    }
}
