import ArgumentParser
import Foundation
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
            Healthcheck.self, Token.self,
        ]
    )

    /// As `ParsableCommand.main`, except that a usage error a subcommand finds while it
    /// runs (a bad environment variable, a ROOT that is no folder) is shown with that
    /// subcommand's usage line, as errors found while parsing are, not the top level's.
    static func main() {
        var command: any ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            exit(withError: error)
        }
        do {
            try command.run()
        } catch let error as ValidationError {
            let subcommand = type(of: command)
            let name = subcommand.configuration.commandName ?? "\(subcommand)".lowercased()
            let message = """
                Error: \(error.message)
                Usage: \(usageString(for: subcommand))
                  See 'tiler \(name) --help' for more information.

                """
            FileHandle.standardError.write(Data(message.utf8))
            exit(withError: ExitCode.validationFailure)
        } catch {
            exit(withError: error)
        }
    }
}
