import ArgumentParser
import Foundation
import ObjectStorage
import TilerCore
import TilerImaging
import TilerServer
import TilerSettings
import TilerStorage

extension Tiler {
    /// `tiler cut`: each input image becomes a pyramid folder under the output root.
    struct Cut: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Cut images into tile pyramids.",
            discussion: """
                Each INPUT (anything libvips reads: JPEG, PNG, TIFF, WebP, ...) becomes \
                ROOT/ID/LEVEL/ROW/COLUMN.EXT tiles, ROOT/ID/thumbnail.EXT and ROOT/ID/pyramid.json, \
                written last. Images stream top to bottom, so memory grows with the width, not \
                the height. With --archive each pyramid is one PMTiles v3 file, ROOT/ID.pmtiles, \
                instead (same tile bytes; `tiler unpack` turns it into the folder). With --archive, \
                ROOT may be s3://BUCKET/PREFIX: each archive is staged locally, then uploaded as \
                PREFIX/ID.pmtiles (multipart when large), visible only once complete; credentials, \
                region and endpoint come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, \
                AWS_SESSION_TOKEN, AWS_REGION and AWS_ENDPOINT_URL (or --s3-endpoint). Tiles are \
                JPEG (quality 85) for an image without an alpha channel and PNG for one with it \
                (--format auto, the default; the manifest records the format chosen). Each image \
                cut gets one line on stdout (INPUT → PYRAMID: size, format, levels, tiles, bytes, \
                seconds) unless --quiet or --json; on a terminal a progress line on stderr shows \
                the image under way. An input that cannot be cut gets one line on stderr and no \
                pyramid; the others are still cut, and the exit status is 1. Inputs must be regular files; their names are never \
                read as libvips options. SIGINT or SIGTERM stops the cut within about a second \
                and removes what it had written. What a photo says about itself (title, \
                description, creator, copyright, date taken, camera, lens, exposure; from its \
                EXIF, IPTC and XMP) is kept in the manifest's "metadata", GPS only with \
                --keep-location; --title, --description and --album set or override it.
                """
        )

        @Argument(help: "Images to cut.")
        var inputs: [String]

        @Option(
            name: .shortAndLong,
            help: ArgumentHelp(
                "Folder that receives one pyramid per image, or with --archive s3://BUCKET/PREFIX (env \(DefaultRoot.variable); default: \(DefaultRoot.folder), the folder `tiler serve` serves by default).",
                valueName: "ROOT"))
        var output: String?

        /// `--output`, else `TILER_ROOT`, else `tiles`.
        var root: String { output ?? DefaultRoot.resolved() }

        @Option(name: .s3Endpoint, help: .s3Endpoint) var s3Endpoint: String?
        @Option(name: .setting(Setting.tileSize), help: .setting(Setting.tileSize)) var tileSize: String?
        @Option(name: .setting(Setting.format), help: .setting(Setting.format)) var format: String?
        @Option(name: .setting(Setting.quality), help: .setting(Setting.quality)) var quality: String?

        @Option(
            help: ArgumentHelp(
                "Pyramid id, only with a single input (default: the file name without extension, other characters replaced by _).",
                valueName: "ID"))
        var name: String?

        @Flag(help: "Write each pyramid as one PMTiles v3 archive, ROOT/ID.pmtiles, instead of a folder.")
        var archive = false

        @Option(name: .setting(Setting.thumbnailSize), help: .setting(Setting.thumbnailSize)) var thumbnailSize: String?

        @Flag(
            help: ArgumentHelp(
                "Replace an existing pyramid with the same id (atomically), a folder or an archive; a folder replaced by an archive is deleted after \(Remove.Setting.grace.variable!) seconds (default \(Remove.Setting.grace.defaultDescription)), once servers have dropped it."
            ))
        var force = false

        @Option(name: .setting(Setting.maxPixels), help: .setting(Setting.maxPixels)) var maxPixels: String?

        @Flag(
            help:
                "Accept SVG, PDF and ImageMagick inputs (default: refused, since their size and rendering cost are whatever the file says; SVG never reads files it references)."
        )
        var allowVector = false

        @Flag(inversion: .prefixedNo, help: "Turn the image upright as its EXIF orientation says; --no-autorotate keeps the stored pixels.")
        var autorotate = true

        @Flag(
            name: .customLong("icc"), inversion: .prefixedNo,
            help:
                "Convert an embedded ICC colour profile of RGB or CMYK input to sRGB (--no-icc keeps the stored RGB values); CMYK always becomes sRGB, without a profile of its own through Ghostscript's default_cmyk.icc when installed (TILER_CMYK_PROFILE: another ICC file, or builtin for libvips' own)."
        )
        var convertProfile = true

        @Flag(
            help:
                "Write edge tiles at the full tile size, filled with --background, for XYZ clients such as Leaflet (default: off, edge tiles clipped; DeepZoom and IIIF clients get clipped tiles either way)."
        )
        var pad = false

        @Option(
            help: ArgumentHelp(
                "Padding colour (--pad), and with --format jpeg the colour alpha is flattened on: #RGB, #RGBA, #RRGGBB, #RRGGBBAA, white, black or transparent (default: transparent for png and webp, white for jpeg; with auto, a transparent one makes PNG tiles).",
                valueName: "COLOUR"))
        var background: String?

        @Option(
            help: ArgumentHelp(
                "The image's title in its metadata, over what the photo says (XMP dc:title, IPTC object name, EXIF ImageDescription); only with a single input; at most \(PhotoMetadata.maximumFieldBytes) bytes.",
                valueName: "TEXT"))
        var title: String?

        @Option(
            name: .customLong("description"),
            help: ArgumentHelp(
                "The image's description (caption) in its metadata, over what the photo says (XMP dc:description, IPTC caption); at most \(PhotoMetadata.maximumDescriptionBytes) bytes.",
                valueName: "TEXT"))
        var imageDescription: String?

        @Option(
            help: ArgumentHelp(
                "The album every image of this cut belongs to (its metadata's album); at most \(PhotoMetadata.maximumFieldBytes) bytes.",
                valueName: "NAME"))
        var album: String?

        @Flag(
            help:
                "Keep the photo's GPS position (EXIF) in its metadata as location {lat, lon}, where anyone who may see the image can read it (default: dropped)."
        )
        var keepLocation = false

        @Flag(help: "No progress display, and no line on stdout per image cut (errors are still reported on stderr).")
        var quiet = false

        @Flag(help: "Print a JSON summary on stdout: per input its id, path, ok/error, size, levels, tiles, bytes and seconds.")
        var json = false

        func validate() throws {
            let output = root
            if S3Location.isS3(output) {
                guard archive else {
                    throw ValidationError(
                        "--output \(output) needs --archive: a bucket holds one archive per image, PREFIX/ID.pmtiles, not pyramid folders.")
                }
                do { _ = try S3Location(parsing: output) } catch { throw ValidationError("--output: \(error.message)") }
            } else if s3Endpoint != nil {
                throw ValidationError("\(S3Settings.endpointFlag) applies to an s3://BUCKET/PREFIX --output only.")
            } else {
                var isFolder: ObjCBool = false
                if FileManager.default.fileExists(atPath: output, isDirectory: &isFolder), !isFolder.boolValue {
                    throw ValidationError(
                        "--output \(output): not a directory (a file of that name exists); name a folder, which is made if missing.")
                }
            }
            let format = try settings(environment: ProcessInfo.processInfo.environment).format
            if let background {
                guard let colour = BackgroundColour(parsing: background) else {
                    throw ValidationError(
                        "--background '\(background)' is not a colour: use #RGB, #RGBA, #RRGGBB, #RRGGBBAA, white, black or transparent.")
                }
                if format == .jpeg, !colour.isOpaque {
                    throw ValidationError(
                        "--background '\(background)' is not opaque, and JPEG tiles have no alpha: use --format png or webp, or an opaque colour."
                    )
                }
            }
            if title != nil, inputs.count != 1 {
                throw ValidationError("--title needs exactly one input; \(inputs.count) were given.")
            }
            _ = try metadataOverrides()
            if let name {
                guard inputs.count == 1 else { throw ValidationError("--name needs exactly one input; \(inputs.count) were given.") }
                guard PyramidID(name) != nil else {
                    throw ValidationError(
                        "--name '\(name)' is not a valid id: use letters, digits, '.', '_' and '-', starting with a letter or digit, at most \(PyramidID.maximumLength) characters."
                    )
                }
            }
        }

        /// `--title`, `--description` and `--album` as the metadata holds them (control
        /// characters replaced, white space trimmed); a text that is empty or longer than
        /// its bound is refused rather than cut.
        func metadataOverrides() throws -> PhotoMetadata {
            func checked(_ text: String?, _ flag: String, multiline: Bool = false) throws -> String? {
                guard let text else { return nil }
                let maximum = multiline ? PhotoMetadata.maximumDescriptionBytes : PhotoMetadata.maximumFieldBytes
                guard text.utf8.count <= maximum else {
                    throw ValidationError("\(flag) is \(text.utf8.count) bytes; at most \(maximum).")
                }
                guard let cleaned = PhotoMetadata.cleaned(text, maximumBytes: maximum, multiline: multiline) else {
                    throw ValidationError("\(flag) is empty.")
                }
                return cleaned
            }
            return PhotoMetadata(
                title: try checked(title, "--title"), description: try checked(imageDescription, "--description", multiline: true),
                album: try checked(album, "--album"))
        }

        func run() throws {
            let environment = ProcessInfo.processInfo.environment
            var options = try settings(environment: environment)
            let grace = force ? try Remove.Setting.values(flags: [:], environment: environment).grace : 0
            let interrupts = InterruptSignals.install(program: "tiler: cut")
            options.png = .tiles(environment: environment)
            options.force = force
            options.allowVector = allowVector
            options.autorotate = autorotate
            options.convertProfile = convertProfile
            options.pad = pad
            options.background = background.flatMap(BackgroundColour.init(parsing:))
            options.layout = archive ? .archive : .folder
            options.keepLocation = keepLocation
            options.metadataOverrides = try metadataOverrides()
            let cutter = PyramidCutter(
                output: try pyramidOutput(environment: environment, isCancelled: { interrupts.isInterrupted }),
                options: options)
            let batch = CutBatch(cutter: cutter, name: name.flatMap { PyramidID($0) })
            var retired: [RetiredFolder] = []
            var summary = batch.run(
                inputs, progress: quiet ? nil : TerminalProgress.onTerminal(),
                failed: { input, error in
                    FileHandle.standardError.write(Data("tiler: cut: \(input): \(error)\n".utf8))
                },
                made: { input, result in
                    if let folder = result.retiredFolder { retired.append(folder) }
                    // What was written, one line per image, terminal or not.
                    if !quiet, !json {
                        FileHandle.standardOutput.write(Data((TerminalProgress.resultLine(input: input, result) + "\n").utf8))
                    }
                }, isCancelled: { interrupts.isInterrupted })
            // The cuts have stopped and cleaned up; an interrupt from here on ends the
            // grace wait early, and the process finishes normally.
            interrupts.acknowledge()
            if !retired.isEmpty { deleteReplaced(retired, after: grace, summary: &summary, interrupts: interrupts) }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                FileHandle.standardOutput.write(try encoder.encode(summary) + Data("\n".utf8))
            }
            if let signal = interrupts.signal { throw ExitCode(128 + signal) }
            if summary.failed > 0 { throw ExitCode(1) }
        }

        /// Deletes the folders that `--force` replaced by archives of the same id. They
        /// were retired when their archive was committed (servers drop them at their next
        /// scan, serving the archive); like `tiler rm`, this waits `TILER_RM_GRACE`
        /// seconds first (default 5), so that no server still reading a folder's tiles by
        /// path loses them. An interrupt ends the wait early; the folders still go. A
        /// folder that a cut of the id replaced meanwhile is left alone.
        private func deleteReplaced(
            _ folders: [RetiredFolder], after grace: Double, summary: inout CutSummary, interrupts: InterruptSignals
        ) {
            if !quiet {
                for folder in folders {
                    let archive = PyramidLayout.archive.path(of: folder.id, in: folder.root)
                    let line = "\(folder.path) is replaced by \(archive) and no longer served; deleting it in \(Remove.seconds(grace)) s"
                    FileHandle.standardError.write(Data("tiler: cut: \(line)\n".utf8))
                }
            }
            Remove.wait(grace, unless: interrupts)
            for folder in folders {
                do throws(StorageError) {
                    if try !folder.delete() {
                        FileHandle.standardError.write(
                            Data("tiler: cut: \(folder.path) was cut again meanwhile; left as it is\n".utf8))
                    }
                } catch {
                    FileHandle.standardError.write(Data("tiler: cut: \(error)\n".utf8))
                    // The archive is in place, but the cut did not finish what it was asked.
                    if let i = summary.images.firstIndex(where: { $0.id == folder.id.rawValue && $0.ok }) {
                        summary.images[i].ok = false
                        summary.images[i].error = "cut, but the folder it replaces is not deleted: \(error)"
                        summary.succeeded -= 1
                        summary.failed += 1
                    }
                }
            }
        }

        /// The folder ROOT, or the bucket prefix with its client, checked by listing it
        /// once (a missing bucket or refused credentials are reported before any cutting).
        func pyramidOutput(environment: [String: String], isCancelled: @escaping @Sendable () -> Bool) throws -> any PyramidOutput {
            try OutputRoot.make(root, s3Endpoint: s3Endpoint, environment: environment, verb: "cut", isCancelled: isCancelled)
        }
    }
}
