import TilerHTTP

/// One request as the parser reported it, for comparing two ways of feeding the bytes.
struct Outcome: Equatable {
    var status: HTTPRequestParser.Status
    var method: HTTPMethod?
    var version: HTTPVersion?
    var target: [UInt8] = []
    var keepAlive = false
    var contentLength: Int?
}

/// Feeds `bytes` to a fresh parser in chunks of `chunk` bytes (0: all at once), continuing
/// after each complete request (pipelining) until a failure or the end.
func run(_ bytes: UnsafeRawBufferPointer, limits: HTTPRequestParser.Limits, chunk: Int) -> [Outcome] {
    var parser = HTTPRequestParser(limits: limits)
    var outcomes: [Outcome] = []
    var offset = 0
    let n = bytes.count
    while offset < n {
        let end = chunk == 0 ? n : min(n, offset + chunk)
        let slice = UnsafeRawBufferPointer(rebasing: bytes[offset..<end])
        let result = parser.parse(slice)
        precondition(result.consumed >= 0 && result.consumed <= slice.count, "consumed out of range")
        switch result.status {
        case .needMore:
            precondition(result.consumed == slice.count, "needMore must consume everything")
        case .complete:
            precondition(result.consumed > 0, "a complete request consumed nothing")
            let h = parser.head
            precondition(!h.target.isEmpty, "complete request without a target")
            precondition(h.target.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "target holds a control or space byte")
            precondition(h.target.first == UInt8(ascii: "/") || h.target == [UInt8(ascii: "*")], "target not origin-form")
            precondition(h.pathLength <= h.target.count)
            outcomes.append(Outcome(status: .complete, method: h.method, version: h.version, target: h.target,
                                    keepAlive: h.keepAlive, contentLength: h.contentLength))
        case .failed(let e):
            precondition([400, 413, 414, 431, 505].contains(e.status), "unexpected parse status \(e.status)")
            outcomes.append(Outcome(status: result.status))
            return outcomes
        }
        offset += result.consumed
    }
    return outcomes
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    // The server's defaults, and small limits (with bodies allowed) so that every limit
    // is reachable with short inputs.
    let small = HTTPRequestParser.Limits(maximumRequestLineBytes: 64, maximumHeaderBytes: 128,
                                         maximumHeaderCount: 4, maximumBodyBytes: 16)
    for limits in [HTTPRequestParser.Limits(), small] {
        let whole = run(bytes, limits: limits, chunk: 0)
        let byByte = run(bytes, limits: limits, chunk: 1)
        precondition(whole == byByte, "parsing whole and byte by byte disagree")
        let odd = run(bytes, limits: limits, chunk: 7)
        precondition(whole == odd, "parsing whole and in 7-byte chunks disagree")
    }
    return 0
}
