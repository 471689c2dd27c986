import ArgumentParser
import Foundation
import TilerCore
import TilerStorage

extension Tiler {
    /// `tiler info`: one pyramid's manifest and totals.
    struct Info: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a pyramid's manifest and totals.",
            discussion: """
                PYRAMID is a folder ROOT/ID, an archive ROOT/ID.pmtiles, or s3://BUCKET/PREFIX/ID.pmtiles. \
                ROOT/ID names the archive when there is no such folder. Totals count what is stored \
                (one stat per tile for a folder; the header's counts for an archive) without \
                decoding anything: `tiler verify` decodes every tile. With --json: {"path", \
                "layout", "manifest": pyramid.json as stored, "totals": {"levels", "expectedTiles", \
                "tiles", "distinctTiles", "bytes", "tileBytes"}}.
                """
        )

        @Argument(help: ArgumentHelp("ROOT/ID, ROOT/ID.pmtiles or s3://BUCKET/PREFIX/ID.pmtiles.", valueName: "pyramid"))
        var pyramid: String

        @OptionGroup var access: PyramidAccess

        func run() throws {
            let stored = try access.open(pyramid, verb: "info")
            let totals: StoredPyramid.Totals
            do { totals = try stored.totals() } catch { fail("info", error.description) }
            if access.json {
                // The manifest as stored (fields this tiler does not know included).
                let manifest = try JSONSerialization.jsonObject(with: Data(stored.manifestBytes))
                let totalsObject = try JSONSerialization.jsonObject(with: JSONEncoder().encode(totals))
                let object: [String: Any] = [
                    "path": stored.path, "layout": stored.layout.rawValue,
                    "manifest": manifest, "totals": totalsObject,
                ]
                let data = try JSONSerialization.data(
                    withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
                FileHandle.standardOutput.write(data + Data("\n".utf8))
                return
            }
            print(Self.text(stored, totals))
        }

        static func text(_ p: StoredPyramid, _ t: StoredPyramid.Totals) -> String {
            let m = p.manifest
            var lines: [(String, String)] = [
                ("id", m.id.rawValue),
                ("path", "\(p.path) (\(p.layout.rawValue))"),
                ("image", "\(m.width) × \(m.height) px"),
                (
                    "tiles",
                    "\(m.tileSize) px \(m.format.rawValue)\(m.quality.map { ", quality \($0)" } ?? ""), "
                        + (m.isPadded ? "edge tiles padded to full size with \(m.background ?? "the background")" : "edge tiles clipped")
                ),
                (
                    "levels",
                    "\(t.levels) (0 = \(m.levels.first.map { "\($0.width) × \($0.height)" } ?? "?"), \(m.maxLevel) = full resolution)"
                ),
                (
                    "stored",
                    "\(grouped(t.tiles)) of \(grouped(t.expectedTiles)) tiles"
                        + (t.distinctTiles.map { ", \(grouped($0)) distinct" } ?? "")
                        + (t.tiles < t.expectedTiles ? " (\(grouped(t.expectedTiles - t.tiles)) missing: run tiler verify)" : "")
                ),
                ("bytes", "\(grouped(t.bytes)) (\(humanBytes(t.bytes))); tiles \(grouped(t.tileBytes))"),
                ("thumbnail", "\(m.thumbnail.file), \(m.thumbnail.width) × \(m.thumbnail.height) px"),
                ("source", m.source.map { "\($0.file), \(grouped($0.bytes)) bytes" } ?? "not recorded"),
                ("created", m.created ?? "not recorded"),
                ("cut by", m.tilerVersion.map { "tiler \($0)" } ?? "not recorded"),
                ("format version", "\(m.formatVersion)"),
            ]
            if let bands = m.bands { lines.insert(("bands", "\(bands)"), at: 4) }
            lines += metadataLines(m.metadata)
            let width = lines.map(\.0.count).max() ?? 0
            var out = lines.map { "\($0.0.padding(toLength: width, withPad: " ", startingAt: 0))  \($0.1)" }
            out.append("")
            out.append("level  width × height   columns × rows   tiles")
            for level in m.levels {
                let size = "\(level.width) × \(level.height)"
                let grid = "\(level.columns) × \(level.rows)"
                let number = String(level.level)
                out.append(
                    String(repeating: " ", count: max(0, 5 - number.count)) + number + "  "
                        + size.padding(toLength: 15, withPad: " ", startingAt: 0) + "  "
                        + grid.padding(toLength: 15, withPad: " ", startingAt: 0) + "  " + grouped(level.tileCount))
            }
            out.append("")
            out.append("\(PyramidManifest.fileName):")
            out.append(String(decoding: p.manifestBytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
            return out.joined(separator: "\n")
        }

        /// What the photo says about itself, one line per field known (a description's
        /// line breaks shown as spaces).
        static func metadataLines(_ metadata: PhotoMetadata?) -> [(String, String)] {
            guard let m = metadata else { return [] }
            let fields: [(String, String?)] = [
                ("title", m.title), ("description", m.description), ("creator", m.creator), ("copyright", m.copyright),
                ("date taken", m.dateTaken), ("camera", m.camera), ("lens", m.lens), ("exposure", m.exposure),
                ("location", m.location.map { "\($0.lat), \($0.lon)" }), ("album", m.album),
            ]
            return fields.compactMap { name, value in
                value.map { (name, $0.replacingOccurrences(of: "\n", with: " ")) }
            }
        }
    }
}
