import ArgumentParser
import Foundation
import TilerImaging
import TilerStorage

extension Tiler {
    /// `tiler verify`: every tile of one or more pyramids exists and decodes.
    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check that every tile of a pyramid exists and decodes.",
            discussion: """
                PYRAMID is a folder ROOT/ID, an archive ROOT/ID.pmtiles, or s3://BUCKET/PREFIX/ID.pmtiles. \
                For every tile the geometry has: the file exists (in a folder, a regular file reached \
                without following a link, no larger than the server serves; in an archive, addressed \
                by its directories), looks like a whole file of the pyramid's format (else the server \
                answers 500), and libvips decodes it whole with that format's loader, failing on any \
                decoder warning, at its expected size: clipped at the image's edge, or the full tile \
                size for a padded pyramid. The size in the file's header is compared before any pixel \
                is decoded, so each check costs at most one tile's decoding whatever the file claims. \
                The thumbnail is checked the same way; an archive must also open (header, directories, \
                metadata and manifest) and address no tile outside the pyramid. Each problem is one \
                line on stderr, `tiler: verify: PATH: tile LEVEL/ROW/COLUMN: reason`; the exit status \
                is 0 when every pyramid is sound and 1 otherwise. Tiles are decoded on every core. \
                With --json, stdout gets {"pyramids": [{"path", "ok", "tiles", "problems": [{"tile", \
                "path", "reason"}]}], "ok", "interrupted"}.
                """
        )

        @Argument(help: ArgumentHelp("ROOT/ID, ROOT/ID.pmtiles or s3://BUCKET/PREFIX/ID.pmtiles.", valueName: "pyramid"))
        var pyramids: [String]

        @OptionGroup var access: PyramidAccess

        /// One pyramid's result in `--json`.
        struct Report: Encodable {
            var path: String
            var ok: Bool
            var tiles: Int
            var problems: [PyramidVerifier.Problem]
        }

        struct Summary: Encodable {
            var pyramids: [Report]
            var ok: Bool
            var interrupted: Bool
        }

        func run() throws {
            let interrupts = InterruptSignals.install(program: "tiler: verify")
            var reports: [Report] = []
            for path in pyramids {
                if interrupts.isInterrupted { break }
                let client = try access.client(for: path)
                var problems: [PyramidVerifier.Problem] = []
                func note(_ problem: PyramidVerifier.Problem) {
                    FileHandle.standardError.write(Data("tiler: verify: \(problem)\n".utf8))
                    if access.json { problems.append(problem) }
                }
                let stored: StoredPyramid
                do {
                    stored = try StoredPyramid.open(path, client: client)
                } catch {
                    note(PyramidVerifier.Problem(tile: nil, path: path, reason: Self.strip(error.description, path)))
                    reports.append(Report(path: path, ok: false, tiles: 0, problems: problems))
                    continue
                }
                let outcome = PyramidVerifier(pyramid: stored).run(isCancelled: { interrupts.isInterrupted }, report: note)
                if !access.json, !outcome.interrupted {
                    let verdict = outcome.problems == 0 ? "ok" : "\(outcome.problems) problem\(outcome.problems == 1 ? "" : "s")"
                    print("\(stored.path): \(grouped(outcome.tiles)) tiles and the thumbnail checked: \(verdict)")
                }
                reports.append(
                    Report(
                        path: stored.path, ok: outcome.problems == 0 && !outcome.interrupted,
                        tiles: outcome.tiles, problems: problems))
            }
            interrupts.acknowledge()
            if access.json {
                try printJSON(
                    Summary(
                        pyramids: reports, ok: reports.allSatisfy(\.ok) && !interrupts.isInterrupted,
                        interrupted: interrupts.isInterrupted))
            }
            if let signal = interrupts.signal { throw ExitCode(128 + signal) }
            if !reports.allSatisfy(\.ok) { throw ExitCode(1) }
        }

        /// `PATH: reason` as `reason` when the problem's path says PATH already.
        static func strip(_ text: String, _ path: String) -> String {
            text.hasPrefix(path + ": ") ? String(text.dropFirst(path.count + 2)) : text
        }
    }
}
