import Foundation
import TilerTestSupport
#if canImport(Glibc)
    import Glibc
#endif

/// What a child printed on stderr, its exit status and its peak resident memory.
struct MeasuredOutput {
    var status: Int32
    var stderr: String
    var maximumResidentKB: Int
}

/// Runs a program under GNU time, which reports that one process's peak RSS (`%M`, KiB).
/// Not `wait4` on a child of this process: Linux carries the high-water mark of the
/// memory a child started from (this whole test process, at `posix_spawn` or `fork`)
/// into its `ru_maxrss`, so a child of a big test runner looks big. GNU time's own
/// child starts from GNU time. stdout is discarded.
func runMeasured(_ executable: String, _ arguments: [String]) throws -> MeasuredOutput {
    let rssPath = FileManager.default.temporaryDirectory.appendingPathComponent("tiler-measured-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: rssPath) }
    let result = try run("/usr/bin/time", ["-f", "%M", "-o", rssPath, executable] + arguments)
    // GNU time writes "Command exited with non-zero status N" before the figure.
    let lines = ((try? String(contentsOfFile: rssPath, encoding: .utf8)) ?? "").split(separator: "\n")
    guard let kilobytes = lines.last.flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }) else {
        throw SupportError(description: "GNU time reported no peak RSS for \(executable): \(lines)")
    }
    return MeasuredOutput(status: result.status, stderr: result.stderr, maximumResidentKB: kilobytes)
}
