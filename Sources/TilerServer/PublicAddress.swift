import TilerHTTP

/// `--base-url`: the server's public address, such as `https://example.org/tiles`, checked
/// once at start-up. Every URL the server writes starts with it, so the server can sit
/// behind a reverse proxy under a path prefix.
///
/// Accepted: `http` or `https`, a host (a name, an IPv4 address or a bracketed IPv6
/// address) with an optional port, and an optional path of plain segments. Refused: user
/// information, a query, a fragment, `.` or `..` segments, empty segments, and any
/// character a URL would have to escape. A trailing `/` is dropped.
public struct BaseURL: Sendable, Hashable, CustomStringConvertible {
    /// `http` or `https`, lower case.
    public let scheme: String
    /// `host[:port]`, the host in lower case.
    public let authority: String
    /// `""` or `/first/second`: no trailing slash.
    public let path: String

    /// The longest base URL accepted.
    public static let maximumLength = 2048

    /// Parses and checks `text`; the error says what is wrong with it.
    public init(parsing text: String) throws(BaseURLError) {
        guard text.utf8.count <= Self.maximumLength else { throw .init(text, "is longer than \(Self.maximumLength) bytes") }
        guard let colon = text.firstIndex(of: ":") else { throw .init(text, "has no scheme; write it as https://host/path") }
        let scheme = text[..<colon].lowercased()
        guard scheme == "http" || scheme == "https" else {
            throw .init(text, "must start with http:// or https://, not \(scheme.prefix(20))://")
        }
        let afterScheme = text[text.index(after: colon)...]
        guard afterScheme.hasPrefix("//") else { throw .init(text, "must start with \(scheme)://") }
        let rest = afterScheme.dropFirst(2)
        if rest.contains("?") { throw .init(text, "must not have a query ('?')") }
        if rest.contains("#") { throw .init(text, "must not have a fragment ('#')") }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        var path = String(rest[slash...])
        if authority.contains("@") { throw .init(text, "must not carry a user name or password ('@')") }
        guard let checked = Self.checkedAuthority(authority) else {
            throw .init(text, "has no valid host (a name, an IPv4 address or [IPv6], then an optional :port from 1 to 65535)")
        }
        while path.hasSuffix("/") { path.removeLast() }
        if !path.isEmpty {
            for segment in path.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
                if segment.isEmpty { throw .init(text, "has an empty path segment ('//')") }
                if segment == "." || segment == ".." { throw .init(text, "has a '.' or '..' path segment") }
                guard Self.isPlainSegment(segment) else {
                    throw .init(
                        text,
                        "has a path character that must be escaped (allowed: letters, digits, - . _ ~ ! $ & ' ( ) * + , ; = : @ and %XX)")
                }
            }
        }
        self.scheme = scheme
        self.authority = checked
        self.path = path
    }

    /// `scheme://authority/path`, without a trailing slash.
    public var description: String { "\(scheme)://\(authority)\(path)" }

    /// `host[:port]` checked as a base URL's authority is (a name, an IPv4 address or a
    /// bracketed IPv6 address, then an optional port from 1 to 65535), the host in lower
    /// case; nil when it is not one. The `Host` and forwarded hosts are checked by it too.
    static func checkedAuthority(_ a: Substring) -> String? {
        var host = a, port: Substring?
        if a.hasPrefix("[") {
            guard let close = a.firstIndex(of: "]") else { return nil }
            host = a[...close]
            let after = a[a.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                port = after.dropFirst()
            }
            let inside = host.dropFirst().dropLast()
            guard !inside.isEmpty, inside.contains(":"),
                inside.utf8.allSatisfy({ isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") })
            else {
                return nil
            }
        } else {
            if let c = a.lastIndex(of: ":") {
                host = a[..<c]
                port = a[a.index(after: c)...]
            }
            guard !host.isEmpty, host.utf8.count <= 253, !host.hasPrefix("."), !host.hasPrefix("-"),
                host.utf8.allSatisfy({ isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") })
            else {
                return nil
            }
        }
        if let port {
            guard !port.isEmpty, port.count <= 5, port.utf8.allSatisfy(isDigit), let n = Int(port), (1...65535).contains(n) else {
                return nil
            }
        }
        return host.lowercased() + (port.map { ":" + $0 } ?? "")
    }

    private static func isPlainSegment(_ s: Substring) -> Bool {
        let u = Array(s.utf8)
        var i = 0
        while i < u.count {
            let b = u[i]
            if b == UInt8(ascii: "%") {
                guard i + 2 < u.count, isHexDigit(u[i + 1]), isHexDigit(u[i + 2]) else { return false }
                i += 3
                continue
            }
            guard isAlphanumeric(b) || "-._~!$&'()*+,;=:@".utf8.contains(b) else { return false }
            i += 1
        }
        return true
    }
}

/// Why a `--base-url` was refused.
public struct BaseURLError: Error, Sendable, Hashable, CustomStringConvertible {
    public let description: String

    init(_ text: String, _ problem: String) {
        description = "the base URL '\(text.prefix(200))' \(problem)"
    }
}

/// Where the URLs the server writes point, per request.
///
/// - With `--base-url`: every URL is absolute and starts with it, whatever the request
///   says; the documents that hold URLs are the same for every client and are cached.
/// - Without it, documents of the image API (`/images…`, `/visible`) hold root-relative
///   paths (`/images/ID/tiles/…`), which hold no host and are cached. The documents that
///   must hold absolute URLs (IIIF `id`s and services, Presentation manifests, the IIIF
///   redirect) are built per request from `http://` and the `Host` header, or, with
///   `--trust-proxy`, from `Forwarded` (`proto=`, `host=`) or `X-Forwarded-Proto` and
///   `X-Forwarded-Host`; they are never cached, so one client's forwarded host never
///   reaches another, and they say `Vary` on the headers they were built from.
public struct PublicAddress: Sendable {
    /// `--base-url`, or nil.
    public let base: BaseURL?
    /// `--trust-proxy`: believe the forwarded headers (only without `base`).
    public let trustProxy: Bool
    /// What every link in the image API's documents starts with: the base URL, or `""`
    /// for root-relative paths.
    public let linkPrefix: String
    /// Where the server listens, for clients that send no `Host` (HTTP/1.0).
    private let listenAuthority: String

    public init(base: BaseURL?, trustProxy: Bool, http: HTTPConfiguration) {
        self.base = base
        self.trustProxy = trustProxy
        linkPrefix = base?.description ?? ""
        listenAuthority = (http.host.contains(":") ? "[\(http.host)]" : http.host) + ":\(http.port)"
    }

    /// The absolute base URL for `head` (no trailing slash), and the `Vary` value a
    /// response built from it must carry (nil when it does not depend on the request).
    public func absoluteBase(for head: HTTPRequestHead) -> (url: String, vary: String?) {
        if let base { return (base.description, nil) }
        var scheme = "http", host: String?
        if trustProxy {
            let forwarded = ForwardedHeaders(head)
            if let s = forwarded.proto { scheme = s }
            host = forwarded.host
        }
        if host == nil, let h = plausibleAuthority(head.host) { host = h }
        let vary = trustProxy ? "Host, Forwarded, X-Forwarded-Proto, X-Forwarded-Host" : "Host"
        return ("\(scheme)://\(host ?? listenAuthority)", vary)
    }
}

/// The proto and host a trusted proxy forwarded: RFC 7239 `Forwarded` first (its first
/// element, the one the outermost proxy wrote), then the first values of
/// `X-Forwarded-Proto` and `X-Forwarded-Host`. A value that is not `http`/`https` or not
/// a plausible `host[:port]` is ignored.
struct ForwardedHeaders {
    var proto: String?
    var host: String?

    init(_ head: HTTPRequestHead) {
        if !head.forwarded.isEmpty {
            let first = head.forwarded.split(separator: UInt8(ascii: ","), maxSplits: 1, omittingEmptySubsequences: false)[0]
            for pair in first.split(separator: UInt8(ascii: ";")) {
                guard let eq = pair.firstIndex(of: UInt8(ascii: "=")) else { continue }
                let name = String(decoding: pair[pair.startIndex..<eq], as: UTF8.self)
                    .trimmingSpaces().lowercased()
                var value = String(decoding: pair[(eq + 1)...], as: UTF8.self).trimmingSpaces()
                if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = String(value.dropFirst().dropLast()) }
                switch name {
                case "proto": if proto == nil { proto = checkedScheme(value) }
                case "host": if host == nil { host = plausibleAuthority(Array(value.utf8)) }
                default: break
                }
            }
        }
        if proto == nil, let first = firstListValue(head.xForwardedProto) { proto = checkedScheme(first) }
        if host == nil, let first = firstListValue(head.xForwardedHost) { host = plausibleAuthority(Array(first.utf8)) }
    }
}

private func firstListValue(_ raw: [UInt8]) -> String? {
    guard !raw.isEmpty else { return nil }
    let first = raw.split(separator: UInt8(ascii: ","), maxSplits: 1, omittingEmptySubsequences: false)[0]
    let text = String(decoding: first, as: UTF8.self).trimmingSpaces()
    return text.isEmpty ? nil : text
}

private func checkedScheme(_ s: String) -> String? {
    let lower = s.lowercased()
    return lower == "http" || lower == "https" ? lower : nil
}

/// `host[:port]` as a request sent it, when it is one a base URL could hold
/// (`BaseURL.checkedAuthority`: a port from 1 to 65535, no `%`, `/` or other character a
/// URL would escape), the host in lower case; nil otherwise, and the value is ignored.
func plausibleAuthority(_ host: [UInt8]) -> String? {
    guard !host.isEmpty, host.count <= 255 else { return nil }
    return BaseURL.checkedAuthority(Substring(String(decoding: host, as: UTF8.self)))
}

extension String {
    fileprivate func trimmingSpaces() -> String {
        var s = Substring(self)
        while s.first == " " || s.first == "\t" { s.removeFirst() }
        while s.last == " " || s.last == "\t" { s.removeLast() }
        return String(s)
    }
}

@inline(__always) private func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }
@inline(__always) private func isHexDigit(_ b: UInt8) -> Bool {
    isDigit(b) || (b | 0x20 >= UInt8(ascii: "a") && b | 0x20 <= UInt8(ascii: "f"))
}
@inline(__always) private func isAlphanumeric(_ b: UInt8) -> Bool {
    isDigit(b) || (b | 0x20 >= UInt8(ascii: "a") && b | 0x20 <= UInt8(ascii: "z"))
}
