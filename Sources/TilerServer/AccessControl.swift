import Foundation
import Glibc
import Logging
import Synchronization
import TilerCore
import TilerHTTP
import TilerSystem

/// Private images (`tiler serve --access POLICY.json`): the policy in force, re-read when
/// its file or a key file changes (a bad new file is logged and the last good policy
/// stays), the verified tokens, and the one question every route asks before it reveals
/// anything of an image: may this request see this id?
///
/// A request's token is taken from `Authorization: Bearer`, the cookie `tiler_token` or
/// the query's `token`; each one sent is judged, and any that opens the id is enough. No
/// token ever reaches a log: the access log's `path` already hides the query's `token`.
public final class AccessControl: Sendable {
    /// A policy and its generation.
    final class Snapshot: Sendable {
        let policy: AccessPolicy
        /// Tells apart the decisions memoized under each policy (`Pyramid.accessMemo`) and
        /// the tokens verified under each (`tokens`).
        let generation: UInt64
        init(policy: AccessPolicy, generation: UInt64) {
            self.policy = policy
            self.generation = generation
        }
    }

    public let path: String
    let tokenCacheEntries: Int
    let log: Logger
    private let state: Mutex<(snapshot: Snapshot, signature: [FileSignature])>
    /// The generation of the snapshot in force, stored after it: `isPrivate` reads this,
    /// not the snapshot (a lock, a retain and a release), when the pyramid's memo is current.
    private let generation = Atomic<UInt64>(1)
    /// The tokens verified, each under the generation of its policy.
    private let tokens: TokenCache
    private let watching = Atomic<Bool>(false)
    /// Access tokens of the IIIF token service: opaque, random, accepted by the probe only.
    private let accessTokens = Mutex<[String: (grant: Grant, cookie: [UInt8])]>([:])
    /// How long an access token lives at most (less when its cookie's token ends sooner).
    public static let accessTokenLifetime = 3600.0

    /// Reads the policy at `path`; throws (the server refuses to start) when it is bad.
    public init(path: String, tokenCacheEntries: Int, log: Logger) throws(AccessPolicyError) {
        self.path = path
        self.tokenCacheEntries = tokenCacheEntries
        self.log = log
        let policy = try AccessPolicy.load(from: path)
        tokens = TokenCache(capacity: tokenCacheEntries)
        state = Mutex(
            (Snapshot(policy: policy, generation: 1), Self.signature(path, policy)))
    }

    /// How often `tiler serve` looks whether the policy or a key file changed, seconds.
    public static let watchInterval = 2.0

    var snapshot: Snapshot { state.withLock { $0.snapshot } }
    /// How many tokens are kept as verified under the policy in force.
    var verifiedTokens: Int { tokens.count(generation: snapshot.generation) }
    public var policy: AccessPolicy { snapshot.policy }

    /// Re-reads the policy every `interval` seconds when its file or a key file changed,
    /// on a thread of its own, until `stopWatching` (the thread holds this object until
    /// then: a weak reference would give it a side table, and every request's retain and
    /// release of it would take the runtime's slow path, some 250 instructions a request).
    public func startWatching(every interval: Double) {
        guard !watching.exchange(true, ordering: .relaxed) else { return }
        let thread = Thread {
            while true {
                Thread.sleep(forTimeInterval: interval)
                guard self.watching.load(ordering: .relaxed) else { return }
                self.reloadIfChanged()
            }
        }
        thread.name = "tiler-access"
        thread.start()
    }

    public func stopWatching() { watching.store(false, ordering: .relaxed) }

    /// Loads the policy again if a file it was read from changed; a file that does not
    /// load is logged (once per change) and the policy in force stays.
    public func reloadIfChanged() {
        let (old, oldSignature) = state.withLock { ($0.snapshot, $0.signature) }
        let current = Self.signature(path, old.policy)
        guard current != oldSignature else { return }
        do {
            let policy = try AccessPolicy.load(from: path)
            let next = Snapshot(policy: policy, generation: old.generation + 1)
            state.withLock { $0 = (next, Self.signature(path, policy)) }
            generation.store(next.generation, ordering: .releasing)
            log.info(
                "access policy reloaded", metadata: ["policy": "\(path)", "rules": "\(policy.rules.count)", "keys": "\(policy.keys.count)"])
        } catch {
            state.withLock { $0.signature = current }
            log.error("access policy not reloaded; the last good one stays in force", metadata: ["error": "\(error)"])
        }
    }

