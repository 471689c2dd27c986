import Foundation
import Testing
import TilerCore
import TilerHTTP
import TilerTestSupport

@testable import TilerServer

/// `visibleDocument` writes a tile as seven pieces copied 16 bytes at a time, reading and
/// writing past each piece's end into room it keeps spare. These check its bytes against
/// the generic `JSONWriter` over the same tiles in the same order, for pieces of every
/// length around the chunk size: link prefixes of 0 to 100 bytes, numbers of 1 to 6
/// digits, tiles of 16 to 512 pixels, edge tiles, wrapped columns and one-tile answers.
@Suite struct VisibleDocumentTests {
    /// The answer as `JSONWriter` writes it: the fields of the head, then each tile's.
    static func generic(_ answer: VisibleTilesPlan, of pyramid: Pyramid, prefix: String) -> [UInt8] {
        let geometry = pyramid.geometry, level = answer.level
        var json = JSONWriter()
        json.beginObject()
        json.field("id", pyramid.id.rawValue)
        json.field("level", level.level)
        json.field("scale", geometry.scale(of: level.level))
        json.field("tileSize", geometry.tileSize)
        json.field("columns", level.columns)
        json.field("rows", level.rows)
        json.key("tiles")
        json.beginArray()
        answer.forEachInDistanceOrder { t in
            let c = t.coordinate
            json.beginObject()
            json.field("level", c.level)
            json.field("row", c.row)
            json.field("column", c.column)
            let file = "\(c.column).\(pyramid.manifest.format.fileExtension)"
            json.field("url", "\(prefix)/images/\(pyramid.id.rawValue)/tiles/\(c.level)/\(c.row)/\(file)")
            json.field("x", t.x)
            json.field("y", t.y)
            json.field("width", t.width)
            json.field("height", t.height)
            json.endObject()
        }
        json.endArray()
        json.endObject()
        return json.bytes
    }

    @Test func theAnswerIsTheGenericWritersBytes() throws {
        let root = try PyramidRoot()
        let shapes: [(id: String, width: Int, height: Int, tileSize: Int)] = [
            ("big", 20000, 20000, 256), ("wide", 300_000, 700, 512), ("fine", 257, 300, 16), ("dot", 1, 1, 256),
            ("odd", 12345, 678, 100),
        ]
        for s in shapes {
            try root.addPyramid(s.id, width: s.width, height: s.height, tileSize: s.tileSize, tilesThrough: -1)
        }
        let store = TileStore(configuration: ServerConfiguration(root: root.path))
        defer { store.stopRescanning() }
        let seed = UInt64.random(in: 0...UInt64.max)
        var rng = SplitMix(seed: seed)
        // Link prefixes of every length around a chunk's (the URL piece is the prefix
        // and about 30 bytes more), and one with a quote to escape.
        let prefixes =
            [0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100].map { String(repeating: "p", count: $0) }
            + [#"https://example.org/a"b"#]
        var compared = 0, withTiles = 0
        for i in 0..<600 {
            let s = shapes[i % shapes.count]
            let pyramid = try #require(store.pyramids.first { $0.id.rawValue == s.id })
            let W = Double(s.width), H = Double(s.height)
            let scale = pow(2, Double.random(in: -12...1, using: &rng))
            let width = Double.random(in: 1...3000, using: &rng) / scale
            let height = Double.random(in: 1...2000, using: &rng) / scale
            let query = try VisibleTilesQuery(
                viewport: Viewport(
                    x: Double.random(in: (-W / 2)...(1.5 * W), using: &rng), y: Double.random(in: (-H / 2)...(1.5 * H), using: &rng),
                    width: width, height: height),
                scale: scale, margin: Int.random(in: 0...3, using: &rng), wrapX: Bool.random(using: &rng))
            guard let answer = try? pyramid.geometry.visibleTilesPlan(for: query, maximumTiles: 4096) else { continue }
            let prefix = prefixes[i % prefixes.count]
            var escaped = JSONWriter()
            escaped.value(prefix)
            let written = visibleDocument(answer, of: pyramid, linkPrefix: Array(escaped.bytes.dropFirst().dropLast()))
            let expected = Self.generic(answer, of: pyramid, prefix: prefix)
            // Compared first, so that a failure reports where the bytes part, not a diff of
            // two arrays of thousands of bytes.
            let same = written == expected
            let common = min(written.count, expected.count)
            let at = same ? 0 : (0..<common).first { written[$0] != expected[$0] } ?? common
            #expect(
                same,
                """
                seed \(seed) #\(i) \(s.id), prefix of \(prefix.count) bytes: the answer parts from the generic \
                writer's at byte \(at) of \(expected.count): \(String(decoding: written[at...].prefix(80), as: UTF8.self)) \
                instead of \(String(decoding: expected[at...].prefix(80), as: UTF8.self))
                """)
            compared += 1
            if answer.count > 0 { withTiles += 1 }
        }
        #expect(compared > 400 && withTiles > 250, "only \(compared) answers compared, \(withTiles) with tiles")
    }
}
