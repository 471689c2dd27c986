import Foundation
import TilerTestSupport
#if canImport(Glibc)
    import Glibc
#endif

/// `tiler serve ROOT --port 0` as a child process, for checking what a cut left behind the
/// way a client sees it.
final class ServeProcess {
    let process = Process()
    let port: Int

    init(root: String, options: [String] = []) throws {
        process.executableURL = URL(fileURLWithPath: try tilerBinary())
        process.arguments = ["serve", root, "--port", "0", "--threads", "1"] + options
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        // "tiler: serving ROOT at http://127.0.0.1:PORT/"
        var text = ""
        let deadline = Date().addingTimeInterval(20)
        while !text.contains("\n"), Date() < deadline {
            let data = out.fileHandleForReading.availableData
            if data.isEmpty { break }
            text += String(decoding: data, as: UTF8.self)
        }
        guard let range = text.range(of: #"127\.0\.0\.1:(\d+)/"#, options: .regularExpression),
            let port = Int(text[range].dropFirst("127.0.0.1:".count).dropLast())
        else {
            process.terminate()
            throw SupportError(description: "tiler serve did not announce its port: '\(text)'")
        }
        self.port = port
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }
}

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
