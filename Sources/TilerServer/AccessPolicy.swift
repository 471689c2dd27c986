import Foundation
import JWTKit
import Synchronization
import TilerHTTP

/// `tiler serve --access POLICY.json`: which images are private, and the keys whose tokens
/// open them (`../shared/docs/product.md`, "Private images").
///
/// ```json
/// {"keys": [{"kid": "site", "alg": "HS256", "secretFile": "site.key"},
///           {"kid": "idp", "alg": "RS256", "publicKeyFile": "idp.pem"}],
///  "issuer": "https://login.example.org", "audience": "tiler",
///  "loginURL": "https://example.org/login",
///  "rules": [{"images": "public-*", "access": "public"},
///            {"images": "*", "access": "token"}]}
/// ```
///
/// Rules are tried in order and the first whose glob (`fnmatch(3)`: `*`, `?`, `[…]`)
/// matches the id decides; an id no rule matches is private. Key files are named relative
/// to the policy's folder. Everything is checked when the file is read: an unknown field,
/// a key that does not load, a secret shorter than its hash (RFC 7518 §3.2), a duplicate
/// `kid` are errors, so a typo never opens an image.
public struct AccessPolicy: Sendable {
    public enum Access: String, Sendable { case `public`, token }

    public struct Rule: Sendable {
        public let images: String
        public let access: Access
    }

    /// A key as the policy names it; `algorithm` verifies the tokens it signed.
    public struct Key: Sendable {
        public let kid: String
        /// `HS256` … `ES384`: the key, never a token's header, decides it.
        public let alg: String
        /// The file it was read from.
        let file: String
        let algorithm: any JWTAlgorithm
    }

    public let rules: [Rule]
    public let keys: [String: Key]
    public let issuer: String?
    public let audience: String?
    public let loginURL: String?

    /// The algorithms a key may have, and for HMAC the shortest secret (the hash's size).
    static let algorithms: [String: Int] = [
        "HS256": 32, "HS384": 48, "HS512": 64, "RS256": 0, "RS384": 0, "RS512": 0, "ES256": 0, "ES384": 0,
    ]
    /// The largest policy file and key file read: a policy is a few rules, a key a few KB.
    static let maximumFileBytes = 1 << 20
    /// Most rules, keys and globs: a policy is written by hand.
    static let maximumEntries = 10_000

    /// Whether `id` is private: the first rule whose glob matches decides; none, private.
    public func isPrivate(_ id: String) -> Bool {
        for rule in rules where AccessPolicy.glob(rule.images, matches: id) { return rule.access == .token }
        return true
    }

    /// `fnmatch(3)` with no flags: `*` and `?` match any characters, `[…]` a class.
    static func glob(_ pattern: String, matches id: String) -> Bool {
        if pattern == "*" { return true }
        return pattern.withCString { p in id.withCString { fnmatch(p, $0, 0) == 0 } }
    }

    /// Reads and checks the policy at `path`; every problem is an `AccessPolicyError`
    /// naming the file and the field.
    public static func load(from path: String) throws(AccessPolicyError) -> AccessPolicy {
        let data = try read(path, what: "the access policy")
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw AccessPolicyError("\(path) is not JSON: \(error.localizedDescription)")
        }
        guard let top = object as? [String: Any] else { throw AccessPolicyError("\(path) must hold a JSON object") }
        let known: Set = ["keys", "issuer", "audience", "loginURL", "rules"]
        if let unknown = top.keys.filter({ !known.contains($0) }).sorted().first {
            throw AccessPolicyError("\(path): unknown field '\(unknown)' (the fields are \(known.sorted().joined(separator: ", ")))")
        }
        let folder = (path as NSString).deletingLastPathComponent
        func string(_ name: String, in dictionary: [String: Any], _ place: String) throws(AccessPolicyError) -> String? {
            guard let value = dictionary[name] else { return nil }
            guard let text = value as? String, !text.isEmpty else {
                throw AccessPolicyError("\(path): \(place)'\(name)' must be a non-empty string")
            }
            return text
        }
        let issuer = try string("issuer", in: top, "")
        let audience = try string("audience", in: top, "")
        let loginURL = try string("loginURL", in: top, "")
        if let loginURL, URL(string: loginURL)?.scheme.map({ ["http", "https"].contains($0.lowercased()) }) != true {
            throw AccessPolicyError("\(path): 'loginURL' must be an http or https URL, not '\(loginURL)'")
        }

        guard let ruleList = top["rules"] as? [Any] else { throw AccessPolicyError("\(path): 'rules' must be a list") }
        guard ruleList.count <= maximumEntries else { throw AccessPolicyError("\(path): more than \(maximumEntries) rules") }
        var rules: [Rule] = []
        for (i, entry) in ruleList.enumerated() {
            let place = "rule \(i + 1): "
            guard let rule = entry as? [String: Any] else { throw AccessPolicyError("\(path): \(place)must be an object") }
            if let unknown = rule.keys.filter({ $0 != "images" && $0 != "access" }).sorted().first {
                throw AccessPolicyError("\(path): \(place)unknown field '\(unknown)' (the fields are access, images)")
            }
            guard let images = try string("images", in: rule, place) else {
                throw AccessPolicyError("\(path): \(place)'images' (a glob of image ids) is missing")
            }
            guard let accessText = try string("access", in: rule, place), let access = Access(rawValue: accessText) else {
                throw AccessPolicyError("\(path): \(place)'access' must be \"public\" or \"token\"")
            }
            rules.append(Rule(images: images, access: access))
        }

