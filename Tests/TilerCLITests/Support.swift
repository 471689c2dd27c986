import Foundation
import Testing
import TilerTestSupport

/// What a finished process printed and returned.
struct ProcessOutput {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs a program to completion, collecting its output; `environment` adds to (or
/// replaces) this process's variables; `input`, if given, is its standard input.
@discardableResult
func run(
    _ executable: String, _ arguments: [String], in directory: URL? = nil,
    environment: [String: String] = [:], input: String? = nil
) throws -> ProcessOutput {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable.hasPrefix("/") ? executable : "/usr/bin/\(executable)")
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = directory }
    if !environment.isEmpty {
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    }
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    let stdin = input.map { _ in Pipe() }
    if let stdin { process.standardInput = stdin }
    try process.run()
    if let stdin, let input {
        // Written on a thread of its own, so that a program that answers before it has read
        // everything never leaves this waiting.
        DispatchQueue.global().async {
            stdin.fileHandleForWriting.write(Data(input.utf8))
            try? stdin.fileHandleForWriting.close()
        }
    }
    // Read both pipes while the process runs so that neither fills up.
    let group = DispatchGroup()
    nonisolated(unsafe) var outData = Data(), errData = Data()
    DispatchQueue.global().async(group: group) { outData = out.fileHandleForReading.readDataToEndOfFile() }
    DispatchQueue.global().async(group: group) { errData = err.fileHandleForReading.readDataToEndOfFile() }
    group.wait()
    process.waitUntilExit()
    return ProcessOutput(
        status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
        stderr: String(decoding: errData, as: UTF8.self))
}

/// Runs `vips` (or another libvips tool) and fails loudly when it fails.
func vips(_ arguments: String..., tool: String = "vips") throws {
    let result = try run(tool, arguments)
    guard result.status == 0 else {
        throw SupportError(description: "\(tool) \(arguments.joined(separator: " ")) failed: \(result.stderr)")
    }
}

/// 8-bit pixels read from a libvips `.v` file: a 64-byte header, then the rows.
struct Raster {
    let width: Int
    let height: Int
    let bands: Int
    let pixels: [UInt8]

    /// Converts any image libvips reads into a `.v` file and reads it.
    static func read(_ image: String, scratch: Scratch) throws -> Raster {
        let v = scratch.path("raster-\(UUID().uuidString).v")
        defer { try? FileManager.default.removeItem(atPath: v) }
        try vips("copy", image, v)
        return try Raster(vFile: v)
    }

    init(vFile path: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        func int32(_ offset: Int) -> Int {
            Int(Int32(littleEndian: data.subdata(in: offset..<(offset + 4)).withUnsafeBytes { $0.loadUnaligned(as: Int32.self) }))
        }
        width = int32(4)
        height = int32(8)
        bands = int32(12)
        // Header: magic, Xsize, Ysize, Bands, Bbits, BandFmt (0 = uchar), ...
        guard int32(20) == 0 else { throw SupportError(description: "\(path) is not 8-bit unsigned") }
        let count = width * height * bands
        guard data.count >= 64 + count else { throw SupportError(description: "\(path) is short") }
        pixels = [UInt8](data[64..<(64 + count)])
    }

    /// The mean absolute difference per band over the region both rasters cover.
    func meanAbsoluteError(to other: Raster) -> Double {
        precondition(bands == other.bands, "bands differ: \(bands) and \(other.bands)")
        let w = min(width, other.width), h = min(height, other.height)
        var total = 0
        for y in 0..<h {
            for i in 0..<(w * bands) {
                total += abs(Int(pixels[y * width * bands + i]) - Int(other.pixels[y * other.width * bands + i]))
            }
        }
        return Double(total) / Double(w * h * bands)
    }
}
