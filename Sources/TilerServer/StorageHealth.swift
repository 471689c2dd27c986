import Foundation
import Logging
import ObjectStorage
import Synchronization
import TilerHTTP

/// Whether object storage answers, as the server's own requests found: a read or a
/// listing that fails as unavailable (no connection, a timeout, 429, 5xx, credentials
/// refused, an answer no store should give) marks storage down, any answer marks it up
/// again.
///
/// While storage is down, requests that need it are refused at once with 503 and
/// `Retry-After` (so they hold no thread and no client waits out a timeout), except one
/// at a time, at most one a second, which tries the store: when it answers, every request
/// goes through again.
/// The catalog's listing (every rescan interval) tries it too. Cached tiles, manifests
/// and `/images` never need storage, so they keep serving. `/healthz` stays 200 and
/// reports the state. Storage going down and coming back is logged once each.
final class StorageHealth: Sendable {
    private let log: Logger
    /// Seconds after which a request trying the store is presumed gone (its client left
    /// before a thread took it), so that another may try.
    private let retryAfter: Double

    private struct State {
        var downSince: Date?
        var lastError = ""
        var trying: Date?
        /// No request tries the store again before this (a second after the last try failed).
        var nextTry: Date?
    }

    private let state = Mutex(State())
    /// Seconds between tries while storage is down.
    static let tryInterval = 1.0

    init(retryAfter: Double, log: Logger) {
        self.retryAfter = retryAfter
        self.log = log
    }

    /// nil: go ahead (storage is up, or this request is the one that tries it); else the
    /// 503 to answer.
    func admit() -> HTTPError? {
        state.withLock { s -> HTTPError? in
            guard let since = s.downSince else { return nil }
            let now = Date()
            let busy = s.trying.map { now.timeIntervalSince($0) < retryAfter } ?? false
            if busy || s.nextTry.map({ now < $0 }) ?? false {
                let seconds = Int(now.timeIntervalSince(since).rounded())
                return HTTPError(503, "object storage has been unavailable for \(seconds) s; retry later")
            }
            s.trying = now
            return nil
        }
    }

    /// A request to storage was answered.
    func succeeded() {
        let back: Double? = state.withLock { s in
            defer {
                s.downSince = nil
                s.trying = nil
                s.nextTry = nil
            }
            return s.downSince.map { Date().timeIntervalSince($0) }
        }
        if let back { log.notice("object storage answers again after \(String(format: "%.1f", back)) s down") }
    }

    /// A request to storage failed as unavailable (`why` names it).
    func failed(_ why: String) {
        let first = state.withLock { s in
            defer {
                s.lastError = why
                s.trying = nil
                s.nextTry = Date().addingTimeInterval(Self.tryInterval)
            }
            guard s.downSince == nil else { return false }
            s.downSince = Date()
            return true
        }
        if first {
            log.error(
                "object storage is unavailable (\(why)); requests that need it get 503 or 504 until it answers, cached tiles are still served"
            )
        }
    }

    /// Why a request to storage failed, for the log line and `/healthz`: the error, and
    /// what it means when that is not plain.
    static func reason(_ error: S3Error) -> String {
        if error.isUnavailable { return error.description }
        if error.isAccessRefused {
            return "it refuses the server's credentials (\(error)); check them: requests are served again once they work"
        }
        return "it answered what no store should (\(error)), a fault of the store or of a proxy in front of it"
    }

    /// For `/healthz`: nil while up; else how long it has been down and the last error.
    var outage: (seconds: Double, error: String)? {
        state.withLock { s in s.downSince.map { (Date().timeIntervalSince($0), s.lastError) } }
    }
}