        let keyList = top["keys"] as? [Any] ?? []
        if top["keys"] != nil, !(top["keys"] is [Any]) { throw AccessPolicyError("\(path): 'keys' must be a list") }
        guard keyList.count <= 100 else { throw AccessPolicyError("\(path): more than 100 keys") }
        var keys: [String: Key] = [:]
        for (i, entry) in keyList.enumerated() {
            var place = "key \(i + 1): "
            guard let key = entry as? [String: Any] else { throw AccessPolicyError("\(path): \(place)must be an object") }
            let fields: Set = ["kid", "alg", "secretFile", "publicKeyFile"]
            if let unknown = key.keys.filter({ !fields.contains($0) }).sorted().first {
                throw AccessPolicyError(
                    "\(path): \(place)unknown field '\(unknown)' (the fields are \(fields.sorted().joined(separator: ", ")))")
            }
            guard let kid = try string("kid", in: key, place) else { throw AccessPolicyError("\(path): \(place)'kid' is missing") }
            place = "key '\(kid)': "
            guard keys[kid] == nil else { throw AccessPolicyError("\(path): two keys named '\(kid)'") }
            guard let alg = try string("alg", in: key, place), let shortest = algorithms[alg] else {
                throw AccessPolicyError("\(path): \(place)'alg' must be one of \(algorithms.keys.sorted().joined(separator: ", "))")
            }
            let secretFile = try string("secretFile", in: key, place)
            let publicKeyFile = try string("publicKeyFile", in: key, place)
            let algorithm: any JWTAlgorithm
            let file: String
            if alg.hasPrefix("HS") {
                guard let secretFile, publicKeyFile == nil else {
                    throw AccessPolicyError("\(path): \(place)an \(alg) key names a 'secretFile' (and no 'publicKeyFile')")
                }
                file = resolve(secretFile, in: folder)
                var secret = [UInt8](try read(file, what: "the secret of key '\(kid)'"))
                // The file's bytes, without the line break an editor or `echo` leaves.
                while let last = secret.last, last == 0x0A || last == 0x0D { secret.removeLast() }
                guard secret.count >= shortest else {
                    throw AccessPolicyError(
                        "\(file): an \(alg) secret must have at least \(shortest) bytes (it has \(secret.count)); e.g. `openssl rand -base64 \(shortest) > \(secretFile)`"
                    )
                }
                let key = HMACKey(from: secret)
                algorithm = try Self.algorithm(kid: kid) { keys in
                    await keys.add(hmac: key, digestAlgorithm: digest(alg), kid: JWKIdentifier(string: kid))
                }
            } else {
                guard let publicKeyFile, secretFile == nil else {
                    throw AccessPolicyError("\(path): \(place)an \(alg) key names a 'publicKeyFile' (PEM; and no 'secretFile')")
                }
                file = resolve(publicKeyFile, in: folder)
                let pem = String(decoding: try read(file, what: "the public key of key '\(kid)'"), as: UTF8.self)
                do {
                    switch alg {
                    case "ES256":
                        let key = try ES256PublicKey(pem: pem)
                        algorithm = try Self.algorithm(kid: kid) { await $0.add(ecdsa: key, kid: JWKIdentifier(string: kid)) }
                    case "ES384":
                        let key = try ES384PublicKey(pem: pem)
                        algorithm = try Self.algorithm(kid: kid) { await $0.add(ecdsa: key, kid: JWKIdentifier(string: kid)) }
                    default:
                        let key = try Insecure.RSA.PublicKey(pem: pem)
                        algorithm = try Self.algorithm(kid: kid) {
                            await $0.add(rsa: key, digestAlgorithm: digest(alg), kid: JWKIdentifier(string: kid))
                        }
                    }
                } catch let error as AccessPolicyError {
                    throw error
                } catch {
                    throw AccessPolicyError("\(file) is not a PEM public key for \(alg): \(error)")
                }
            }
            guard algorithm.name == alg else {
                throw AccessPolicyError("\(path): \(place)the key loaded as \(algorithm.name), not \(alg)")
            }
            keys[kid] = Key(kid: kid, alg: alg, file: file, algorithm: algorithm)
        }
        return AccessPolicy(rules: rules, keys: keys, issuer: issuer, audience: audience, loginURL: loginURL)
    }

    private static func digest(_ alg: String) -> DigestAlgorithm {
        switch alg.suffix(3) {
        case "384": .sha384
        case "512": .sha512
        default: .sha256
        }
    }

    /// The verifier jwt-kit made for one key (its collection is an actor; a policy is
    /// loaded at start and on change, never on a request's path).
    private static func algorithm(
        kid: String, _ add: @escaping @Sendable (JWTKeyCollection) async -> Void
    ) throws(AccessPolicyError) -> any JWTAlgorithm {
        let result = waitFor { () async throws -> any JWTAlgorithm in
            let keys = JWTKeyCollection()
            await add(keys)
            return try await keys.getKey(for: JWKIdentifier(string: kid))
        }
        switch result {
        case let .success(algorithm): return algorithm
        case let .failure(error): throw AccessPolicyError("key '\(kid)' cannot be used: \(error)")
        }
    }

    static func resolve(_ file: String, in folder: String) -> String {
        file.hasPrefix("/") || folder.isEmpty ? file : folder + "/" + file
    }

    static func read(_ path: String, what: String) throws(AccessPolicyError) -> Data {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw AccessPolicyError("cannot read \(what), \(path): \(String(cString: strerror(errno)))")
        }
        defer { try? handle.close() }
        let data: Data
        do {
            data = try handle.read(upToCount: maximumFileBytes + 1) ?? Data()
        } catch {
            throw AccessPolicyError("cannot read \(what), \(path): \(error.localizedDescription)")
        }
        guard data.count <= maximumFileBytes else {
            throw AccessPolicyError("\(what), \(path), is larger than \(maximumFileBytes >> 20) MiB")
        }
        return data
    }
}

