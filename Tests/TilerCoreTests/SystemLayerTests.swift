import Foundation
import Testing

/// The rule of `docs/architecture.md`, "The system-call layer": no module but
/// `TilerSystem` makes a file or socket system call, or imports its C shim. Read from the
/// sources themselves, so a call added anywhere else fails here.
@Suite struct SystemLayerTests {
    /// `Sources/`, from this file's place in the package.
    private static let sources = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources")

    /// Calls that name a file or socket operation and cannot be a method of ours (not
    /// after `.` or `func `, and with no argument label: C functions have none), or any
    /// `Glibc.` form of them.
    private static let call = try! NSRegularExpression(
        pattern:
            #"(?<![.\w])(?<!func )(Glibc\.)?(open|openat|pread|pwrite|preadv2?|rename|renameat2?|unlink|unlinkat|mkdir|mkdirat|mkdtemp|rmdir|fsync|fdatasync|flock|ftruncate|lstat|fstat|fstatat|mmap|mincore|copy_file_range|socket|accept4?|bind|listen|connect|sendfile|sendmsg|recv|epoll_\w+|eventfd|signalfd|getaddrinfo)\("#
            + #"|Glibc\.(read|write|close)\("#)

    /// Whether a call's arguments (up to the first `)`) name a label, `word:`: a Swift
    /// function's, not C's. A ternary's colon has a space before it.
    private static func hasLabel(_ arguments: Substring) -> Bool {
        arguments.isEmpty || arguments.firstRange(of: #/\b[a-z]\w*:\s/#) != nil
    }

    @Test func onlyTilerSystemCallsTheSystemForFilesAndSockets() throws {
        var found: [String] = []
        let files = FileManager.default.enumerator(at: Self.sources, includingPropertiesForKeys: nil)!
        for case let url as URL in files where url.pathExtension == "swift" {
            let relative = String(url.path.dropFirst(Self.sources.path.count + 1))
            guard !relative.hasPrefix("TilerSystem/") else { continue }
            let text = try String(contentsOf: url, encoding: .utf8)
            for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let code = String(line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
                if code.contains("import CSystemShims") { found.append("\(relative):\(n + 1): imports CSystemShims") }
                let range = NSRange(code.startIndex..., in: code)
                for match in Self.call.matches(in: code, range: range) {
                    guard let r = Range(match.range, in: code) else { continue }
                    let arguments = code[r.upperBound...].prefix { $0 != ")" }
                    if code[r].hasPrefix("Glibc.") || !Self.hasLabel(arguments) {
                        found.append("\(relative):\(n + 1): \(code[r])")
                    }
                }
            }
        }
        #expect(found == [], "system calls outside TilerSystem:\n\(found.joined(separator: "\n"))")
    }
}
