import TilerCore
import TilerImaging
import TilerSettings

/// What `tiler cut` and `tiler serve --sources` are told alike about the tiles they
/// make (`--format` and `--sources-format`, `--quality` and `--sources-quality`,
/// `--max-pixels`): how the text is read, the ranges and the defaults in words.
public enum TileSettings {
    /// JPEG and WebP quality.
    public static let qualityRange = 1...100
    /// Pixels of an input (width × height): any positive number.
    public static let maxPixelsRange = 1...Int.max
    /// The quality when none is given, in words.
    public static let qualityDefault =
        "\(TileEncoder.defaultJPEGQuality) for JPEG tiles (auto's too), \(TileEncoder.defaultWebPQuality) for WebP"

    /// A tile format, or nil for `auto` (per image: JPEG without alpha, PNG with it).
    public static func format(_ text: String, from source: String) throws(SettingError) -> TileFormat? {
        if text == "auto" { return nil }
        guard let format = TileFormat(rawValue: text) else { throw SettingError("\(source)='\(text)' is not auto, png, jpeg or webp") }
        return format
    }

    /// The refusal of a quality (from `quality`) with PNG tiles (`--format` is
    /// `formatFlag`), which are lossless.
    public static func qualityWithPNG(_ quality: String, formatFlag: String) -> SettingError {
        SettingError("\(quality) applies to \(formatFlag) auto, jpeg or webp; PNG tiles are lossless")
    }
}
