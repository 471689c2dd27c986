import Foundation
import Glibc
import Synchronization
import TilerHTTP
import TilerSystem

/// What a verified token opens, and while when.
struct Grant: Sendable {
    /// Globs of the image ids it opens (its claim `images`).
    let images: [String]
    /// `exp`, and `nbf` (or minus infinity), in seconds since 1970.
    let expires: Double
    let notBefore: Double

    func isValid(at now: Double) -> Bool { now < expires && now >= notBefore }

    /// Whether `images` holds `*` (a token for every image: asked on each of its requests).
    let opensAll: Bool

    init(images: [String], expires: Double, notBefore: Double) {
        self.images = images
        self.expires = expires
        self.notBefore = notBefore
        opensAll = images.contains("*")
    }

    func opens(_ id: String) -> Bool { opensAll || images.contains { AccessPolicy.glob($0, matches: id) } }
}

/// Why a token was refused. Said in the 401's message (never the token itself).
enum TokenProblem: Error, Equatable, CustomStringConvertible {
    case malformed(String)
    case unknownKey
    case algorithmMismatch
    case badSignature
    case expired
    case notYetValid
    case wrongIssuer
    case wrongAudience
    case missingClaim(String)

    var description: String {
        switch self {
        case let .malformed(why): "the token is not a JWT: \(why)"
        case .unknownKey: "the token's key (kid) is not one this server knows"
        case .algorithmMismatch: "the token's algorithm is not its key's"
        case .badSignature: "the token's signature does not verify"
        case .expired: "the token has expired"
        case .notYetValid: "the token is not valid yet (nbf)"
        case .wrongIssuer: "the token's issuer (iss) is not the one this server trusts"
        case .wrongAudience: "the token's audience (aud) does not name this server"
        case let .missingClaim(claim): "the token has no valid '\(claim)' claim"
        }
    }
}

extension AccessPolicy {
    /// The most bytes of a token's decoded header, and of its payload: a header is an
    /// algorithm and a key id, a payload a few claims and globs.
    static let maximumHeaderBytes = 1024
    static let maximumPayloadBytes = 3072
    /// The most globs one token's `images` may list.
    static let maximumImageGlobs = 256

    /// Verifies a JWS compact token (`HEADER.PAYLOAD.SIGNATURE`, RFC 7515/7519): the
    /// header's `kid` picks the key, its `alg` must be that key's, the signature is checked
    /// by the key's swift-crypto verifier before the payload is read, and then the claims:
    /// `exp` required, `nbf`, `iss` and `aud` (when the policy names them), `images`.
    func verify(_ token: UnsafeRawBufferPointer, now: Double) -> Result<Grant, TokenProblem> {
        guard !token.isEmpty, token.count <= HTTPRequestParser.maximumTokenBytes else {
            return .failure(.malformed("empty or longer than \(HTTPRequestParser.maximumTokenBytes) bytes"))
        }
        var dots: [Int] = []
        for i in token.indices where token[i] == UInt8(ascii: ".") {
            dots.append(i)
            if dots.count > 2 { return .failure(.malformed("more than three parts")) }
        }
        guard dots.count == 2 else { return .failure(.malformed("not three parts separated by dots")) }
        let headerPart = UnsafeRawBufferPointer(rebasing: token[..<dots[0]])
        let payloadPart = UnsafeRawBufferPointer(rebasing: token[(dots[0] + 1)..<dots[1]])
        let signaturePart = UnsafeRawBufferPointer(rebasing: token[(dots[1] + 1)...])
        guard let headerBytes = base64URLDecoded(headerPart, limit: Self.maximumHeaderBytes),
            let header = (try? JSONSerialization.jsonObject(with: headerBytes)) as? [String: Any]
        else { return .failure(.malformed("the header is not base64url JSON")) }
        guard let alg = header["alg"] as? String else { return .failure(.malformed("the header has no 'alg'")) }
        // RFC 7515 §4.1.11: a critical extension this server does not know refuses the token.
        guard header["crit"] == nil else { return .failure(.malformed("the header names critical extensions ('crit')")) }
        guard let kid = header["kid"] as? String, let key = keys[kid] else { return .failure(.unknownKey) }
        // The key decides the algorithm: `none`, or HS256 with an RSA key's public part as
        // its secret (algorithm confusion), never reaches a verifier.
        guard alg == key.alg else { return .failure(.algorithmMismatch) }
        guard let signature = base64URLDecoded(signaturePart, limit: 1024), !signature.isEmpty else {
            return .failure(.malformed("the signature is not base64url"))
        }
        let signed = UnsafeRawBufferPointer(rebasing: token[..<dots[1]])
        guard key.verifier.verify(signature, signs: signed) else { return .failure(.badSignature) }

        guard let payloadBytes = base64URLDecoded(payloadPart, limit: Self.maximumPayloadBytes),
            let claims = (try? JSONSerialization.jsonObject(with: payloadBytes)) as? [String: Any]
        else { return .failure(.malformed("the payload is not base64url JSON")) }
        func date(_ name: String) -> Double? {
            // A NumericDate: seconds, possibly with a fraction.
            guard let number = claims[name] as? NSNumber else { return nil }
            let value = number.doubleValue
            return value.isFinite ? value : nil
        }
        guard let expires = date("exp") else { return .failure(.missingClaim("exp")) }
        guard now < expires else { return .failure(.expired) }
        var notBefore = -Double.infinity
        if claims["nbf"] != nil {
            guard let nbf = date("nbf") else { return .failure(.missingClaim("nbf")) }
            guard nbf <= now else { return .failure(.notYetValid) }
            notBefore = nbf
        }
        if let issuer {
            guard claims["iss"] as? String == issuer else { return .failure(.wrongIssuer) }
        }
        if let audience {
            let named: [String]? =
                switch claims["aud"] {
                case let one as String: [one]
                case let many as [Any]: many as? [String]
                default: nil
                }
            guard named?.contains(audience) == true else { return .failure(.wrongAudience) }
        }
        let images: [String]
        switch claims["images"] {
        case let one as String: images = [one]
        case let many as [Any]:
            guard let globs = many as? [String] else { return .failure(.missingClaim("images")) }
            images = globs
        default: return .failure(.missingClaim("images"))
        }
        guard !images.isEmpty, images.count <= Self.maximumImageGlobs, images.allSatisfy({ !$0.isEmpty }) else {
            return .failure(.missingClaim("images"))
        }
        return .success(Grant(images: images, expires: expires, notBefore: notBefore))
    }

