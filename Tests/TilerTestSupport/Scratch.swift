import Foundation

/// A fresh temporary folder, removed by `cleanUp()`.
public struct Scratch: Sendable {
    public let url: URL
    public var path: String { url.path }

    /// A folder named after `name` (the calling test, by default), this process and a
    /// random part, so that tests running at once never share one.
    public init(_ name: String = #function) throws {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        url = FileManager.default.temporaryDirectory.appendingPathComponent("tiler-test-\(getpid())-\(safe)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The path of `name` inside the folder.
    public func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    /// The folder's entries, sorted.
    public func entries() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() }

    public func cleanUp() { try? FileManager.default.removeItem(at: url) }
}

/// Every regular file under `folder`, by relative path.
public func regularFiles(in folder: String) throws -> [String: Data] {
    var out: [String: Data] = [:]
    for path in try FileManager.default.subpathsOfDirectory(atPath: folder) {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: "\(folder)/\(path)", isDirectory: &isFolder), !isFolder.boolValue {
            out[path] = try Data(contentsOf: URL(fileURLWithPath: "\(folder)/\(path)"))
        }
    }
    return out
}
