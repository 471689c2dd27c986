import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `tiler serve ROOT --port 0` as a child process, for checking what a cut left behind the
/// way a client sees it.
final class ServeProcess {
    let process = Process()
    let port: Int

    init(root: String) throws {
        process.executableURL = URL(fileURLWithPath: try tilerBinary())
        process.arguments = ["serve", root, "--port", "0", "--threads", "1"]
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
              let port = Int(text[range].dropFirst("127.0.0.1:".count).dropLast()) else {
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

/// Runs a program with `posix_spawn` and reaps it with `wait4`, which reports that one
/// child's peak RSS (`ru_maxrss`, KiB on Linux). stdout is discarded.
func runMeasured(_ executable: String, _ arguments: [String]) throws -> MeasuredOutput {
    let errPath = FileManager.default.temporaryDirectory.appendingPathComponent("tiler-measured-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: errPath) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { for p in argv { free(p) } }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
    guard rc == 0 else { throw SupportError(description: "posix_spawn \(executable): \(String(cString: strerror(rc)))") }
    var status: Int32 = 0
    var usage = rusage()
    while wait4(pid, &status, 0, &usage) < 0 {
        guard errno == EINTR else { throw SupportError(description: "wait4: \(String(cString: strerror(errno)))") }
    }
    let exited = status & 0x7F == 0
    let stderr = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    return MeasuredOutput(status: exited ? (status >> 8) & 0xFF : 128 + (status & 0x7F), stderr: stderr,
                          maximumResidentKB: usage.ru_maxrss)
}
