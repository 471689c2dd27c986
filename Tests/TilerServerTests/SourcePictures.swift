import Foundation
import Testing
import TilerTestSupport

/// What a `--sources` folder holds in these tests: a picture as a pyramidal TIFF
/// (`vips tiffsave --tile --pyramid --compression jpeg`), as a plain JPEG, or as a PNG
/// (no stored levels: every level made from the one above).
enum SourceKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case pyramidalTIFF
    case jpeg
    case png

    var testDescription: String { rawValue }
    var fileExtension: String {
        switch self {
        case .pyramidalTIFF: "tif"
        case .jpeg: "jpg"
        case .png: "png"
        }
    }

    /// The save options libvips takes after an output file name (`out.tif[...]`).
    var saveOptions: String {
        switch self {
        case .pyramidalTIFF: "[tile,pyramid,compression=jpeg,tile-width=256,tile-height=256]"
        case .jpeg, .png: ""
        }
    }
}

/// Writes source pictures with the `vips` command.
struct SourcePictures {
    let vips: String

    init() throws {
        guard let vips = findExecutable(["vips"]) else { throw ClientError("the vips command is missing: run scripts/install-deps") }
        self.vips = vips
    }

    /// The most pixels a textured picture has; larger ones (fixtures that only check
    /// geometry) are one flat colour, which libvips writes in seconds.
    static let texturedPixels = 16 << 20

    /// A smooth colour picture (blurred Worley cells in warm tones: like a photograph, its
    /// colour changes less than its brightness, which JPEG's chroma subsampling relies on)
    /// of `width × height`, written to `file` as `kind`. `work` is a scratch folder.
    func writePicture(width: Int, height: Int, seed: Int = 1, to file: String, as kind: SourceKind, work: String) throws {
        guard width * height <= Self.texturedPixels else {
            try runTool(vips, ["black", file + kind.saveOptions, "\(width)", "\(height)", "--bands", "3"])
            return
        }
        try runTool(vips, ["worley", "\(work)/w.v", "\(width)", "\(height)", "--cell-size", "\(96 + 16 * seed)"])
        try runTool(vips, ["gaussblur", "\(work)/w.v", "\(work)/b.v", "4"])
        try runTool(vips, ["linear", "\(work)/b.v", "\(work)/r.v", "1", "\(10 * seed)", "--uchar"])
        try runTool(vips, ["linear", "\(work)/b.v", "\(work)/g.v", "0.8", "20", "--uchar"])
        try runTool(vips, ["linear", "\(work)/b.v", "\(work)/b2.v", "0.6", "40", "--uchar"])
        try runTool(vips, ["bandjoin", "\(work)/r.v \(work)/g.v \(work)/b2.v", "\(work)/rgb.v"])
        try save("\(work)/rgb.v", to: file, as: kind)
    }

    /// `input` (anything libvips reads) written to `file` as `kind`.
    func save(_ input: String, to file: String, as kind: SourceKind) throws {
        try runTool(vips, ["copy", input, file + kind.saveOptions])
    }
}