    /// What tells a file changed: device, inode, size and modification time (or that it
    /// is missing). The policy file's and each key file's.
    struct FileSignature: Equatable, Sendable {
        var device: UInt64 = 0, inode: UInt64 = 0, size: Int64 = -1, seconds = 0, nanoseconds = 0
    }

    static func signature(_ path: String, _ policy: AccessPolicy) -> [FileSignature] {
        [path].map(fileSignature) + policy.keyFiles.map(fileSignature)
    }

    static func fileSignature(_ path: String) -> FileSignature {
        guard let info = try? FileSystem.info(path) else { return FileSignature() }
        return FileSignature(
            device: info.device, inode: info.inode, size: Int64(info.size),
            seconds: Int(info.modificationSeconds), nanoseconds: Int(info.modificationNanoseconds))
    }

    // MARK: - Decisions

    /// Whether `pyramid` is private under the policy in force, memoized on the pyramid
    /// per policy generation (a tile request pays one atomic load, not the rules' globs).
    func isPrivate(_ pyramid: Pyramid) -> Bool {
        let memo = pyramid.accessMemo.load(ordering: .relaxed)
        if memo >> 1 == generation.load(ordering: .acquiring) { return memo & 1 == 1 }
        return isPrivate(pyramid, under: snapshot)
    }

    private func isPrivate(_ pyramid: Pyramid, under snapshot: Snapshot) -> Bool {
        let memo = pyramid.accessMemo.load(ordering: .relaxed)
        if memo >> 1 == snapshot.generation { return memo & 1 == 1 }
        let isPrivate = snapshot.policy.isPrivate(pyramid.id.rawValue)
        pyramid.accessMemo.store(snapshot.generation << 1 | (isPrivate ? 1 : 0), ordering: .relaxed)
        return isPrivate
    }

    /// Throws 401 (no valid token) or 403 (valid tokens, none opening it) unless `head`
    /// may see the image `id`, which need not exist: an unknown id under a private rule
    /// is refused the same way, so no status tells what exists. Returns whether `id` is
    /// private (its responses are then `Cache-Control: private`).
    @discardableResult
    func authorize(_ id: String, _ head: HTTPRequestHead) throws(HTTPError) -> Bool {
        let snapshot = snapshot
        guard snapshot.policy.isPrivate(id) else { return false }
        try authorize(id, head, under: snapshot)
        return true
    }

    /// `authorize` for a pyramid already found (the plain-tile fast path): true when it
    /// is private and `head` may see it, false when it is public; throws otherwise.
    /// `queryToken`, when the caller has found it, is where the target's `?token=` value
    /// is (one with nothing to decode or split: `queryToken(_:)` would find it there).
    func authorize(_ pyramid: Pyramid, _ head: HTTPRequestHead, queryToken hint: ShareToken? = nil) throws(HTTPError)
        -> Bool
    {
        // What most requests for a private tile are: the pyramid's privacy memoized under
        // the policy in force, and a token verified under it, still valid and opening the
        // image, judged in one look at the verified tokens: no policy snapshot (a lock, a
        // retain and a release). Anything else is judged below, under the snapshot.
        let current = generation.load(ordering: .acquiring)
        let memo = pyramid.accessMemo.load(ordering: .relaxed)
        if memo >> 1 == current {
            guard memo & 1 == 1 else { return false }
            let now = SystemClock.wallTime()
            // The header, cookie or share link's token this connection sent before, judged
            // then (`CredentialMemo`): no lookup.
            let subject = pyramid.serial
            if head.credentialMemo?.recalls(
                oneOf: head.authorizationSerial, head.cookieTokenSerial, hint?.number ?? 0, scope: current,
                subject: subject, at: now) == true
            {
                return true
            }
            if opensByAKeptToken(pyramid, head, hint, generation: current, now: now) { return true }
        }
        let snapshot = snapshot
        guard isPrivate(pyramid, under: snapshot) else { return false }
        try authorize(pyramid.id.rawValue, head, under: snapshot)
        return true
    }

