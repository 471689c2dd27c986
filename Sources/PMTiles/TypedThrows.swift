extension Array where Element == UInt8 {
    /// `withUnsafeBytes` that keeps the closure's error type (the standard library's
    /// version rethrows `any Error`).
    package func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try withUnsafeBytes { raw in Result { () throws(E) -> R in try body(raw) } }.get()
    }

    /// `withUnsafeMutableBytes` that keeps the closure's error type.
    package mutating func withMutableBytes<R, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try withUnsafeMutableBytes { raw in Result { () throws(E) -> R in try body(raw) } }.get()
    }
}
