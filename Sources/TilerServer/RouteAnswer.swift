import Foundation
import TilerCore

/// What the DeepZoom, IIIF and viewer routes answer, before the HTTP layer writes it.
/// Kept apart from the HTTP types so the routes are plain functions that tests can call.
public enum RouteAnswer: Sendable {
    /// A file of a pyramid (a tile), served like any tile: with its validators and caching.
    case file(path: String, contentType: String, headers: [HTTPHeaderField])
    /// Bytes made for this request.
    case bytes(status: Int, contentType: String, body: [UInt8], headers: [HTTPHeaderField])
    /// A redirect to `location` (absolute URL).
    case redirect(status: Int, location: String)
    /// An error, written as the contract's JSON error body.
    case error(status: Int, message: String)

    public var status: Int {
        switch self {
        case .file: 200
        case let .bytes(status, _, _, _), let .redirect(status, _), let .error(status, _): status
        }
    }
}

/// One extra response header.
public struct HTTPHeaderField: Sendable, Hashable {
    public let name: String
    public let value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// What the routes need to know about the request beyond its path.
public struct RouteContext: Sendable {
    /// The scheme and authority clients use to reach this server, e.g.
    /// `http://127.0.0.1:8080`: from the `Host` header when there is one, else configured.
    public var baseURL: String

    public init(baseURL: String) {
        var url = baseURL
        while url.hasSuffix("/") { url.removeLast() }
        self.baseURL = url
    }

    /// `http://` + the `Host` header when it is a plausible authority, else `fallback`.
    public static func from(host: String?, fallback: String) -> RouteContext {
        if let host, !host.isEmpty, host.utf8.count <= 255,
           host.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "\\")
               && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "<") && $0 != UInt8(ascii: ">") }) {
            return RouteContext(baseURL: "http://" + host)
        }
        return RouteContext(baseURL: fallback)
    }
}

/// Finds a pyramid's folder and manifest by id.
public protocol PyramidLookup: Sendable {
    /// The pyramid named `id`, or nil when ROOT holds no complete pyramid of that name.
    func pyramid(_ id: PyramidID) -> FoundPyramid?
}

/// A pyramid found on disk.
public struct FoundPyramid: Sendable {
    /// `ROOT/ID`.
    public let directory: String
    public let manifest: PyramidManifest
    public let geometry: PyramidGeometry

    public init(directory: String, manifest: PyramidManifest, geometry: PyramidGeometry) {
        self.directory = directory
        self.manifest = manifest
        self.geometry = geometry
    }
}

/// Reads `ROOT/ID/pyramid.json` on each lookup, keeping the parsed manifest while the
/// file's modification time and size stay the same: a pyramid cut (or re-cut with
/// `--force`) while the server runs is seen on the next request.
public final class DirectoryPyramidLookup: PyramidLookup, @unchecked Sendable {
    public let root: String
    private let lock = NSLock()
    private var cache: [PyramidID: (stamp: FileStamp, found: FoundPyramid)] = [:]

    public init(root: String) {
        self.root = root
    }

    public func pyramid(_ id: PyramidID) -> FoundPyramid? {
        let directory = root + "/" + id.rawValue
        let manifestPath = directory + "/" + PyramidManifest.fileName
        guard let stamp = FileStamp(path: manifestPath) else { return nil }
        lock.lock()
        if let hit = cache[id], hit.stamp == stamp {
            lock.unlock()
            return hit.found
        }
        lock.unlock()
        guard let data = FileManager.default.contents(atPath: manifestPath),
              let manifest = try? JSONDecoder().decode(PyramidManifest.self, from: data),
              manifest.id == id,
              let geometry = try? manifest.geometry()
        else { return nil }
        let found = FoundPyramid(directory: directory, manifest: manifest, geometry: geometry)
        lock.lock()
        if cache.count > 4096 { cache.removeAll() }
        cache[id] = (stamp, found)
        lock.unlock()
        return found
    }
}

/// A file's identity for caching: inode, size and modification time.
struct FileStamp: Hashable {
    let inode: UInt64
    let size: Int64
    let modified: Int64
    let modifiedNanoseconds: Int

    init?(path: String) {
        var s = stat()
        guard stat(path, &s) == 0, (s.st_mode & S_IFMT) == S_IFREG else { return nil }
        inode = UInt64(s.st_ino)
        size = Int64(s.st_size)
        modified = Int64(s.st_mtim.tv_sec)
        modifiedNanoseconds = Int(s.st_mtim.tv_nsec)
    }
}

extension RouteAnswer {
    /// A 404 for an id that names no pyramid.
    static func noImage(_ id: String) -> RouteAnswer {
        .error(status: 404, message: "no image named '\(id.prefix(140))'")
    }
}
