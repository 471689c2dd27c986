import Foundation

/// Why a command-line tool the tests run failed: the command and what it wrote to stderr.
public struct ToolError: Error, CustomStringConvertible {
    public let description: String
}

/// Runs the `vips` command (libvips-tools, installed by `scripts/install-deps test`), for
/// the reference pictures the tests compare with; throws with its stderr when it fails.
public func runVips(_ arguments: [String]) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["vips"] + arguments
    let errors = Pipe()
    process.standardError = errors
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    let message = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw ToolError(description: "vips \(arguments.joined(separator: " ")): \(String(decoding: message, as: UTF8.self))")
    }
}
