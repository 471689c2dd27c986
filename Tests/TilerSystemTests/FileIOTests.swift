import Foundation
import Glibc
import Testing
import TilerTestSupport
@testable import TilerSystem

/// The calls that replaced C and hand-written loops: reads of cached ranges at any offset,
/// the copy with and without `copy_file_range`, and writes that appear whole or not at all.
@Suite struct FileIOTests {
    /// Three pages and a bit of bytes that tell their offsets apart.
    private static let bytes: [UInt8] = (0..<(3 * 4096 + 123)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }

    private func file(in scratch: Scratch, _ name: String = "f") throws -> (path: String, fd: FileDescriptor) {
        let path = "\(scratch.path)/\(name)"
        try AtomicFile.write(Self.bytes, to: path, through: path + ".tmp")
        return (path, try FileDescriptor.open(path, O_RDONLY))
    }

    @Test func aCachedRangeIsReadAtAnyOffset() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let (_, fd) = try file(in: scratch)
        defer { fd.close() }
        let info = try fd.info()
        // Just written: in the page cache, so the answer must be the bytes.
        #expect(try fd.isResident(offset: 5000, count: 7000))
        var buffer = [UInt8](repeating: 0, count: 7000)
        let read = try buffer.withUnsafeMutableBytes { try PageCache.read(fd, device: info.device, into: $0, at: 5000) }
        #expect(read == .read(7000))
        #expect(buffer == Array(Self.bytes[5000..<12000]))
        // Past the end: what there is.
        var tail = [UInt8](repeating: 0, count: 100)
        let end = try tail.withUnsafeMutableBytes { try PageCache.read(fd, device: info.device, into: $0, at: Self.bytes.count - 50) }
        #expect(end == .read(50))
        #expect(Array(tail[..<50]) == Array(Self.bytes.suffix(50)))
    }

    @Test(arguments: [true, false]) func aCopyIsTheSameWithOrWithoutTheKernel(inKernel: Bool) throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let (_, source) = try file(in: scratch)
        defer { source.close() }
        let target = try FileDescriptor.open("\(scratch.path)/copy", O_RDWR | O_CREAT | O_EXCL)
        defer { target.close() }
        var kernel = inKernel
        try source.copy(count: 9000, at: 3000, to: target, at: 100, inKernel: &kernel)
        var back = [UInt8](repeating: 0, count: 9100)
        let n = try back.withUnsafeMutableBytes { try target.readFully(into: $0, at: 0) }
        #expect(n == 9100)
        #expect(Array(back[100...]) == Array(Self.bytes[3000..<12000]))
        #expect(back[..<100].allSatisfy { $0 == 0 })
        // A source that ends first is an error, not a short copy.
        #expect(throws: SystemCallError.self) {
            var again = inKernel
            try source.copy(count: 100, at: Self.bytes.count - 10, to: target, at: 0, inKernel: &again)
        }
    }

    @Test func anAtomicWriteThatCannotLandLeavesNothing() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let temporary = "\(scratch.path)/x.tmp"
        // The destination's folder does not exist: the rename fails, the temporary goes.
        #expect(throws: SystemCallError.self) {
            try AtomicFile.write([1, 2, 3], to: "\(scratch.path)/missing/x", through: temporary)
        }
        #expect(try FileSystem.info(temporary) == nil)
        try AtomicFile.write([1, 2, 3], to: "\(scratch.path)/x", through: temporary)
        #expect(FileManager.default.contents(atPath: "\(scratch.path)/x") == Data([1, 2, 3]))
        #expect(try FileSystem.info(temporary) == nil)
    }
}
