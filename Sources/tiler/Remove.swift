import ArgumentParser
import Foundation
import TilerCore
import TilerServer
import TilerSettings
import TilerStorage

extension Tiler {
    /// `tiler rm ROOT ID`: removes one pyramid so that a running server never serves half.
    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm",
            abstract: "Remove pyramids from ROOT, never half-served.",
            discussion: """
                Removes the folder ROOT/ID, the archive ROOT/ID.pmtiles, or both when both exist \
                (--layout folder or --layout archive removes that one only, and leaves the other \
                alone, e.g. the folder once `tiler pack` made its archive). \
                A server keeps ROOT's pyramids in memory and notices changes at its next scan \
                (serve --rescan-interval, 1 s by default), and reads a folder's tiles by path; so \
                a folder is first retired (its pyramid.json is hidden: the folder stops being a \
                pyramid, and servers drop it at their next scan while every tile is still there), \
                then after --grace seconds (\(Setting.grace.variable!), default \(Setting.grace.defaultDescription); rm says on stderr that it \
                waits, and why) moved out of view under a hidden name and deleted. Until \
                a server's next scan it serves the pyramid whole; after it, not at all. An archive \
                is one unlink: a server that has it open keeps reading the same file until its \
                next scan. Ctrl-C during the grace period puts the folder back. A folder without \
                pyramid.json is not a pyramid and is left alone. With --json: {"removed": [{"id", \
                "targets": [{"layout", "path"}]}], "failed": [{"id", "error"}]}.
                """
        )

        @Argument(help: ArgumentHelp("The folder of pyramids (a local folder: buckets have their own tools).", valueName: "root"))
        var root: String

        @Argument(help: ArgumentHelp("Pyramid ids.", valueName: "id"))
        var ids: [String]

        @Option(name: .setting(Setting.grace), help: .setting(Setting.grace)) var grace: String?

        @Option(
            help: ArgumentHelp(
                "Which of an id's layouts to remove: folder (ROOT/ID), archive (ROOT/ID.pmtiles), or both (default: both, whichever exist).",
                valueName: "layout"))
        var layout: LayoutChoice = .both

        @Flag(help: "Print a JSON summary on stdout.")
        var json = false

        /// `--layout`'s values.
        enum LayoutChoice: String, ExpressibleByArgument, CaseIterable {
            case folder, archive, both

            /// The one layout removed, or nil for both.
            var only: PyramidLayout? { PyramidLayout(rawValue: rawValue) }
        }

        struct Removed: Encodable {
            var id: String
            var targets: [PyramidRemoval.Target]
        }

        struct Failed: Encodable {
            var id: String
            var error: String
        }

        struct Summary: Encodable {
            var removed: [Removed]
            var failed: [Failed]
        }

        func validate() throws {
            if ids.isEmpty { throw ValidationError("Name at least one pyramid id to remove from \(root).") }
            for id in ids where PyramidID(id) == nil {
                throw ValidationError(
                    "'\(id)' is not a pyramid id: letters, digits, '.', '_' and '-', starting with a letter or digit (give the id, not a path)."
                )
            }
            if root.lowercased().hasPrefix("s3://") {
                throw ValidationError("tiler rm removes pyramids from a local ROOT; delete s3://…/ID.pmtiles with your S3 tool.")
            }
            _ = try settings(environment: ProcessInfo.processInfo.environment)
        }

        /// `--grace`, else `TILER_RM_GRACE`, else the default.
        func settings(environment: [String: String]) throws -> Settings {
            try Setting.values(flags: grace.map { [.grace: $0] } ?? [:], environment: environment)
        }

        /// `5`, `0.5`: seconds as people write them.
        static func seconds(_ value: Double) -> String { String(format: "%g", value) }

        /// Waits `seconds`, or until a signal comes.
        static func wait(_ seconds: Double, unless interrupts: InterruptSignals) {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline, !interrupts.isInterrupted {
                Thread.sleep(forTimeInterval: min(0.05, max(0, deadline.timeIntervalSinceNow)))
            }
        }

        func run() throws {
            let grace = try settings(environment: ProcessInfo.processInfo.environment).grace
            let interrupts = InterruptSignals.install(program: "tiler: rm")
            var removals: [PyramidRemoval] = []
            var summary = Summary(removed: [], failed: [])
            func failed(_ id: String, _ error: String) {
                FileHandle.standardError.write(Data("tiler: rm: \(error)\n".utf8))
                summary.failed.append(Failed(id: id, error: error))
            }
            // Retire every pyramid first, then wait once, then delete.
            for text in ids {
                do {
                    let removal = try PyramidRemoval(root: root, id: PyramidID(text)!, only: layout.only)
                    try removal.retire()
                    removals.append(removal)
                } catch {
                    failed(text, error.description)
                }
            }
            if removals.contains(where: \.needsGrace), grace > 0 {
                let folders = removals.filter(\.needsGrace).map { PyramidLayout.folder.path(of: $0.id, in: $0.root) }
                FileHandle.standardError.write(
                    Data(
                        "tiler: rm: \(folders.joined(separator: ", ")) retired; deleting in \(Self.seconds(grace)) s, once servers reading \(root) have dropped \(folders.count == 1 ? "it" : "them") (\(Setting.grace.flag) or \(Setting.grace.variable!); 0 when no server runs)\n"
                            .utf8))
                Self.wait(grace, unless: interrupts)
            }
            if interrupts.isInterrupted {
                for removal in removals { removal.restore() }
                interrupts.acknowledge()
                FileHandle.standardError.write(
                    Data("tiler: rm: interrupted; the folders were put back (archives already unlinked stay gone)\n".utf8))
                throw ExitCode(128 + (interrupts.signal ?? 2))
            }
            for removal in removals {
                do {
                    try removal.delete()
                    summary.removed.append(Removed(id: removal.id.rawValue, targets: removal.targets))
                    if !json {
                        print("removed \(removal.targets.map { "\($0.path) (\($0.layout))" }.joined(separator: " and "))")
                    }
                } catch {
                    failed(removal.id.rawValue, error.description)
                }
            }
            interrupts.acknowledge()
            if json { try printJSON(summary) }
            if !summary.failed.isEmpty { throw ExitCode(1) }
        }
    }
}
