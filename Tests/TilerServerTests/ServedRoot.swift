import Foundation
import ObjectStorage
import S3TestSupport
import Synchronization
import Testing
import TilerCore
import TilerImaging
import TilerServer
import TilerStorage
import TilerTestSupport

/// Where a test's server reads the pyramids the test wrote as folders into a
/// `PyramidRoot`. The HTTP tests run once per kind (`@Test(arguments: RootKind.allCases)`),
/// so every route is checked against folders, against the same pyramids as archives,
/// against those archives in a bucket, and against their pictures as source files served
/// on the fly, with the same expectations (where a kind differs, the test says why).
enum RootKind: Hashable, Sendable, CaseIterable, CustomTestStringConvertible {
    /// The test's folder root itself.
    case folders
    /// Each pyramid packed into `ID.pmtiles` (by `PyramidConversion.pack`, the code of
    /// `tiler pack`) in a folder of archives only.
    case archives
    /// Those archives uploaded to the S3 test server (moto) under a prefix of their own,
    /// served as `s3://tiles/PREFIX`.
    case bucket
    /// Each pyramid's picture as an image file in a `--sources` folder (a pyramidal TIFF
    /// made by `vips tiffsave --tile --pyramid --compression jpeg`, or a plain JPEG),
    /// served on the fly from an empty ROOT. A client should get what `tiler cut` makes of
    /// that file: its bytes at full resolution, within a mean absolute difference of 2
    /// below (`ServedRoot.expect`).
    case sources(SourceKind)

    static let allCases: [RootKind] = cutPyramids + [.sources(.pyramidalTIFF), .sources(.jpeg)]

    /// The kinds that serve pyramids cut beforehand, for tests of what only they have:
    /// tile files to damage, tile sizes other than 256, padded edge tiles. (A `--sources`
    /// server makes every image as `tiler cut` does by default.)
    static let cutPyramids: [RootKind] = [.folders, .archives, .bucket]

    var isSources: Bool {
        if case .sources = self { return true }
        return false
    }

    /// Whether a pyramid that appears while the server runs is found by the first request
    /// for it: a folder root looks an unknown name up in ROOT at once, while a bucket is
    /// listed, and a `--sources` folder read, only every rescan interval (a request for a
    /// name nobody has must not make the server list them).
    var findsNewPyramidsAtOnce: Bool { self == .folders || self == .archives }

    var testDescription: String {
        switch self {
        case .folders: "folders"
        case .archives: "archives"
        case .bucket: "bucket"
        case let .sources(kind): "sources-\(kind.rawValue)"
        }
    }
}

/// The root a test server is started on: the test's folders, a copy of their pyramids as
/// archives on disk or in the bucket, or their pictures as source files. `publish()`
/// brings the copy in line with the folders after a test changed them (a pyramid added,
/// re-cut or deleted): changed pyramids are packed (or written as a source file) again,
/// in one step (a rename, a new object), deleted ones removed.
final class ServedRoot: Sendable {
    let kind: RootKind
    /// The folder of pyramid folders the test wrote.
    let folders: String
    /// The folder of archives (`archives` and `bucket`; for `bucket`, the staging copy).
    private let archives: PyramidRoot?
    /// The S3 test server and this root's prefix in its bucket `tiles`.
    private let s3: (server: S3TestServer, client: S3Client, prefix: String)?
    /// The source files (`sources` kinds).
    private let sources: SourceCopies?
    /// Per id, what the folder looked like when it was last packed.
    private let packed = Mutex<[String: [String]]>([:])

    /// `storage`: the S3 test server of a `bucket` root (default: the shared one).
    /// `sourcesFormat`: the one tile format a `sources` root makes every image in
    /// (`--sources-format`); by default the format of the test's pyramids, which must then
    /// all have the same.
    init(_ kind: RootKind, folders: String, storage: S3TestServer? = nil, sourcesFormat: TileFormat? = nil) throws {
        self.kind = kind
        self.folders = folders
        archives = kind == .archives || kind == .bucket ? try PyramidRoot() : nil
        if case let .sources(sourceKind) = kind {
            sources = try SourceCopies(sourceKind, format: try sourcesFormat ?? Self.sharedFormat(folders), anyFormat: sourcesFormat != nil)
        } else {
            sources = nil
        }
        if kind == .bucket {
            let server = try storage ?? S3TestServer.shared.get()
            s3 = (server, S3Client(configuration: Self.s3Configuration(server)), "served-" + UUID().uuidString.prefix(8).lowercased())
        } else {
            s3 = nil
        }
        try publish()
    }

    deinit {
        if let s3 { for id in packed.withLock({ $0.keys }) { try? s3.client.delete(bucket: "tiles", key: "\(s3.prefix)/\(id).pmtiles") } }
    }

