import TilerHTTP
import TilerServer

/// Parses `GET <target> HTTP/1.1` with the server's parser and returns the head, or nil
/// when the parser refuses the target (then the server answers 400 and no route runs).
func head(forTarget target: UnsafeRawBufferPointer) -> HTTPRequestHead? {
    var request = Array("GET ".utf8)
    request += target
    request += Array(" HTTP/1.1\r\nHost: fuzz\r\n\r\n".utf8)
    var parser = HTTPRequestParser()
    let result = request.withUnsafeBytes { parser.parse($0) }
    guard case .complete = result.status else { return nil }
    return parser.head
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0, size <= 4096 else { return 0 }
    guard let head = head(forTarget: UnsafeRawBufferPointer(start: data, count: size)) else { return 0 }
    do {
        let request = try Request(head: head)
        // The path rules every route relies on: no segment may climb or hide a separator.
        for s in request.segments {
            precondition(s != "." && s != "..", "a '.' or '..' segment reached the routes")
            precondition(!s.utf8.contains(UInt8(ascii: "/")) && !s.utf8.contains(0) && !s.utf8.contains(UInt8(ascii: "\\")),
                         "a segment holds '/', '\\\\' or NUL")
        }
        let pathSlashes = head.target[..<head.pathLength].filter { $0 == UInt8(ascii: "/") }.count
        precondition(request.segments.isEmpty || request.segments.count == pathSlashes, "segment count != slashes")
    } catch {
        precondition(error.status == 400, "path refused with \(error.status)")
    }
    do {
        let request = try Request(head: head)
        let query = head.target.firstIndex(of: UInt8(ascii: "?")).map { head.target[($0 + 1)...] } ?? []
        let items = try request.queryItems()
        precondition(items.count <= query.filter { $0 == UInt8(ascii: "&") }.count + 1, "more items than '&'-separated parts")
    } catch {
        precondition(error.status == 400, "query refused with \(error.status)")
    }
    return 0
}
