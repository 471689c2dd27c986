/// A colour for padding edge tiles (`--pad`) and, with JPEG tiles, for flattening alpha:
/// 8-bit sRGB plus alpha.
///
/// Written `#RGB`, `#RGBA`, `#RRGGBB` or `#RRGGBBAA` (hex digits, the `#` optional), or
/// `white`, `black`, `transparent`.
public struct BackgroundColour: Sendable, Hashable, CustomStringConvertible {
    public var red: UInt8
    public var green: UInt8
    public var blue: UInt8
    public var alpha: UInt8

    public init(red: UInt8, green: UInt8, blue: UInt8, alpha: UInt8 = 255) {
        self.red = red
        self.green = green
        self.blue = blue
        self.alpha = alpha
    }

    public static let white = BackgroundColour(red: 255, green: 255, blue: 255)
    public static let black = BackgroundColour(red: 0, green: 0, blue: 0)
    public static let transparent = BackgroundColour(red: 0, green: 0, blue: 0, alpha: 0)

    /// Parses the syntax above; nil for anything else.
    public init?(parsing text: String) {
        switch text.lowercased() {
        case "white": self = .white; return
        case "black": self = .black; return
        case "transparent": self = .transparent; return
        default: break
        }
        var hex = Substring(text)
        if hex.hasPrefix("#") { hex = hex.dropFirst() }
        guard [3, 4, 6, 8].contains(hex.count), hex.allSatisfy(\.isHexDigit) else { return nil }
        let short = hex.count <= 4
        var values: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let end = hex.index(index, offsetBy: short ? 1 : 2)
            let digits = String(hex[index..<end])
            guard let v = UInt8(short ? digits + digits : digits, radix: 16) else { return nil }
            values.append(v)
            index = end
        }
        self.init(red: values[0], green: values[1], blue: values[2], alpha: values.count == 4 ? values[3] : 255)
    }

    public var isOpaque: Bool { alpha == 255 }

    /// `#rrggbbaa`.
    public var description: String {
        "#" + [red, green, blue, alpha].map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// The Rec. 709 luminance, as libvips turns sRGB into grey.
    var luminance: UInt8 {
        let r: Double = 0.2126 * Double(red)
        let g: Double = 0.7152 * Double(green)
        let b: Double = 0.0722 * Double(blue)
        return UInt8((r + g + b).rounded())
    }

    /// One pixel of this colour with `bands` bands: grey, grey + alpha, RGB or RGBA.
    func pixel(bands: Int) -> [UInt8] {
        switch bands {
        case 1: [luminance]
        case 2: [luminance, alpha]
        case 3: [red, green, blue]
        default: [red, green, blue, alpha]
        }
    }
}

/// Edge tiles written at the full tile size (`--pad`), the part beyond the image filled
/// with a colour, for XYZ clients (Leaflet and friends) that stretch smaller tiles.
public struct TilePadding: Sendable, Hashable {
    public var tileSize: Int
    public var colour: BackgroundColour

    public init(tileSize: Int, colour: BackgroundColour) {
        self.tileSize = tileSize
        self.colour = colour
    }

    /// Runs `body` over the tile padded to `tileSize × tileSize` when it is smaller, or
    /// over the pixels as they are.
    func withPadded<R>(
        pixels: UnsafePointer<UInt8>, stride: Int, width: Int, height: Int, bands: Int,
        _ body: (UnsafePointer<UInt8>, Int, Int, Int) throws -> R
    ) rethrows -> R {
        guard width < tileSize || height < tileSize else { return try body(pixels, stride, width, height) }
        let side = tileSize
        let rowBytes = side * bands
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: rowBytes * side)
        defer { buffer.deallocate() }
        let pixel = colour.pixel(bands: bands)
        // One row of the colour, then copied: the rows below the image, and each row's tail.
        for x in 0..<side { (buffer + x * bands).update(from: pixel, count: bands) }
        for y in 1..<side { (buffer + y * rowBytes).update(from: buffer, count: rowBytes) }
        for y in 0..<height { (buffer + y * rowBytes).update(from: pixels + y * stride, count: width * bands) }
        return try body(buffer, rowBytes, side, side)
    }
}