    /// How the server reaches the S3 test server.
    static func s3Configuration(_ server: S3TestServer) -> S3Configuration {
        S3Configuration(
            credentials: S3Credentials(accessKeyID: server.accessKeyID, secretAccessKey: server.secretAccessKey),
            region: server.region, endpoint: server.endpoint, retries: 1)
    }

    /// What the server is given as ROOT.
    var root: String {
        switch kind {
        case .folders: folders
        case .archives: archives!.path
        case .bucket: "s3://tiles/\(s3!.prefix)"
        case .sources: sources!.root.path
        }
    }

    /// Sets the root (and, for a bucket, how to reach it; for sources, the folder and its
    /// format) in a server's configuration.
    func configure(_ config: inout ServerConfiguration) {
        config.root = root
        if let s3 {
            config.s3 = Self.s3Configuration(s3.server)
            config.storageTimeout = 20
        }
        if let sources {
            var settings = ServerConfiguration.SourceSettings(directory: sources.files.path)
            settings.format = sources.format
            config.sources = settings
            // As `tiler serve --sources` sets it: a viewer's burst of tiles fits in the queue.
            config.http.maximumQueuedRenders = ServerConfiguration.sourcesQueuedRenders
        }
    }

    /// The bytes of a pyramid's file as a client should get them (`ID/LEVEL/ROW/COLUMN.EXT`,
    /// `ID/thumbnail.EXT`, `ID/pyramid.json`): the file the test wrote; for sources, the
    /// file `tiler cut` writes for the source file. Empty when there is none.
    func file(_ relative: String) -> [UInt8] {
        let folder: String
        if let sources {
            let id = String(relative.prefix { $0 != "/" })
            guard let cut = try? sources.cut(id) else { return [] }
            folder = cut
        } else {
            folder = folders
        }
        return (try? Array(Data(contentsOf: URL(fileURLWithPath: folder + "/" + relative)))) ?? []
    }

    /// The manifest of `id` as served (for sources, the one `tiler cut` writes: the
    /// server's is the same but for its time).
    func manifest(_ id: String) throws -> PyramidManifest {
        try JSONDecoder().decode(PyramidManifest.self, from: Data(file(id + "/" + PyramidManifest.fileName)))
    }

    /// Why `body` is not what a client may get for the file `relative` (as `file`), or nil
    /// when it is: its bytes; for sources, below full resolution and for the thumbnail,
    /// pixels within a mean absolute difference of 2 of them (stored levels of a source are
    /// not the cut's area average; the acceptance's bound).
    func mismatch(_ body: [UInt8], for relative: String) -> String? {
        let expected = file(relative)
        if expected.isEmpty { return "no file \(relative) to compare with" }
        if body == expected { return nil }
        guard sources != nil else { return "\(body.count) bytes, not the \(expected.count) of \(relative)" }
        let parts = relative.split(separator: "/")
        if parts.count == 4, let level = Int(parts[1]), let m = try? manifest(String(parts[0])), level >= m.maxLevel {
            return "\(body.count) bytes, not the \(expected.count) that tiler cut writes for full-resolution tile \(relative)"
        }
        do {
            let difference = try meanAbsoluteDifference(body, expected)
            return difference <= 2 ? nil : "mean absolute difference \(difference) from tiler cut's \(relative)"
        } catch {
            return "\(relative): \(error)"
        }
    }

    /// Records an issue unless `body` is what a client may get for the file `relative`.
    func expect(_ body: [UInt8], servedAs relative: String, sourceLocation: SourceLocation = #_sourceLocation) {
        if let mismatch = mismatch(body, for: relative) { Issue.record("\(mismatch)", sourceLocation: sourceLocation) }
    }

