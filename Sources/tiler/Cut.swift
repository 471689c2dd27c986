import ArgumentParser
import Foundation
import TilerCore
import TilerImaging

extension TileFormat: ExpressibleByArgument {}

extension Tiler {
    /// `tiler cut`: each input image becomes a pyramid folder under the output root.
    struct Cut: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Cut images into tile pyramids.",
            discussion: """
            Each INPUT (anything libvips reads: JPEG, PNG, TIFF, WebP, ...) becomes \
            ROOT/ID/LEVEL/ROW/COLUMN.EXT tiles, ROOT/ID/thumbnail.EXT and ROOT/ID/pyramid.json, \
            written last. Images stream top to bottom, so memory grows with the width, not \
            the height. An input that cannot be cut gets one line on stderr and no pyramid; \
            the others are still cut, and the exit status is 1.
            """
        )

        @Argument(help: "Images to cut.")
        var inputs: [String]

        @Option(name: .shortAndLong, help: ArgumentHelp("Folder that receives one pyramid folder per image.", valueName: "ROOT"))
        var output: String = "tiles"

        @Option(help: ArgumentHelp("Tile side in pixels (\(PyramidGeometry.tileSizeRange.lowerBound)-\(PyramidGeometry.tileSizeRange.upperBound)).", valueName: "PIXELS"))
        var tileSize: Int = 256

        @Option(help: "Tile format: png (lossless, libpng), jpeg (alpha flattened on white) or webp.")
        var format: TileFormat = .png

        @Option(help: ArgumentHelp("JPEG or WebP quality, 1-100 (default: \(TileEncoder.defaultJPEGQuality) for jpeg, \(TileEncoder.defaultWebPQuality) for webp).", valueName: "Q"))
        var quality: Int?

        @Option(help: ArgumentHelp("Pyramid id, only with a single input (default: the file name without extension, other characters replaced by _).", valueName: "ID"))
        var name: String?

        @Flag(help: "Replace an existing pyramid with the same id (atomically).")
        var force = false

        @Flag(help: "No progress display.")
        var quiet = false

        @Flag(help: "Print a JSON summary on stdout: per input its id, path, ok/error, size, levels, tiles, bytes and seconds.")
        var json = false

        func validate() throws {
            guard PyramidGeometry.tileSizeRange.contains(tileSize) else {
                throw ValidationError("--tile-size must be \(PyramidGeometry.tileSizeRange.lowerBound)...\(PyramidGeometry.tileSizeRange.upperBound), not \(tileSize).")
            }
            if let quality {
                guard format != .png else { throw ValidationError("--quality applies to --format jpeg or webp; PNG tiles are lossless.") }
                guard (1...100).contains(quality) else { throw ValidationError("--quality must be 1...100, not \(quality).") }
            }
            if let name {
                guard inputs.count == 1 else { throw ValidationError("--name needs exactly one input; \(inputs.count) were given.") }
                guard PyramidID(name) != nil else {
                    throw ValidationError("--name '\(name)' is not a valid id: use letters, digits, '.', '_' and '-', starting with a letter or digit, at most \(PyramidID.maximumLength) characters.")
                }
            }
        }

        func run() throws {
            let interrupts = InterruptSignals.install()
            let options = CutOptions(tileSize: tileSize, format: format, quality: quality,
                                     png: .tiles(environment: ProcessInfo.processInfo.environment), force: force)
            let cutter = PyramidCutter(root: URL(fileURLWithPath: output, isDirectory: true), options: options)
            let batch = CutBatch(cutter: cutter, name: name.flatMap { PyramidID($0) })
            let summary = batch.run(inputs, progress: quiet ? nil : CutProgress.onTerminal(), failed: { input, error in
                FileHandle.standardError.write(Data("tiler: cut: \(input): \(error)\n".utf8))
            }, isCancelled: { interrupts.isInterrupted })
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                FileHandle.standardOutput.write(try encoder.encode(summary) + Data("\n".utf8))
            }
            if let signal = interrupts.signal { throw ExitCode(128 + signal) }
            if summary.failed > 0 { throw ExitCode(1) }
        }
    }
}
