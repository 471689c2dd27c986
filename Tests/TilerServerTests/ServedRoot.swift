import Foundation
import ObjectStorage
import S3TestSupport
import Testing
import TilerCore
import TilerServer
import TilerStorage

/// Where a test's server reads the pyramids the test wrote as folders into a
/// `PyramidRoot`. The HTTP tests run once per kind (`@Test(arguments: RootKind.allCases)`),
/// so every route is checked against folders, against the same pyramids as archives, and
/// against those archives in a bucket, with the same expectations.
enum RootKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// The test's folder root itself.
    case folders
    /// Each pyramid packed into `ID.pmtiles` (by `PyramidConversion.pack`, the code of
    /// `tiler pack`) in a folder of archives only.
    case archives
    /// Those archives uploaded to the S3 test server (moto) under a prefix of their own,
    /// served as `s3://tiles/PREFIX`.
    case bucket

    var testDescription: String { rawValue }
}

/// The root a test server is started on: the test's folders, or a copy of their pyramids
/// as archives on disk or in the bucket. `publish()` brings the copy in line with the
/// folders after a test changed them (a pyramid added, re-cut or deleted): changed
/// pyramids are packed again (a new archive file, a new object), deleted ones removed.
final class ServedRoot: @unchecked Sendable {
    let kind: RootKind
    /// The folder of pyramid folders the test wrote.
    let folders: String
    /// The folder of archives (`archives` and `bucket`; for `bucket`, the staging copy).
    private let archives: PyramidRoot?
    /// The S3 test server and this root's prefix in its bucket `tiles`.
    private let s3: (server: S3TestServer, client: S3Client, prefix: String)?
    /// Per id, what the folder looked like when it was last packed.
    private var packed: [String: [String]] = [:]

    /// `storage`: the S3 test server of a `bucket` root (default: the shared one).
    init(_ kind: RootKind, folders: String, storage: S3TestServer? = nil) throws {
        self.kind = kind
        self.folders = folders
        archives = kind == .folders ? nil : try PyramidRoot()
        if kind == .bucket {
            let server = try storage ?? S3TestServer.shared.get()
            s3 = (server, S3Client(configuration: Self.s3Configuration(server)), "served-" + UUID().uuidString.prefix(8).lowercased())
        } else {
            s3 = nil
        }
        try publish()
    }

    deinit {
        if let s3 { for id in packed.keys { try? s3.client.delete(bucket: "tiles", key: "\(s3.prefix)/\(id).pmtiles") } }
    }

    /// How the server reaches the S3 test server.
    static func s3Configuration(_ server: S3TestServer) -> S3Configuration {
        S3Configuration(credentials: S3Credentials(accessKeyID: server.accessKeyID, secretAccessKey: server.secretAccessKey),
                        region: server.region, endpoint: server.endpoint, retries: 1)
    }

    /// What the server is given as ROOT.
    var root: String {
        switch kind {
        case .folders: folders
        case .archives: archives!.path
        case .bucket: "s3://tiles/\(s3!.prefix)"
        }
    }

    /// Sets the root (and, for a bucket, how to reach it) in a server's configuration.
    func configure(_ config: inout ServerConfiguration) {
        config.root = root
        if let s3 {
            config.s3 = Self.s3Configuration(s3.server)
            config.storageTimeout = 20
        }
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
        guard let archives else { return }
        let fm = FileManager.default
        var present: Set<String> = []
        for name in try fm.contentsOfDirectory(atPath: folders).sorted() {
            let folder = folders + "/" + name
            guard PyramidID(name) != nil, fm.fileExists(atPath: folder + "/" + PyramidManifest.fileName) else { continue }
            present.insert(name)
            let fingerprint = try Self.fingerprint(folder)
            guard packed[name] != fingerprint else { continue }
            let archive = "\(archives.path)/\(name).pmtiles"
            try Self.pack(folder, into: archive)
            if let s3 {
                let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: archive)))
                try s3.client.put(bucket: "tiles", key: "\(s3.prefix)/\(name).pmtiles", body: .bytes(bytes))
            }
            packed[name] = fingerprint
        }
        for name in packed.keys where !present.contains(name) {
            try? fm.removeItem(atPath: "\(archives.path)/\(name).pmtiles")
            if let s3 { try s3.client.delete(bucket: "tiles", key: "\(s3.prefix)/\(name).pmtiles") }
            packed[name] = nil
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
