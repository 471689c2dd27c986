import Foundation

/// Why a helper could not do its job.
public struct SupportError: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}

/// The `tiler` binary that `swift build` put next to the test bundle:
/// `.build/debug/tiler` under the package root, or `TILER_BINARY` when set.
public func tilerBinary() throws -> String {
    if let path = ProcessInfo.processInfo.environment["TILER_BINARY"] { return path }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    var candidates = [root.appendingPathComponent(".build/debug/tiler").path]
    // The bundle lives in the build folder too (.build/<triple>/debug/...).
    let bundle = Bundle.main.bundleURL
    candidates.insert(bundle.deletingLastPathComponent().appendingPathComponent("tiler").path, at: 0)
    candidates.insert(bundle.appendingPathComponent("tiler").path, at: 0)
    for path in candidates where FileManager.default.isExecutableFile(atPath: path) { return path }
    throw SupportError(
        description:
            "the tiler binary is missing (looked at \(candidates.joined(separator: ", "))); run `swift build --build-tests` first, as scripts/test does"
    )
}
