import ArgumentParser
import Foundation
import TilerImaging
import TilerStorage

extension Tiler {
    /// `tiler pack`: pyramid folders into PMTiles archives.
    struct Pack: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pack pyramid folders into PMTiles archives.",
            discussion: """
            Each ROOT/ID folder (as `tiler cut` writes it) becomes ROOT/ID.pmtiles, a PMTiles \
            v3 archive holding the same tile bytes, the thumbnail and pyramid.json. The \
            archive appears only when complete; the folder is left as it is. A folder that \
            cannot be packed gets one line on stderr, and the exit status is 1.
            """
        )

        @Argument(help: ArgumentHelp("Pyramid folders, ROOT/ID.", valueName: "folder"))
        var folders: [String]

        @OptionGroup var options: ConversionOptions

        func run() throws {
            try options.run(folders, verb: "pack") { folder, isCancelled throws(StorageError) in
                try PyramidConversion.pack(folder: folder, replace: options.force, isCancelled: isCancelled)
            }
        }
    }
}

/// What `pack` and `unpack` share: `--force`, `--json`, and reporting each input.
struct ConversionOptions: ParsableArguments {
    @Flag(help: "Replace an existing output with the same id (atomically).")
    var force = false

    @Flag(help: "Print a JSON summary on stdout: per input its id, output, ok/error, tiles, bytes and seconds.")
    var json = false

    /// One input's line in `--json`.
    struct Report: Codable {
        var input: String
        var ok: Bool
        var id: String?
        var output: String?
        var tiles: Int?
        var bytes: Int?
        var seconds: Double?
        var error: String?
    }

    /// `--json`'s whole output.
    struct Summary: Codable {
        var pyramids: [Report]
        var succeeded: Int
        var failed: Int
        var interrupted: Bool
    }

    /// Converts each input in turn, reporting failures on stderr as
    /// `tiler: VERB: REASON` (the reason names the file) and going on with the next.
    func run(_ inputs: [String], verb: String,
             convert: (String, () -> Bool) throws(StorageError) -> PyramidConversion.Result) throws {
        let interrupts = InterruptSignals.install(program: "tiler: \(verb)")
        var reports: [Report] = []
        for input in inputs {
            if interrupts.isInterrupted { break }
            do {
                let result = try convert(input) { interrupts.isInterrupted }
                reports.append(Report(input: input, ok: true, id: result.id, output: result.output, tiles: result.tiles,
                                      bytes: result.bytes, seconds: result.seconds))
            } catch {
                let reason = interrupts.isInterrupted ? "\(input): interrupted; nothing was kept" : error.description
                FileHandle.standardError.write(Data("tiler: \(verb): \(reason)\n".utf8))
                reports.append(Report(input: input, ok: false, error: reason))
            }
        }
        interrupts.acknowledge()
        if json {
            let succeeded = reports.filter(\.ok).count
            let summary = Summary(pyramids: reports, succeeded: succeeded, failed: reports.count - succeeded,
                                  interrupted: interrupts.isInterrupted)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            FileHandle.standardOutput.write(try encoder.encode(summary) + Data("\n".utf8))
        }
        if let signal = interrupts.signal { throw ExitCode(128 + signal) }
        if reports.contains(where: { !$0.ok }) { throw ExitCode(1) }
    }
}
