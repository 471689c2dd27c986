import CByteScan

// Byte scans sixteen bytes at a time, for the paths every request takes: the C scans of
// `CByteScan` (SSE2; Swift's SIMD types compare lane by lane). The parser's runs (a
// method, a header name, a target, a header value) end where the byte tests of
// `HTTPRequestParser.swift` first refuse; `ByteScan` finds separators for the routes.

/// Where the run of RFC 9110 token bytes (a method, a header name) from `start` ends.
@inline(__always) func endOfToken(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int {
    scan(bytes, from: start, tbs_token_end)
}

/// Where the run of target bytes (`isTargetByte`) from `start` ends.
@inline(__always) func endOfTarget(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int {
    scan(bytes, from: start, tbs_target_end)
}

/// Where the run of header value bytes (`isValueByte`) from `start` ends.
@inline(__always) func endOfValue(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int {
    scan(bytes, from: start, tbs_value_end)
}

/// One of the C scans (sixteen bytes at a time, `CByteScan.h`) over `bytes[start...]`.
@inline(__always) private func scan(
    _ bytes: UnsafeRawBufferPointer, from start: Int, _ body: (UnsafePointer<UInt8>?, Int) -> Int
) -> Int {
    guard start < bytes.count, let base = bytes.baseAddress else { return start }
    return start + body(base.assumingMemoryBound(to: UInt8.self) + start, bytes.count - start)
}

/// Separator searches for the routes' hot paths (a query's `?`, `&`, `#`, `%`).
public enum ByteScan {
    /// The index of the first byte of `bytes` equal to `a`, `b`, `c` or `d` (name one
    /// twice to look for fewer), or `bytes.count`.
    @inline(__always)
    public static func firstIndex(
        in bytes: UnsafeBufferPointer<UInt8>, ofAny a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8
    ) -> Int {
        guard let base = bytes.baseAddress else { return 0 }
        return tbs_first_of(base, bytes.count, a, b, c, d)
    }
}
