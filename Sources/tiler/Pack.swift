import ArgumentParser
import Foundation
import ObjectStorage
import TilerServer
import TilerStorage

extension Tiler {
    /// `tiler pack`: pyramid folders into PMTiles archives.
    struct Pack: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pack pyramid folders into PMTiles archives.",
            discussion: """
                Each ROOT/ID folder (as `tiler cut` writes it) becomes ROOT/ID.pmtiles, a PMTiles \
                v3 archive holding the same tile bytes, the thumbnail and pyramid.json; with \
                --output, OUTPUT/ID.pmtiles in another folder, or s3://BUCKET/PREFIX/ID.pmtiles in \
                a bucket (staged locally, then uploaded; credentials and endpoint from \
                AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION and \
                AWS_ENDPOINT_URL, or --s3-endpoint). The archive appears only when complete; the \
                folder is left as it is. The folder is read as the server reads it: a symbolic \
                link anywhere in it (a tile, the thumbnail, pyramid.json, a level or row folder, \
                or the folder itself) is refused, never followed. Each folder packed gets one \
                line on stdout (FOLDER → ARCHIVE: tiles, size, seconds) unless --quiet or \
                --json; a folder that cannot be packed gets one line on stderr, and the exit \
                status is 1.
                """
        )

        @Argument(help: ArgumentHelp("Pyramid folders, ROOT/ID.", valueName: "folder"))
        var folders: [String]

        @Option(
            name: .shortAndLong,
            help: ArgumentHelp(
                "Where the archives go: a folder (made if missing) or s3://BUCKET/PREFIX (default: beside each folder, ROOT/ID.pmtiles).",
                valueName: "ROOT"))
        var output: String?

        @Option(name: .s3Endpoint, help: .s3Endpoint) var s3Endpoint: String?

        @OptionGroup var options: ConversionOptions

        func validate() throws {
            if let output, S3Location.isS3(output) {
                do { _ = try S3Location(parsing: output) } catch { throw ValidationError("--output: \(error.message)") }
            } else if s3Endpoint != nil {
                throw ValidationError("\(S3Settings.endpointFlag) applies to an s3://BUCKET/PREFIX --output only.")
            } else if let output {
                var isFolder: ObjCBool = false
                if FileManager.default.fileExists(atPath: output, isDirectory: &isFolder), !isFolder.boolValue {
                    throw ValidationError(
                        "--output \(output): not a directory (a file of that name exists); name a folder, which is made if missing.")
                }
            }
        }

        func run() throws {
            let interrupts = InterruptSignals.install(program: "tiler: pack")
            var destination: (any PyramidOutput)?
            if let output {
                if !S3Location.isS3(output) {
                    do {
                        try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
                    } catch {
                        FileHandle.standardError.write(
                            Data("tiler: pack: \(output): cannot create the folder: \(error.localizedDescription)\n".utf8))
                        throw ExitCode(1)
                    }
                }
                destination = try OutputRoot.make(
                    output, s3Endpoint: s3Endpoint, environment: ProcessInfo.processInfo.environment,
                    verb: "pack", isCancelled: { interrupts.isInterrupted })
            }
            try options.run(folders, verb: "pack", interrupts: interrupts) { folder, isCancelled throws(StorageError) in
                try PyramidConversion.pack(folder: folder, output: destination, replace: options.force, isCancelled: isCancelled)
            }
        }
    }
}

/// What `pack` and `unpack` share: `--force`, `--json`, `--quiet`, and reporting each
/// input.
struct ConversionOptions: ParsableArguments {
    @Flag(help: "Replace an existing output with the same id (atomically).")
    var force = false

    @Flag(help: "Print a JSON summary on stdout: per input its id, output, ok/error, tiles, bytes and seconds.")
    var json = false

    @Flag(help: "No line on stdout per pyramid converted (errors are still reported on stderr).")
    var quiet = false

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
    /// `tiler: VERB: REASON` (the reason names the file) and going on with the next, and
    /// each success on stdout as one line, `INPUT → OUTPUT: N tiles, SIZE, S s` (not with
    /// `--quiet`, nor with `--json`, whose summary says it).
    /// `interrupts`: the handler the command installed already (else one is installed).
    func run(
        _ inputs: [String], verb: String, interrupts: InterruptSignals? = nil,
        convert: (String, () -> Bool) throws(StorageError) -> PyramidConversion.Result
    ) throws {
        let interrupts = interrupts ?? InterruptSignals.install(program: "tiler: \(verb)")
        var reports: [Report] = []
        for input in inputs {
            if interrupts.isInterrupted { break }
            do {
                let result = try convert(input) { interrupts.isInterrupted }
                if !quiet, !json {
                    let line =
                        "\(input) → \(result.output): \(result.tiles) tiles, \(humanBytes(result.bytes)), "
                        + String(format: "%.1f s", result.seconds)
                    FileHandle.standardOutput.write(Data((line + "\n").utf8))
                }
                reports.append(
                    Report(
                        input: input, ok: true, id: result.id, output: result.output, tiles: result.tiles,
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
            let summary = Summary(
                pyramids: reports, succeeded: succeeded, failed: reports.count - succeeded,
                interrupted: interrupts.isInterrupted)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            FileHandle.standardOutput.write(try encoder.encode(summary) + Data("\n".utf8))
        }
        if let signal = interrupts.signal { throw ExitCode(128 + signal) }
        if reports.contains(where: { !$0.ok }) { throw ExitCode(1) }
    }
}
