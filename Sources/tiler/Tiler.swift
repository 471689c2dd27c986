import ArgumentParser
import TilerCore

/// `tiler`: cut large images into tile pyramids and serve them.
@main
struct Tiler: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tiler",
        abstract: "Cut gigapixel images into 256 px tile pyramids and serve them over HTTP.",
        version: TilerVersion.current,
        subcommands: [
            Cut.self, Serve.self, Info.self, Verify.self, List.self, Remove.self, Pack.self, Unpack.self,
            Healthcheck.self,
        ]
    )
}