/// A policy file that cannot be used, and why (naming the file and the field).
public struct AccessPolicyError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// Runs `body` to its end from synchronous code and returns its result. For jwt-kit's
/// actor, which is only met while a policy is loaded or a token minted.
func waitFor<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) -> Result<T, any Error> {
    let done = DispatchSemaphore(value: 0)
    let box = ResultBox<T>()
    Task {
        do { box.set(.success(try await body())) } catch { box.set(.failure(error)) }
        done.signal()
    }
    done.wait()
    return box.get()
}

private final class ResultBox<T: Sendable>: Sendable {
    private let result = Mutex<Result<T, any Error>?>(nil)
    func set(_ value: Result<T, any Error>) { result.withLock { $0 = value } }
    func get() -> Result<T, any Error> { result.withLock { $0! } }
}

/// `tiler token`: a token signed by jwt-kit with a key a policy trusts: HS256 from a
/// secret file (the same file the policy names), RS256 or ES256 from a PEM private key.
public enum TokenMinter {
    /// The longest life a token may be given: a share link is not forever.
    public static let maximumLifetime = 366.0 * 86_400

    struct Claims: JWTPayload {
        var exp: Int
        var iat: Int
        var iss: String?
        var aud: String?
        var images: [String]
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// A signed token opening `images` (globs) for `lifetime` seconds from `now`.
    public static func mint(
        keyFile: String, kid: String, images: [String], lifetime: Double, issuer: String? = nil,
        audience: String? = nil, now: Date = Date()
    ) throws(AccessPolicyError) -> String {
        guard !kid.isEmpty else { throw AccessPolicyError("--kid must name the key as the policy does") }
        guard !images.isEmpty, images.allSatisfy({ !$0.isEmpty }), images.count <= AccessPolicy.maximumImageGlobs else {
            throw AccessPolicyError("name 1 to \(AccessPolicy.maximumImageGlobs) image globs (--images)")
        }
        guard lifetime > 0, lifetime <= maximumLifetime else {
            throw AccessPolicyError("the lifetime must be more than 0 s and at most 366 days")
        }
        let bytes = [UInt8](try AccessPolicy.read(keyFile, what: "the key"))
        let text = String(decoding: bytes, as: UTF8.self)
        let add: @Sendable (JWTKeyCollection) async throws -> Void
        if text.contains("-----BEGIN") {
            if let key = try? Insecure.RSA.PrivateKey(pem: text) {
                add = { await $0.add(rsa: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid)) }
            } else if let key = try? ES256PrivateKey(pem: text) {
                add = { await $0.add(ecdsa: key, kid: JWKIdentifier(string: kid)) }
            } else {
                throw AccessPolicyError("\(keyFile) is neither an RSA nor a P-256 private key (PEM)")
            }
        } else {
            var secret = bytes
            while let last = secret.last, last == 0x0A || last == 0x0D { secret.removeLast() }
            guard secret.count >= 32 else {
                throw AccessPolicyError("\(keyFile): an HS256 secret must have at least 32 bytes (it has \(secret.count))")
            }
            let key = HMACKey(from: secret)
            add = { await $0.add(hmac: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid)) }
        }
        let issued = Int(now.timeIntervalSince1970)
        let claims = Claims(
            exp: issued + Int(lifetime.rounded(.up)), iat: issued, iss: issuer, aud: audience, images: images)
        let result = waitFor { () async throws -> String in
            let keys = JWTKeyCollection()
            try await add(keys)
            return try await keys.sign(claims, kid: JWKIdentifier(string: kid))
        }
        switch result {
        case let .success(token): return token
        case let .failure(error): throw AccessPolicyError("cannot sign with \(keyFile): \(error)")
        }
    }
}
