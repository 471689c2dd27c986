import ArgumentParser
import TilerStorage

extension Tiler {
    /// `tiler unpack`: PMTiles archives into pyramid folders.
    struct Unpack: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Unpack PMTiles archives into pyramid folders.",
            discussion: """
                Each ROOT/ID.pmtiles archive (as `tiler cut --archive` or `tiler pack` writes it) \
                becomes the folder ROOT/ID: every tile, the thumbnail and pyramid.json, with the \
                bytes the archive holds. The folder appears only when complete; the archive is \
                left as it is. Each archive unpacked gets one line on stdout (ARCHIVE → FOLDER: \
                tiles, size, seconds) unless --quiet or --json. A missing, truncated or corrupt \
                archive gets one line on stderr naming the file and the reason, and the exit \
                status is 1.
                """
        )

        @Argument(help: ArgumentHelp("Archives, ROOT/ID.pmtiles.", valueName: "archive"))
        var archives: [String]

        @OptionGroup var options: ConversionOptions

        func run() throws {
            try options.run(archives, verb: "unpack") { archive, isCancelled throws(StorageError) in
                try PyramidConversion.unpack(archive: archive, replace: options.force, isCancelled: isCancelled)
            }
        }
    }
}
