import CZlib

/// gzip through zlib (the system library): PMTiles' directories and metadata are
/// gzip-compressed by default, and every reader, the official ones included, accepts it.
public enum Gzip {
    /// `bytes` as one gzip member (deflate level 6, no name, no time stamp, so the same
    /// input always gives the same output).
    public static func compress(_ bytes: [UInt8]) -> [UInt8] {
        var stream = z_stream()
        // windowBits 15 + 16: a gzip wrapper instead of zlib's.
        let status = deflateInit2_(
            &stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY,
            zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        precondition(status == Z_OK, "zlib deflateInit2 failed (\(status)): out of memory")
        defer { deflateEnd(&stream) }
        let bound = Int(deflateBound(&stream, uLong(bytes.count)))
        var output = [UInt8](repeating: 0, count: bound)
        var input = bytes
        let produced = input.withUnsafeMutableBufferPointer { inBuffer in
            output.withUnsafeMutableBufferPointer { outBuffer in
                stream.next_in = inBuffer.baseAddress
                stream.avail_in = uInt(inBuffer.count)
                stream.next_out = outBuffer.baseAddress
                stream.avail_out = uInt(outBuffer.count)
                let result = deflate(&stream, Z_FINISH)
                precondition(result == Z_STREAM_END, "zlib deflate did not finish within deflateBound (\(result))")
                return outBuffer.count - Int(stream.avail_out)
            }
        }
        output.removeSubrange(produced...)
        return output
    }

    /// The bytes of a gzip stream (one or more members), at most `limit` of them; throws
    /// for data that is not gzip, is cut short, or inflates past `limit` (a small file
    /// never makes a large allocation).
    public static func decompress(_ bytes: UnsafeRawBufferPointer, limit: Int) throws(ArchiveFormatError) -> [UInt8] {
        try decompress(bytes, limit: limit, bound: nil)
    }

    /// Like `decompress(_:limit:)`, and `bound` is shown the output each time it grows
    /// until it answers a lower limit (nil: not yet known), which then holds for the rest:
    /// a directory reads its entry count from its first bytes and refuses a count past its
    /// limit, or bounds the rest of the stream by it, before inflating further.
    public static func decompress(
        _ bytes: UnsafeRawBufferPointer, limit: Int,
        bound: ((UnsafeRawBufferPointer) throws(ArchiveFormatError) -> Int?)?
    ) throws(ArchiveFormatError) -> [UInt8] {
        var limit = limit
        var bound = bound
        var stream = z_stream()
        guard inflateInit2_(&stream, 15 + 16, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw .corrupt("zlib cannot start inflating (out of memory)")
        }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: min(max(4096, bytes.count * 4), 1 << 20))
        stream.next_in = UnsafeMutablePointer(mutating: bytes.bindMemory(to: UInt8.self).baseAddress)
        stream.avail_in = uInt(bytes.count)
        while true {
            let (status, produced) = chunk.withUnsafeMutableBufferPointer { out in
                stream.next_out = out.baseAddress
                stream.avail_out = uInt(out.count)
                let status = inflate(&stream, Z_NO_FLUSH)
                return (status, out.count - Int(stream.avail_out))
            }
            guard output.count + produced <= limit else {
                throw .tooLarge("compressed data inflates to more than \(limit) bytes")
            }
            output.append(contentsOf: chunk[0..<produced])
            if let b = bound, produced > 0 {
                if let lower = try output.withBytes({ (raw) throws(ArchiveFormatError) in try b(raw) }) {
                    bound = nil
                    limit = min(limit, lower)
                    guard output.count <= limit else { throw .tooLarge("compressed data inflates to more than \(limit) bytes") }
                }
            }
            switch status {
            case Z_STREAM_END:
                // Concatenated members are one stream (RFC 1952); trailing bytes are not.
                guard stream.avail_in > 0 else { return output }
                guard inflateReset(&stream) == Z_OK else { throw .corrupt("zlib cannot restart inflating") }
            case Z_OK:
                continue
            case Z_BUF_ERROR:
                // No progress possible: the input ended inside the stream.
                throw .truncated("gzip data ends early")
            default:
                let reason = stream.msg.map { String(cString: $0) } ?? "error \(status)"
                throw .corrupt("bad gzip data (\(reason))")
            }
        }
    }
}

extension Compression {
    /// `bytes` compressed as this compression says (gzip or none).
    public func compress(_ bytes: [UInt8]) -> [UInt8] {
        switch self {
        case .gzip: return Gzip.compress(bytes)
        case .none: return bytes
        default: preconditionFailure("tiler writes only gzip or uncompressed directories, not \(self)")
        }
    }

    /// `bytes` uncompressed, at most `limit` of them; `bound` as for
    /// ``Gzip/decompress(_:limit:bound:)``.
    public func decompress(
        _ bytes: UnsafeRawBufferPointer, limit: Int,
        bound: ((UnsafeRawBufferPointer) throws(ArchiveFormatError) -> Int?)? = nil
    ) throws(ArchiveFormatError) -> [UInt8] {
        switch self {
        case .gzip: return try Gzip.decompress(bytes, limit: limit, bound: bound)
        case .none:
            var limit = limit
            if let bound, let lower = try bound(bytes) { limit = min(limit, lower) }
            guard bytes.count <= limit else { throw .tooLarge("\(bytes.count) bytes, the limit is \(limit)") }
            return Array(bytes)
        case .unknown: throw .unsupported("the internal compression is 'unknown'")
        case .brotli, .zstd: throw .unsupported("\(self) internal compression (tiler reads gzip or none)")
        }
    }
}