    /// The format every pyramid in `folders` has (PNG when there is none).
    private static func sharedFormat(_ folders: String) throws -> TileFormat {
        var formats: [String: TileFormat] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folders) {
            let path = folders + "/" + name + "/" + PyramidManifest.fileName
            guard let data = FileManager.default.contents(atPath: path),
                let manifest = try? JSONDecoder().decode(PyramidManifest.self, from: data)
            else { continue }
            formats[name] = manifest.format
        }
        guard Set(formats.values).count <= 1 else {
            throw ClientError("a --sources server makes every image in one format, but these pyramids have several: \(formats)")
        }
        return formats.values.first ?? .png
    }

    /// The archive of `id` as served (`archives` and `bucket` kinds).
    func archivePath(_ id: String) -> String? { archives.map { "\($0.path)/\(id).pmtiles" } }

    /// The bytes of `id`'s archive as served.
    func archive(_ id: String) throws -> [UInt8] {
        guard let path = archivePath(id) else { throw ClientError("a folder root has no archives") }
        return try Array(Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// Replaces `id`'s archive as served with `bytes` in one step (a rename, a PUT), the
    /// way `pack --force` or a new upload does.
    func replaceArchive(_ id: String, with bytes: [UInt8]) throws {
        guard let path = archivePath(id) else { throw ClientError("a folder root has no archives") }
        let staged = path + ".new"
        try Data(bytes).write(to: URL(fileURLWithPath: staged))
        guard rename(staged, path) == 0 else { throw ClientError("rename \(staged): errno \(errno)") }
        if let s3 { try s3.client.put(bucket: "tiles", key: "\(s3.prefix)/\(id).pmtiles", body: .bytes(bytes)) }
    }

    /// Packs every pyramid folder that changed since the last call, and removes the
    /// archives of folders that are gone or lost their manifest.
    func publish() throws {
        guard archives != nil || sources != nil else { return }
        let fm = FileManager.default
        try packed.withLock { packed in
            var present: Set<String> = []
            for name in try fm.contentsOfDirectory(atPath: folders).sorted() {
                let folder = folders + "/" + name
                guard PyramidID(name) != nil, fm.fileExists(atPath: folder + "/" + PyramidManifest.fileName) else { continue }
                present.insert(name)
                let fingerprint = try Self.fingerprint(folder)
                guard packed[name] != fingerprint else { continue }
                if let sources {
                    try sources.write(folder, as: name)
                    packed[name] = fingerprint
                    continue
                }
                guard let archives else { continue }
                let archive = "\(archives.path)/\(name).pmtiles"
                try Self.pack(folder, into: archive)
                if let s3 {
                    let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: archive)))
                    try s3.client.put(bucket: "tiles", key: "\(s3.prefix)/\(name).pmtiles", body: .bytes(bytes))
                }
                packed[name] = fingerprint
            }
            for name in packed.keys where !present.contains(name) {
                sources?.remove(name)
                if let archives { try? fm.removeItem(atPath: "\(archives.path)/\(name).pmtiles") }
                if let s3 { try s3.client.delete(bucket: "tiles", key: "\(s3.prefix)/\(name).pmtiles") }
                packed[name] = nil
            }
        }
    }

    /// Every file below `folder` with its size and modification time.
    private static func fingerprint(_ folder: String) throws -> [String] {
        let fm = FileManager.default
        return try fm.subpathsOfDirectory(atPath: folder).sorted().map { path in
            let a = try fm.attributesOfItem(atPath: folder + "/" + path)
            let date = (a[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
            return "\(path) \(a[.size] ?? 0) \(date) \(a[.systemFileNumber] ?? 0)"
        }
    }

    /// `folder` (`DIR/ID`) as the archive `archive`, replacing it in one step: packed by
    /// `tiler pack`'s code when the folder holds every tile. A folder some tests leave
    /// partial (tiles only up to a level, for large geometries) is written through the
    /// same `ArchiveSink`, each missing tile stored as one shared placeholder that those
    /// tests never fetch.
    private static func pack(_ folder: String, into archive: String) throws {
        let parent = (folder as NSString).deletingLastPathComponent
        let id = (folder as NSString).lastPathComponent
        let packedPath = "\(parent)/\(id).pmtiles"
        do {
            _ = try PyramidConversion.pack(folder: folder, replace: true)
        } catch {
            try packPartial(folder, id: id, into: parent)
        }
        guard rename(packedPath, archive) == 0 else { throw ClientError("rename \(packedPath) → \(archive): errno \(errno)") }
    }

    private static func packPartial(_ folder: String, id: String, into parent: String) throws {
        let manifestBytes = try Array(Data(contentsOf: URL(fileURLWithPath: folder + "/" + PyramidManifest.fileName)))
        let manifest = try JSONDecoder().decode(PyramidManifest.self, from: Data(manifestBytes))
        let geometry = try manifest.geometry()
        let sink = try ArchiveSink(root: parent, id: manifest.id, geometry: geometry, format: manifest.format)
        let placeholder = PyramidRoot.fakeFile(manifest.format, Array("placeholder".utf8))
        for level in geometry.levels {
            for row in 0..<level.rows {
                for column in 0..<level.columns {
                    let tile = TileCoordinate(level: level.level, row: row, column: column)
                    let bytes = (try? Array(Data(contentsOf: URL(fileURLWithPath: folder + "/" + manifest.tilePath(tile))))) ?? placeholder
                    try sink.writeTile(tile, bytes)
                }
            }
        }
        let thumbnail = try Array(Data(contentsOf: URL(fileURLWithPath: folder + "/" + manifest.thumbnail.file)))
        try thumbnail.withUnsafeBytes { try sink.writeThumbnail(named: manifest.thumbnail.file, $0) }
        _ = try sink.commit(manifest: manifestBytes, replace: true)
    }
}

/// The `sources` kinds' copy of a test's pyramids: each one's picture as an image file in
/// a `--sources` folder, and what `tiler cut` makes of that file (what a client should
/// get), cut when a test first asks for it. A pyramid cut from a real picture (its
/// manifest names a source) is rebuilt from its full-resolution tiles; one the test made
/// up (tiles whose bytes only name them) becomes a picture of its size
/// (`SourcePictures.writePicture`).
final class SourceCopies: Sendable {
    let kind: SourceKind
    /// The one format the server makes every image in.
    let format: TileFormat
    /// Whether pyramids of other formats are made in `format` too (the test chose it);
    /// else one of another format is refused.
    let anyFormat: Bool
    /// The `--sources` folder.
    let files: PyramidRoot
    /// The server's ROOT, empty.
    let root: PyramidRoot
    private let cuts: PyramidRoot
    private let pictures: SourcePictures
    /// The ids cut into `cuts` from their current source file.
    private let cutIDs = Mutex<Set<String>>([])

    init(_ kind: SourceKind, format: TileFormat, anyFormat: Bool) throws {
        self.kind = kind
        self.format = format
        self.anyFormat = anyFormat
        files = try PyramidRoot()
        root = try PyramidRoot()
        cuts = try PyramidRoot()
        pictures = try SourcePictures()
    }

    private func path(_ id: String) -> String { "\(files.path)/\(id).\(kind.fileExtension)" }

    /// Writes the picture of the pyramid folder `folder` as the source file of `id`,
    /// replacing the old one in one step (a rename).
    func write(_ folder: String, as id: String) throws {
        let manifest = try JSONDecoder().decode(
            PyramidManifest.self,
            from: Data(contentsOf: URL(fileURLWithPath: folder + "/" + PyramidManifest.fileName)))
        guard manifest.tileSize == 256, !manifest.isPadded, anyFormat || manifest.format == format else {
            throw ClientError(
                "'\(id)' (\(manifest.tileSize)-pixel \(manifest.format) tiles\(manifest.isPadded ? ", padded" : "")) cannot be "
                    + "served from a source by this server, which makes \(format) tiles of 256 pixels, unpadded (as tiler cut by default): "
                    + "test it over RootKind.cutPyramids")
        }
        let work = files.path + "/.work-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let staged = "\(work)/\(id).\(kind.fileExtension)"
        if manifest.source != nil {
            let geometry = try manifest.geometry()
            let top = geometry.level(geometry.maxLevel)
            let tiles = (0..<top.rows).flatMap { row in
                (0..<top.columns).map { folder + "/" + manifest.tilePath(TileCoordinate(level: top.level, row: row, column: $0)) }
            }
            // Every cell of the grid is as large as the largest tile, each tile at its top left.
            try runTool(pictures.vips, ["arrayjoin", tiles.joined(separator: " "), "\(work)/grid.v", "--across", "\(top.columns)"])
            try runTool(pictures.vips, ["crop", "\(work)/grid.v", "\(work)/joined.v", "0", "0", "\(manifest.width)", "\(manifest.height)"])
            var picture = "\(work)/joined.v"
            if let bands = manifest.bands, bands == 2 || bands == 4 {
                try runTool(pictures.vips, ["flatten", picture, "\(work)/flat.v"])
                picture = "\(work)/flat.v"
            }
            try pictures.save(picture, to: staged, as: kind)
        } else {
            try pictures.writePicture(width: manifest.width, height: manifest.height, to: staged, as: kind, work: work)
        }
        try cutIDs.withLock { cutIDs in
            guard rename(staged, path(id)) == 0 else { throw ClientError("rename \(staged): errno \(errno)") }
            cutIDs.remove(id)
        }
    }

    /// Removes the source file of `id`.
    func remove(_ id: String) {
        cutIDs.withLock { cutIDs in
            unlink(path(id))
            cutIDs.remove(id)
        }
    }

    /// The folder holding `tiler cut`'s pyramid of `id`'s source file (cut now if needed).
    func cut(_ id: String) throws -> String {
        try cutIDs.withLock { cutIDs in
            if !cutIDs.contains(id) {
                _ = try PyramidCutter(root: URL(fileURLWithPath: cuts.path), options: CutOptions(format: format, force: true))
                    .cut(path(id), id: PyramidID(id)!)
                cutIDs.insert(id)
            }
            return cuts.path
        }
    }
}