    /// The fast path's look at the verified tokens (its memo missed): whether a token the
    /// request carries is kept, valid and opens `pyramid`; if one does, the connection's
    /// memo notes it. Apart from `authorize`, so that the memo's hit costs no retain.
    @inline(never)
    private func opensByAKeptToken(
        _ pyramid: Pyramid, _ head: HTTPRequestHead, _ hint: ShareToken?, generation current: UInt64, now: Double
    ) -> Bool {
        let subject = pyramid.serial
        /// Whether `token` is a kept token that opens the image; if it is, it is noted in
        /// the connection's memo under `number` (0: not noted), or, for a share link's
        /// token, under the number the memo gives the bytes it keeps.
        func opens(_ token: UnsafeRawBufferPointer, number: UInt64, isQueryToken: Bool = false) -> Bool {
            guard let judgement = cachedJudgement(token, opens: pyramid.id.rawValue, generation: current, now: now),
                judgement.opens
            else { return false }
            if let memo = head.credentialMemo {
                let n = isQueryToken ? memo.keep(queryToken: token) : number
                if n != 0 {
                    memo.note(
                        n, scope: current, subject: judgement.opensAll ? 0 : subject,
                        validFrom: judgement.notBefore, validUntil: judgement.expires)
                }
            }
            return true
        }
        if let bearer = Self.bearerToken(head.authorization),
            head.authorization.withUnsafeBytes({
                opens(UnsafeRawBufferPointer(rebasing: $0[bearer]), number: head.authorizationSerial)
            })
        {
            return true
        }
        if !head.cookieToken.isEmpty, head.cookieToken.withUnsafeBytes({ opens($0, number: head.cookieTokenSerial) }) {
            return true
        }
        if let hint,
            head.target.withUnsafeBytes({
                opens(UnsafeRawBufferPointer(rebasing: $0[hint.range]), number: 0, isQueryToken: true)
            })
        {
            return true
        }
        return false
    }

    /// Which ids `head` may list (and so see): for `/images` and the IIIF collection. The
    /// request's tokens are judged once, not once per image listed.
    func visibility(for head: HTTPRequestHead) -> (String) -> Bool {
        let snapshot = snapshot
        let now = SystemClock.wallTime()
        var grants: [Grant] = []
        Self.forEachToken(in: head) { token in
            if case let .success(grant) = grant(for: token, under: snapshot, now: now) { grants.append(grant) }
            return false
        }
        return { id in !snapshot.policy.isPrivate(id) || grants.contains { $0.opens(id) } }
    }

    /// Whether `token`, verified before and still valid, opens `id`; nil when no such token
    /// is kept. Judged where it is kept: no grant copied out of the table (no retain and
    /// release of its globs), and `id` not even made for a token that opens every image.
    private func cachedDecision(
        _ token: UnsafeRawBufferPointer, opens id: @autoclosure () -> String, generation: UInt64, now: Double
    ) -> Bool? {
        cachedJudgement(token, opens: id(), generation: generation, now: now)?.opens
    }

    /// `cachedDecision` with what a connection's memo notes of a token that opens `id`.
    private func cachedJudgement(
        _ token: UnsafeRawBufferPointer, opens id: @autoclosure () -> String, generation: UInt64, now: Double
    ) -> Judgement? {
        tokens.withGrant(for: token, generation: generation) { grant -> Judgement? in
            guard grant.isValid(at: now) else { return nil }
            return Judgement(
                opens: grant.opensAll || grant.opens(id()), opensAll: grant.opensAll, notBefore: grant.notBefore,
                expires: grant.expires)
        } ?? nil
    }

    /// A kept token judged for one image: whether it opens it, whether it opens every
    /// image, and when it holds.
    private struct Judgement {
        let opens: Bool
        let opensAll: Bool
        let notBefore: Double
        let expires: Double
    }

    /// What `token` opens, from the verified tokens or verified now (and then kept).
    private func grant(
        for token: UnsafeRawBufferPointer, under snapshot: Snapshot, now: Double
    ) -> Result<Grant, TokenProblem> {
        if let cached = tokens.grant(for: token, generation: snapshot.generation), cached.isValid(at: now) { return .success(cached) }
        let verified = snapshot.policy.verify(token, now: now)
        if case let .success(grant) = verified { tokens.insert(token, grant, generation: snapshot.generation) }
        return verified
    }

