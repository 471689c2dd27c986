import Foundation
import Testing
import TilerHTTP

/// Replays the HTTP parser fuzz target's inputs through the same checks the harness makes
/// (`Fuzz/Sources/FuzzHTTPParser`): whole, byte by byte and in 7-byte chunks the parser
/// must report the same requests, consume what it says, and only fail with 400, 413, 414,
/// 431 or 505. The inputs are the seed corpus in `Fuzz/corpus/http-parser` plus every
/// crash the fuzzer has found (listed below, none so far).
@Suite struct FuzzRegressionTests {
    struct Outcome: Equatable {
        var status: HTTPRequestParser.Status
        var method: HTTPMethod?
        var version: HTTPVersion?
        var target: [UInt8] = []
        var keepAlive = false
        var contentLength: Int?
    }

    static func run(_ bytes: [UInt8], limits: HTTPRequestParser.Limits, chunk: Int) -> [Outcome] {
        var parser = HTTPRequestParser(limits: limits)
        var outcomes: [Outcome] = []
        var offset = 0
        while offset < bytes.count {
            let end = chunk == 0 ? bytes.count : min(bytes.count, offset + chunk)
            let result = bytes[offset..<end].withUnsafeBytes { parser.parse($0) }
            #expect(result.consumed >= 0 && result.consumed <= end - offset)
            switch result.status {
            case .needMore:
                #expect(result.consumed == end - offset)
            case .complete:
                let h = parser.head
                #expect(result.consumed > 0 && !h.target.isEmpty)
                #expect(h.target.allSatisfy { $0 > 0x20 && $0 < 0x7F })
                outcomes.append(
                    Outcome(
                        status: .complete, method: h.method, version: h.version, target: h.target,
                        keepAlive: h.keepAlive, contentLength: h.contentLength))
            case .failed(let e):
                #expect([400, 413, 414, 431, 505].contains(e.status))
                outcomes.append(Outcome(status: result.status))
                return outcomes
            }
            offset += result.consumed
        }
        return outcomes
    }

    /// Seeds and found crashes, by name.
    static func inputs() throws -> [(String, [UInt8])] {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus/http-parser")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        var all = try names.map { ($0, Array(try Data(contentsOf: folder.appendingPathComponent($0)))) }
        all += crashes
        return all
    }

    /// Inputs the fuzzer found that crashed or hung the parser, kept forever.
    static let crashes: [(String, [UInt8])] = []

    @Test func everyInputParsesTheSameWholeAndInPieces() throws {
        let inputs = try Self.inputs()
        #expect(inputs.count >= 6)
        let small = HTTPRequestParser.Limits(
            maximumRequestLineBytes: 64, maximumHeaderBytes: 128,
            maximumHeaderCount: 4, maximumBodyBytes: 16)
        for (name, bytes) in inputs {
            for limits in [HTTPRequestParser.Limits(), small] {
                let whole = Self.run(bytes, limits: limits, chunk: 0)
                #expect(whole == Self.run(bytes, limits: limits, chunk: 1), "\(name)")
                #expect(whole == Self.run(bytes, limits: limits, chunk: 7), "\(name)")
            }
        }
    }

    @Test func pipelinedSeedYieldsBothRequests() throws {
        let bytes = try #require(try Self.inputs().first { $0.0 == "pipelined" }?.1)
        let outcomes = Self.run(bytes, limits: .init(), chunk: 0)
        #expect(outcomes.map(\.method) == [.get, .head])
        #expect(outcomes.map(\.keepAlive) == [true, false])
    }
}
