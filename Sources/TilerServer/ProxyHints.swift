import Foundation
import Logging
import Synchronization
import TilerHTTP

/// Warnings for a reverse proxy set up half-way, each logged at most once an hour:
///
/// - a request carries `X-Forwarded-Prefix` (a proxy that strips a path prefix says so
///   with it) while the server has no `--base-url`: the viewer works under the prefix
///   (it asks for everything relative to its page), but the links in the documents the
///   server writes (manifests, DeepZoom, IIIF) leave it;
/// - a request names a path the server does not own whose later segments are one it does
///   (`/some/prefix/images/…`, `/some/prefix/`): a proxy passing its prefix on unstripped.
///
/// A warning names the prefix (checked to be a plain path, else not shown), never the
/// rest of the path, a query or a header's other values, so no token reaches the log.
final class ProxyHints: Sendable {
    /// `--base-url`'s path, or nil without one.
    private let basePath: String?
    /// The first path segments some route answers.
    private let ownedSegments: Set<String>
    private let log: Logger
    private let interval: Duration
    private let lastForwardedPrefix = Mutex<ContinuousClock.Instant?>(nil)
    private let lastForeignPath = Mutex<ContinuousClock.Instant?>(nil)

    init(basePath: String?, ownedSegments: Set<String>, log: Logger, interval: Duration = .seconds(3600)) {
        self.basePath = basePath
        self.ownedSegments = ownedSegments
        self.log = log
        self.interval = interval
    }

    /// Notes a request's `X-Forwarded-Prefix` (called only when it has one).
    func sawForwardedPrefix(_ head: HTTPRequestHead) {
        guard basePath == nil, due(lastForwardedPrefix) else { return }
        let first = head.xForwardedPrefix.split(separator: UInt8(ascii: ","), maxSplits: 1)[0]
        let prefix = Self.shown(String(decoding: first, as: UTF8.self).trimmingCharacters(in: .whitespaces))
        log.warning(
            """
            a proxy forwards requests under the path prefix \(prefix) (X-Forwarded-Prefix) but tiler has no --base-url: \
            the viewer works there, but the links in manifests, DeepZoom and IIIF documents leave the prefix; \
            start tiler with --base-url (TILER_BASE_URL) set to the public address, such as https://HOST\(prefix)
            """)
    }

    /// Notes a request whose first segment no route answers.
    func sawForeignPath(_ segments: [String]) {
        guard segments.count >= 2, let owned = segments.dropFirst().firstIndex(where: ownedSegments.contains) else { return }
        // `/some/prefix/`: the page; `/some/prefix/images/…`: the rest.
        let prefixSegments = segments[..<owned].last == "" ? segments[..<(owned - 1)] : segments[..<owned]
        guard !prefixSegments.isEmpty, due(lastForeignPath) else { return }
        let prefix = Self.shown("/" + prefixSegments.joined(separator: "/"))
        log.warning(
            """
            requests arrive for \(prefix)/…, a path tiler does not serve: a proxy that puts tiler under a path prefix \
            must strip it (nginx: proxy_pass http://tiler:8080/; with the trailing slash), and --base-url \
            (TILER_BASE_URL) should name the public address, such as https://HOST\(prefix)
            """)
    }

    /// Whether a warning is due (none logged within `interval`), noting that one is.
    private func due(_ last: borrowing Mutex<ContinuousClock.Instant?>) -> Bool {
        let now = ContinuousClock.now
        return last.withLock { last in
            if let previous = last, previous.duration(to: now) < interval { return false }
            last = now
            return true
        }
    }

    /// `path` when it is a plain path of at most 100 bytes, else a note that it is not shown.
    private static func shown(_ path: String) -> String {
        let plain =
            path.utf8.count <= 100 && path.hasPrefix("/")
            && path.utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b | 0x20 >= 0x61 && b | 0x20 <= 0x7A) || "-._~/".utf8.contains(b)
            }
        return plain ? path : "(a prefix not shown)"
    }
}
