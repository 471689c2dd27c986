import Foundation
import Testing
import TilerCore
import TilerHTTP
import TilerTestSupport
@testable import TilerImaging
@testable import TilerServer

/// A folder of source images and a folder of what `tiler cut` makes of the same files, to
/// compare the server's on-the-fly pyramids with.
final class SourceFolder: Sendable {
    let sources: PyramidRoot
    let cut: PyramidRoot
    let pictures: SourcePictures

    init() throws {
        sources = try PyramidRoot()
        cut = try PyramidRoot()
        pictures = try SourcePictures()
    }

    /// A picture (`SourcePictures.writePicture`) of `width × height` written as `name.EXT`
    /// in the sources folder; returns its path.
    @discardableResult
    func addPicture(_ name: String, width: Int, height: Int, as kind: SourceKind, seed: Int = 1) throws -> String {
        let work = sources.path + "/.work-\(name)"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let file = "\(sources.path)/\(name).\(kind.fileExtension)"
        let staged = "\(work)/out.\(kind.fileExtension)"
        try pictures.writePicture(width: width, height: height, seed: seed, to: staged, as: kind, work: work)
        guard rename(staged, file) == 0 else { throw ClientError("rename \(staged): errno \(errno)") }
        return file
    }

    /// `tiler cut`'s pyramid of a source file (PNG tiles), in the `cut` root.
    func cutPyramid(_ file: String, as id: String) throws -> PyramidManifest {
        try cut.cut(file, as: id)
    }

    /// The settings a server needs to serve this folder, with PNG tiles (as the `cut`
    /// pyramids compared with them; `--sources-format` is `auto` by default).
    func settings(_ change: (inout ServerConfiguration.SourceSettings) -> Void = { _ in }) -> ServerConfiguration.SourceSettings {
        var s = ServerConfiguration.SourceSettings(directory: sources.path)
        s.format = .png
        change(&s)
        return s
    }
}

/// 8-bit pixels of an encoded image, decoded by libvips.
func decodedPixels(_ bytes: [UInt8]) throws -> (pixels: [UInt8], width: Int, height: Int, bands: Int) {
    let path = NSTemporaryDirectory() + "tiler-decode-" + UUID().uuidString
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    defer { unlink(path) }
    let image = try VipsImageHandle.openSequential(path: path)
    return (try image.pixels(), image.width, image.height, image.bands)
}

/// The mean absolute difference of two decoded images of the same size, 0...255.
func meanAbsoluteDifference(_ a: [UInt8], _ b: [UInt8]) throws -> Double {
    let x = try decodedPixels(a), y = try decodedPixels(b)
    guard x.width == y.width, x.height == y.height, x.bands == y.bands else {
        throw ClientError("\(x.width)×\(x.height)×\(x.bands) vs \(y.width)×\(y.height)×\(y.bands)")
    }
    var sum = 0
    for i in x.pixels.indices { sum += abs(Int(x.pixels[i]) - Int(y.pixels[i])) }
    return Double(sum) / Double(max(1, x.pixels.count))
}

func withSourcesServer(
    _ folder: SourceFolder, root: PyramidRoot? = nil, log: CollectedLog? = nil,
    _ change: (inout ServerConfiguration) -> Void = { _ in },
    _ body: (TileServer) throws -> Void
) throws {
    let root = try root ?? PyramidRoot()
    try withRunningTileServer(
        root, log: log,
        {
            $0.sources = folder.settings()
            $0.rescanInterval = 0.1
            change(&$0)
        }, body)
}