    /// Calls `body` with each token the request carries (Bearer, cookie, query) until it
    /// returns true.
    private static func forEachToken(in head: HTTPRequestHead, _ body: (UnsafeRawBufferPointer) -> Bool) {
        if let bearer = bearerToken(head.authorization) {
            if head.authorization.withUnsafeBytes({ body(UnsafeRawBufferPointer(rebasing: $0[bearer])) }) { return }
        }
        if !head.cookieToken.isEmpty, head.cookieToken.withUnsafeBytes(body) { return }
        switch queryToken(head.target) {
        case .none: break
        case let .raw(range): _ = head.target.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[range])) }
        case let .decoded(bytes): _ = bytes.withUnsafeBytes(body)
        }
    }

    private func authorize(_ id: String, _ head: HTTPRequestHead, under snapshot: Snapshot) throws(HTTPError) {
        let now = SystemClock.wallTime()
        var refused: TokenProblem?
        var valid = false
        var opened = false
        Self.forEachToken(in: head) { token in
            if let opens = cachedDecision(token, opens: id, generation: snapshot.generation, now: now) {
                valid = true
                opened = opens
                return opened
            }
            switch grant(for: token, under: snapshot, now: now) {
            case let .success(grant):
                valid = true
                opened = grant.opens(id)
            case let .failure(problem):
                refused = refused ?? problem
            }
            return opened
        }
        if opened { return }
        if valid { throw HTTPError(403, "no token sent opens image '\(id.prefix(200))'") }
        if let refused {
            throw HTTPError(401, "\(refused)", challenge: #"Bearer realm="tiler", error="invalid_token""#)
        }
        throw HTTPError(
            401, "image '\(id.prefix(200))' is private: send a token (Authorization: Bearer, the cookie tiler_token or ?token=)",
            challenge: #"Bearer realm="tiler""#)
    }

    // MARK: - IIIF access tokens

    enum AccessTokenIssue { case issued(String, expiresIn: Int), refused(profile: String) }

    /// An access token for the IIIF probe, from the request's `tiler_token` cookie: the
    /// profile of the error (`missingAspect`, `expiredAspect`, `invalidAspect`) when it
    /// has none or a bad one. At most `tokenCacheEntries` live at once; the oldest expire.
    func issueAccessToken(_ head: HTTPRequestHead) -> AccessTokenIssue {
        guard !head.cookieToken.isEmpty else { return .refused(profile: "missingAspect") }
        let now = SystemClock.wallTime()
        let verified = head.cookieToken.withUnsafeBytes { snapshot.policy.verify($0, now: now) }
        let grant: Grant
        switch verified {
        case let .success(g): grant = g
        case .failure(.expired): return .refused(profile: "expiredAspect")
        case .failure: return .refused(profile: "invalidAspect")
        }
        var random = SystemRandomNumberGenerator()  // getrandom(2): fit for secrets
        let bytes = (0..<4).flatMap { _ in withUnsafeBytes(of: random.next() as UInt64) { Array($0) } }
        let token = TokenMinter.base64URL(Data(bytes))
        let expires = min(grant.expires, now + Self.accessTokenLifetime)
        let limited = Grant(images: grant.images, expires: expires, notBefore: grant.notBefore)
        accessTokens.withLock { tokens in
            if tokens.count >= tokenCacheEntries {
                tokens = tokens.filter { $0.value.grant.isValid(at: now) }
                while tokens.count >= tokenCacheEntries, let oldest = tokens.min(by: { $0.value.grant.expires < $1.value.grant.expires }) {
                    tokens[oldest.key] = nil
                }
            }
            tokens[token] = (limited, head.cookieToken)
        }
        return .issued(token, expiresIn: max(1, Int(expires - now)))
    }

    /// What the request's access token (`Authorization: Bearer`, from the token service)
    /// opens, if it is one and still valid.
    func accessTokenGrant(_ head: HTTPRequestHead) -> Grant? {
        guard let range = Self.bearerToken(head.authorization) else { return nil }
        let token = String(decoding: head.authorization[range], as: UTF8.self)
        let now = SystemClock.wallTime()
        return accessTokens.withLock { $0[token]?.grant }.flatMap { $0.isValid(at: now) ? $0 : nil }
    }

    /// Forgets the access tokens issued from `cookie` (logout).
    func revokeAccessTokens(issuedFrom cookie: [UInt8]) {
        guard !cookie.isEmpty else { return }
        accessTokens.withLock { tokens in tokens = tokens.filter { $0.value.cookie != cookie } }
    }

    /// The token's range in an `Authorization` value `Bearer TOKEN` (scheme in any case).
    static func bearerToken(_ value: [UInt8]) -> Range<Int>? {
        guard value.count > 7 else { return nil }
        // "bearer" in any case, then a space, in one word: the six letters ORed with 0x20
        // (only 'B' and 'b' become 'b'), the seventh byte as it is.
        let word = value.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
        guard (word | 0x0000_2020_2020_2020) & 0x00FF_FFFF_FFFF_FFFF == 0x0020_7265_7261_6562 else { return nil }
        var start = 7
        while start < value.count, value[start] == UInt8(ascii: " ") { start += 1 }
        return start < value.count ? start..<value.count : nil
    }

    enum QueryToken { case none, raw(Range<Int>), decoded([UInt8]) }

    /// Where a share link's token is (`?token=JWT`): the value's range when the query that
    /// starts at `q` (its `?`) is `token=` and a non-empty value with nothing to split or
    /// decode (no `&`, `%` or `#`), else nil. One scan, sixteen bytes at a time. The
    /// plain-tile fast path answers such a tile; `queryToken` finds the same range.
    static func plainQueryToken(_ t: UnsafeBufferPointer<UInt8>, query q: Int) -> Range<Int>? {
        guard startsTokenQuery(t, at: q) else { return nil }
        return plainValue(t, from: q + 7)
    }

    /// Whether `t` holds `?token=` and a byte more at `q`: seven bytes of one word.
    private static func startsTokenQuery(_ t: UnsafeBufferPointer<UInt8>, at q: Int) -> Bool {
        t.count > q + 7
            && UnsafeRawPointer(t.baseAddress! + q).loadUnaligned(as: UInt64.self) & 0x00FF_FFFF_FFFF_FFFF
                == UInt64(littleEndian: 0x003D_6E65_6B6F_743F)
    }

    /// `value..<t.count` when the rest of `t` has nothing to split or decode (no `%`, `&`
    /// or `#`), else nil.
    private static func plainValue(_ t: UnsafeBufferPointer<UInt8>, from value: Int) -> Range<Int>? {
        let rest = UnsafeBufferPointer(rebasing: t[value...])
        let refused = ByteScan.firstIndex(in: rest, ofAny: UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "#"), UInt8(ascii: "#"))
        return refused == rest.count ? value..<t.count : nil
    }

    /// A share link's token as the plain-tile fast path found it: where it is in the
    /// target, and its number in the connection's memo when the memo keeps these bytes
    /// (`CredentialMemo.keep(queryToken:)`), else 0.
    struct ShareToken {
        let range: Range<Int>
        let number: UInt64
    }

    /// `plainQueryToken` for a connection with a memo: the token it keeps is found by one
    /// compare and not scanned (it was plain when it was kept).
    static func plainQueryToken(_ t: UnsafeBufferPointer<UInt8>, query q: Int, memo: CredentialMemo?) -> ShareToken? {
        guard startsTokenQuery(t, at: q) else { return nil }
        let value = q + 7
        if let memo {
            let number = memo.number(ofQueryToken: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: t[value...])))
            if number != 0 { return ShareToken(range: value..<t.count, number: number) }
        }
        return plainValue(t, from: value).map { ShareToken(range: $0, number: 0) }
    }

    /// Whether `target` holds `token=` at `start` (six bytes that are there).
    private static func isTokenName(_ target: UnsafeBufferPointer<UInt8>, at start: Int) -> Bool {
        target[start] == UInt8(ascii: "t") && target[start + 1] == UInt8(ascii: "o") && target[start + 2] == UInt8(ascii: "k")
            && target[start + 3] == UInt8(ascii: "e") && target[start + 4] == UInt8(ascii: "n")
            && target[start + 5] == UInt8(ascii: "=")
    }

    /// The query's `token` (the first), as sent or percent-decoded.
    static func queryToken(_ target: [UInt8]) -> QueryToken {
        let (q, plain) = target.withUnsafeBufferPointer { t -> (Int, Range<Int>?) in
            let q = ByteScan.firstIndex(in: t, ofAny: UInt8(ascii: "?"), UInt8(ascii: "?"), UInt8(ascii: "?"), UInt8(ascii: "?"))
            return (q, q < t.count ? plainQueryToken(t, query: q) : nil)
        }
        guard q < target.count else { return .none }
        if let plain { return .raw(plain) }
        let end = target[q...].firstIndex(of: UInt8(ascii: "#")) ?? target.count
        var start = q + 1
        while start < end {
            let stop = target[start..<end].firstIndex(of: UInt8(ascii: "&")) ?? end
            if stop - start > 6, target.withUnsafeBufferPointer({ isTokenName($0, at: start) }) {
                let value = (start + 6)..<stop
                guard target[value].contains(UInt8(ascii: "%")) else {
                    return .raw(value)
                }
                guard let decoded = percentDecodedBytes(target[value]) else { return .decoded([]) }
                return .decoded(decoded)
            }
            start = stop + 1
        }
        return .none
    }
}

extension AccessPolicy {
    /// The key files it was read from (`secretFile`, `publicKeyFile`), resolved.
    var keyFiles: [String] { keys.values.map(\.file).sorted() }
}