    /// Base64url without padding (RFC 7515 §2), strictly: any other byte, or a length no
    /// encoding has, is nil; so is a decoding longer than `limit`.
    func base64URLDecoded(_ text: UnsafeRawBufferPointer, limit: Int) -> Data? {
        guard text.count % 4 != 1, text.count / 4 * 3 <= limit else { return nil }
        var standard = [UInt8]()
        standard.reserveCapacity(text.count + 3)
        for b in text {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                standard.append(b)
            case UInt8(ascii: "-"): standard.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): standard.append(UInt8(ascii: "/"))
            default: return nil
            }
        }
        while standard.count % 4 != 0 { standard.append(UInt8(ascii: "=")) }
        return Data(base64Encoded: Data(standard))
    }
}

/// Verified tokens, by value, so that a tile request with a token seen before costs a
/// lookup, not a signature check. Each is kept with the generation of the policy it was
/// verified under and found only under that one: a new policy starts with no tokens, and
/// the old ones' slots are free to take. Bounded: a fixed table of `capacity` slots
/// (rounded up to a power of two), a new token taking the place of an old one when its
/// few slots are full. Only verified tokens go in; a refused token is checked again each time it comes,
/// which costs what a first good one does (`docs/reliability.md`, "Access").
final class TokenCache: Sendable {
    private struct Slot {
        var token: [UInt8]
        var grant: Grant
        var generation: UInt64
    }
    private let slots: Mutex<[Slot?]>
    private let mask: Int
    /// Slots a token may take, from its hash on.
    private static let probes = 4

    init(capacity: Int) {
        var size = 16
        while size < capacity { size <<= 1 }
        slots = Mutex([Slot?](repeating: nil, count: size))
        mask = size - 1
    }

    /// Where a token's slots start: from its last 16 bytes (its signature's, which no one
    /// but a key's holder chooses) and its length.
    private func start(_ token: UnsafeRawBufferPointer) -> Int {
        var h = UInt64(token.count)
        if token.count >= 16 {
            h ^= token.loadUnaligned(fromByteOffset: token.count - 16, as: UInt64.self)
            h ^= token.loadUnaligned(fromByteOffset: token.count - 8, as: UInt64.self) &* 0xFF51_AFD7_ED55_8CCD
        } else {
            for b in token { h = (h ^ UInt64(b)) &* 0x100_0000_01B3 }
        }
        h = (h ^ (h >> 33)) &* 0xC4CE_B9FE_1A85_EC53
        return Int(truncatingIfNeeded: h ^ (h >> 29)) & mask
    }

    /// How many tokens it holds for policy `generation`.
    func count(generation: UInt64) -> Int {
        slots.withLock { slots in slots.reduce(0) { $1?.generation == generation ? $0 + 1 : $0 } }
    }

    func grant(for token: UnsafeRawBufferPointer, generation: UInt64) -> Grant? {
        withGrant(for: token, generation: generation) { $0 }
    }

    /// `body` applied to the grant kept for `token` under policy `generation`, under the
    /// table's lock (the grant is not copied out: no retain and release of its globs), or
    /// nil when none is kept.
    func withGrant<R: Sendable>(
        for token: UnsafeRawBufferPointer, generation: UInt64, _ body: (borrowing Grant) -> R
    ) -> R? {
        let first = start(token)
        return slots.withLock { slots -> R? in
            // Read in place (no slot copied out: no retain and release of its arrays).
            slots.withUnsafeBufferPointer { table -> R? in
                for k in 0..<Self.probes {
                    let i = (first + k) & mask
                    guard table[i] != nil else { return nil }
                    if table[i]!.generation == generation, table[i]!.token.count == token.count,
                        table[i]!.token.withUnsafeBytes({ memcmp($0.baseAddress!, token.baseAddress!, token.count) == 0 })
                    {
                        return body(table[i]!.grant)
                    }
                }
                return nil
            }
        }
    }

    func insert(_ token: UnsafeRawBufferPointer, _ grant: Grant, generation: UInt64) {
        let first = start(token)
        let slot = Slot(token: Array(token), grant: grant, generation: generation)
        slots.withLock { slots in
            for k in 0..<Self.probes where slots[(first + k) & mask] == nil {
                slots[(first + k) & mask] = slot
                return
            }
            // Full: one of another policy or expired if any, else the first.
            let now = SystemClock.wallTime()
            let victim =
                (0..<Self.probes).first {
                    guard let old = slots[(first + $0) & mask] else { return true }
                    return old.generation != generation || !old.grant.isValid(at: now)
                } ?? 0
            slots[(first + victim) & mask] = slot
        }
    }
}
