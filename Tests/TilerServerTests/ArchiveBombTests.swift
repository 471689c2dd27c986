import Foundation
import PMTiles
import Testing
import TilerCore
import TilerTestSupport

/// Issue #31 item 1: archives whose directories are gzip bombs, a few kilobytes that
/// inflate to millions of entries, served by the built binary. Before, a root anywhere in
/// the file (up to 16 MiB inflated, about 4 M entries, 100 MB decoded) was kept as long as
/// the archive was open, whatever `--directory-cache-entries` said, and a leaf larger than
/// the cache was inflated again at every tile. Now the root must lie in the first 16 KiB,
/// no directory may hold more entries than the directory cache, inflating stops at the
/// entry count, and the archive or tile is a 500 with a log line that says why.
@Suite(.serialized) struct ArchiveBombTests {
    /// Raw directory bytes of `count` one-byte tiles, ids 1...count, every one at offset 0
    /// of the tile data: every byte is 1, so gzip shrinks it a thousandfold. Valid by every
    /// check but its size.
    static func bombDirectory(entries count: Int) -> [UInt8] {
        var raw: [UInt8] = []
        Varint.append(UInt64(count), to: &raw)
        raw += [UInt8](repeating: 1, count: 4 * count)
        return Gzip.compress(raw)
    }

    /// `archive` with `change` applied to its header and bytes, the header written back.
    static func rewritten(_ archive: [UInt8], _ change: (inout ArchiveHeader, inout [UInt8]) throws -> Void) throws -> [UInt8] {
        var bytes = archive
        var header = try ArchiveHeader(decoding: bytes)
        try change(&header, &bytes)
        bytes.replaceSubrange(0..<ArchiveHeader.size, with: header.encoded())
        return bytes
    }

    /// The root replaced by `root`, in the first 16 KiB (where the spec has it) or after
    /// the end of the file.
    static func withRoot(_ archive: [UInt8], _ root: [UInt8], farAway: Bool) throws -> [UInt8] {
        try rewritten(archive) { header, bytes in
            if farAway {
                header.rootOffset = UInt64(bytes.count)
                bytes += root
            } else {
                guard ArchiveHeader.size + root.count <= min(ArchiveHeader.headerAndRootLimit, Int(header.tileDataOffset)) else {
                    throw ClientError("a \(root.count)-byte root does not fit in the first 16 KiB")
                }
                header.rootOffset = UInt64(ArchiveHeader.size)
                bytes.replaceSubrange(ArchiveHeader.size..<(ArchiveHeader.size + root.count), with: root)
            }
            header.rootLength = UInt64(root.count)
        }
    }

    /// A root of one leaf pointer, to `leaf`, placed after the end of the file.
    static func withLeaf(_ archive: [UInt8], _ leaf: [UInt8]) throws -> [UInt8] {
        let pointer = DirectoryEntry(tileID: 0, offset: 0, length: UInt32(leaf.count), runLength: 0)
        let withLeafSection = try rewritten(archive) { header, bytes in
            header.leafDirectoryOffset = UInt64(bytes.count)
            header.leafDirectoryLength = UInt64(leaf.count)
            bytes += leaf
        }
        return try withRoot(withLeafSection, Gzip.compress(Directory.encode([pointer])), farAway: false)
    }

    @Test(.timeLimit(.minutes(10))) func directoryBombsStayWithinTheDirectoryMemory() throws {
        let bomb = Self.bombDirectory(entries: 3_500_000)
        let root = try PyramidRoot()
        let ids = (1...4).flatMap { ["near\($0)", "far\($0)"] } + ["leaf1", "leaf2", "plain"]
        for id in ids { try root.addPyramid(id, width: 600, height: 400) }
        let served = try root.serve(as: .archives)
        for id in ids where id != "plain" {
            let archive = try served.archive(id)
            let bytes =
                id.hasPrefix("near")
                ? try Self.withRoot(archive, bomb, farAway: false)
                : id.hasPrefix("far") ? try Self.withRoot(archive, bomb, farAway: true) : try Self.withLeaf(archive, bomb)
            try served.replaceArchive(id, with: bytes)
        }
        let options = ["--port", "0", "--directory-cache-entries", "4096", "--cache-mb", "16", "--rescan-interval", "3600"]
        let tiles = (0..<2).flatMap { row in (0..<3).map { (row, $0) } }
        // The same server over the plain archive alone: what serving costs without bombs.
        let plainRoot = try PyramidRoot()
        try plainRoot.addPyramid("plain", width: 600, height: 400)
        let plain = try ServeProcess([try plainRoot.serve(as: .archives).root] + options)
        for (row, column) in tiles { #expect(try fetch(plain.port, "/images/plain/tiles/2/\(row)/\(column).png").status == 200) }
        let baseline = plain.rss("VmHWM")
        let server = try ServeProcess([served.root] + options)
        // The archives were opened at start: whatever their roots hold is held already.
        let start = server.rss("VmRSS")
        var seconds: [Double] = []
        print("bomb archives: RSS \(start) MB after start (\(baseline) MB peak without them)")
        var leafSeconds: [Double] = []
        for _ in 0..<2 {
            for id in ids {
                // A few tiles behind each bomb leaf: before, each took seconds.
                for (row, column) in id.hasPrefix("leaf") ? Array(tiles.prefix(2)) : tiles {
                    let began = Date()
                    let r = try fetch(server.port, "/images/\(id)/tiles/2/\(row)/\(column).png")
                    seconds.append(Date().timeIntervalSince(began))
                    if id.hasPrefix("leaf") { leafSeconds.append(seconds.last!) }
                    if id == "plain" {
                        #expect(r.status == 200 && r.body == PyramidRoot.tileBytes(id, TileCoordinate(level: 2, row: row, column: column)))
                    } else if id.hasPrefix("leaf") {
                        #expect(
                            r.status == 500 && r.errorMessage == "tile 2/\(row)/\(column) of image '\(id)' is damaged on the server",
                            "\(id): \(r.status) \(r.text.prefix(200))")
                    } else {
                        #expect(
                            r.status == 500 && r.errorMessage == "image '\(id)' has a damaged archive",
                            "\(id): \(r.status) \(r.text.prefix(200))")
                    }
                }
            }
        }
        let peak = server.rss("VmHWM"), now = server.rss("VmRSS")
        print(
            "bomb archives: peak RSS \(baseline) MB without them; with them \(start) MB after start, peak \(peak) MB, \(now) MB after \(seconds.count) tiles; slowest tile \(seconds.max() ?? 0) s; behind a bomb leaf \(leafSeconds.reduce(0, +) / Double(max(1, leafSeconds.count))) s a tile"
        )
        // The documented bounds: 16 MiB of responses, 4,096 directory entries (96 KiB), and
        // one directory being inflated per read under way (at most 16 MiB, stopped here at
        // the entry count). Before: 84 MB for each bomb root, kept, and as much again for
        // each leaf read.
        #expect(peak - baseline <= 100, "peak RSS \(peak) MB (\(start) MB after start), \(baseline) MB without the bombs")
        let log = server.errorOutput
        #expect(log.contains("3500000 entries, more than the 4096 allowed"), "\(log.suffix(2000))")
        #expect(log.contains("outside the first 16384 bytes"), "\(log.suffix(2000))")
    }
}
