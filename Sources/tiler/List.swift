import ArgumentParser
import Foundation
import ObjectStorage
import TilerCore
import TilerStorage

extension Tiler {
    /// `tiler ls`: the pyramids in a ROOT.
    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "ls",
            abstract: "List the pyramids in ROOT, folders and archives.",
            discussion: """
                One line per pyramid, sorted by id: its id, layout (folder or archive), image size, \
                levels, tile format, and when it was cut. A pyramid is a folder ROOT/ID holding \
                pyramid.json or an archive ROOT/ID.pmtiles (ROOT may be s3://BUCKET/PREFIX); hidden \
                names (cuts and removals under way) and links are skipped, as the server skips them. \
                When a folder and an archive share an id, the folder is listed (the server serves \
                the folder) and marked as shadowing the archive. A pyramid whose manifest cannot be \
                used is listed with the reason (the server answers 500 for it), and the exit status \
                is then 1. With --json: {"root", "pyramids": [{"id", "layout", "path", "width", \
                "height", "tileSize", "format", "levels", "tiles", "padded", "created", "source", \
                "bytes", "shadowsArchive", "error"}]}.
                """
        )

        @Argument(
            help: ArgumentHelp(
                "The folder of pyramids, or s3://BUCKET/PREFIX (env \(DefaultRoot.variable); default: \(DefaultRoot.folder)).",
                valueName: "root"))
        var root: String?

        @OptionGroup var access: PyramidAccess

        struct Row: Encodable {
            var id: String
            var layout: String
            var path: String
            var width: Int?
            var height: Int?
            var tileSize: Int?
            var format: String?
            var levels: Int?
            var tiles: Int?
            var padded: Bool?
            var created: String?
            var source: PyramidManifest.Source?
            /// An archive's size (a folder's would need a walk: `tiler info`).
            var bytes: UInt64?
            var shadowsArchive: Bool
            var error: String?
        }

        struct Listing: Encodable {
            var root: String
            var pyramids: [Row]
        }

        func run() throws {
            let root = self.root ?? DefaultRoot.resolved()
            let client = try access.client(for: root)
            let entries: [PyramidListing.Entry]
            do {
                if let client {
                    let location: S3Location
                    do { location = try S3Location(parsing: root) } catch { throw ValidationError(error.message) }
                    entries = try PyramidListing.list(location, client: client)
                } else {
                    entries = try PyramidListing.list(root: root)
                }
            } catch let error as StorageError {
                fail("ls", error.description)
            }
            let rows = entries.map { e in
                let m = e.pyramid?.manifest
                return Row(
                    id: e.id.rawValue, layout: e.layout.rawValue, path: e.path, width: m?.width, height: m?.height,
                    tileSize: m?.tileSize, format: m?.format.rawValue, levels: m.map { $0.maxLevel + 1 },
                    tiles: e.pyramid?.expectedTiles, padded: m?.isPadded, created: m?.created, source: m?.source,
                    bytes: e.archiveBytes, shadowsArchive: e.shadowsArchive, error: e.error)
            }
            if access.json {
                try printJSON(Listing(root: root, pyramids: rows))
            } else if rows.isEmpty {
                FileHandle.standardError.write(Data("tiler: ls: no pyramids in \(root)\n".utf8))
            } else {
                print(Self.table(rows))
            }
            if rows.contains(where: { $0.error != nil }) { throw ExitCode(1) }
        }

        static func table(_ rows: [Row]) -> String {
            let header = ["ID", "LAYOUT", "SIZE", "LEVELS", "FORMAT", "CREATED"]
            var cells = [header]
            for r in rows {
                if let error = r.error {
                    cells.append([r.id, r.layout, "unreadable: \(error)"])
                    continue
                }
                let layout = r.layout + (r.shadowsArchive ? " (+archive, not served)" : "") + (r.padded == true ? ", padded" : "")
                cells.append([
                    r.id, layout, "\(r.width ?? 0)×\(r.height ?? 0)", "\(r.levels ?? 0)", r.format ?? "?",
                    r.created ?? "-",
                ])
            }
            var widths = [Int](repeating: 0, count: header.count)
            for row in cells {
                // The last cell of a row is not padded, so it does not widen its column.
                for (i, cell) in row.enumerated() where i < row.count - 1 || row.count == header.count {
                    widths[i] = max(widths[i], cell.count)
                }
            }
            return cells.map { row in
                row.enumerated().map { i, cell in
                    i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
                }.joined(separator: "  ")
            }.joined(separator: "\n")
        }
    }
}
