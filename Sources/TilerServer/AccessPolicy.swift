import Crypto
import CryptoExtras
import Foundation
import TilerHTTP
import TilerSystem

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
        let verifier: SignatureVerifier
    }

    public let rules: [Rule]
    public let keys: [String: Key]
    public let issuer: String?
    public let audience: String?
    public let loginURL: String?
    /// Origins (`https://viewer.example.org`) of other sites' viewers that may get an
    /// access token from the IIIF token service; the server's own always may.
    public let origins: [String]

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
        let known: Set = ["keys", "issuer", "audience", "loginURL", "origins", "rules"]
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

        var origins: [String] = []
        if let list = top["origins"] {
            guard let texts = list as? [String], texts.count <= 100 else {
                throw AccessPolicyError("\(path): 'origins' must be a list of at most 100 origins (https://host[:port])")
            }
            for text in texts {
                guard let origin = WebOrigin(text), origin.text == text.lowercased().trimmingSuffix("/") else {
                    throw AccessPolicyError("\(path): '\(text)' in 'origins' is not an origin (http[s]://host[:port], no path)")
                }
                origins.append(origin.text)
            }
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
            let verifier: SignatureVerifier
            let file: String
            if alg.hasPrefix("HS") {
                guard let secretFile, publicKeyFile == nil else {
                    throw AccessPolicyError("\(path): \(place)an \(alg) key names a 'secretFile' (and no 'publicKeyFile')")
                }
                file = resolve(secretFile, in: folder)
                let secret = try secretBytes(file, what: "the secret of key '\(kid)'")
                guard secret.count >= shortest else {
                    throw AccessPolicyError(
                        "\(file): an \(alg) secret must have at least \(shortest) bytes (it has \(secret.count)); e.g. `openssl rand -base64 \(shortest) > \(secretFile)`"
                    )
                }
                verifier = .hmac(SymmetricKey(data: secret), bits: Int(alg.dropFirst(2))!)
            } else {
                guard let publicKeyFile, secretFile == nil else {
                    throw AccessPolicyError("\(path): \(place)an \(alg) key names a 'publicKeyFile' (PEM; and no 'secretFile')")
                }
                file = resolve(publicKeyFile, in: folder)
                let pem = String(decoding: try read(file, what: "the public key of key '\(kid)'"), as: UTF8.self)
                do {
                    switch alg {
                    case "ES256": verifier = .p256(try P256.Signing.PublicKey(pemRepresentation: pem))
                    case "ES384": verifier = .p384(try P384.Signing.PublicKey(pemRepresentation: pem))
                    default: verifier = .rsa(try _RSA.Signing.PublicKey(pemRepresentation: pem), bits: Int(alg.dropFirst(2))!)
                    }
                } catch {
                    throw AccessPolicyError("\(file) is not a PEM public key for \(alg) (RSA keys have 2048 bits or more): \(error)")
                }
            }
            keys[kid] = Key(kid: kid, alg: alg, file: file, verifier: verifier)
        }
        return AccessPolicy(
            rules: rules, keys: keys, issuer: issuer, audience: audience, loginURL: loginURL, origins: origins)
    }

    /// A secret file's bytes, without the line break an editor or `echo` leaves.
    static func secretBytes(_ path: String, what: String) throws(AccessPolicyError) -> [UInt8] {
        var secret = [UInt8](try read(path, what: what))
        while let last = secret.last, last == 0x0A || last == 0x0D { secret.removeLast() }
        return secret
    }

    static func resolve(_ file: String, in folder: String) -> String {
        file.hasPrefix("/") || folder.isEmpty ? file : folder + "/" + file
    }

    static func read(_ path: String, what: String) throws(AccessPolicyError) -> Data {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw AccessPolicyError("cannot read \(what), \(path): \(SystemCallError.reason(errno))")
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

/// `tiler token`: a token signed with a key a policy trusts: HS256 from a secret file (the
/// same file the policy names), RS256 or ES256 from a PEM private key; the signature by
/// swift-crypto, the JWS compact form (RFC 7515) around it.
public enum TokenMinter {
    /// The longest life a token may be given: a share link is not forever.
    public static let maximumLifetime = 366.0 * 86_400

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
        let text = String(decoding: try AccessPolicy.read(keyFile, what: "the key"), as: UTF8.self)
        enum Signer {
            case hmac(SymmetricKey), rsa(_RSA.Signing.PrivateKey), p256(P256.Signing.PrivateKey)
        }
        let signer: Signer
        let alg: String
        if text.contains("-----BEGIN") {
            if let key = try? _RSA.Signing.PrivateKey(pemRepresentation: text) {
                (signer, alg) = (.rsa(key), "RS256")
            } else if let key = try? P256.Signing.PrivateKey(pemRepresentation: text) {
                (signer, alg) = (.p256(key), "ES256")
            } else {
                throw AccessPolicyError("\(keyFile) is neither an RSA (2048 bits or more) nor a P-256 private key (PEM)")
            }
        } else {
            let secret = try AccessPolicy.secretBytes(keyFile, what: "the key")
            guard secret.count >= 32 else {
                throw AccessPolicyError("\(keyFile): an HS256 secret must have at least 32 bytes (it has \(secret.count))")
            }
            (signer, alg) = (.hmac(SymmetricKey(data: secret)), "HS256")
        }
        let issued = Int(now.timeIntervalSince1970)
        var claims: [String: Any] = ["exp": issued + Int(lifetime.rounded(.up)), "iat": issued, "images": images]
        if let issuer { claims["iss"] = issuer }
        if let audience { claims["aud"] = audience }
        func part(_ object: [String: Any]) -> String {
            let json = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
            return base64URL(json)
        }
        let signingInput = part(["alg": alg, "kid": kid, "typ": "JWT"]) + "." + part(claims)
        let data = Data(signingInput.utf8)
        let signature: Data
        do {
            switch signer {
            case let .hmac(key): signature = Data(HMAC<SHA256>.authenticationCode(for: data, using: key))
            case let .rsa(key): signature = try key.signature(for: SHA256.hash(data: data), padding: .insecurePKCS1v1_5).rawRepresentation
            case let .p256(key): signature = try key.signature(for: data).rawRepresentation
            }
        } catch {
            throw AccessPolicyError("cannot sign with \(keyFile): \(error)")
        }
        return signingInput + "." + base64URL(signature)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// What checks a token's signature: the key's algorithm, from swift-crypto. HMAC tags are
/// compared in constant time by `isValidAuthenticationCode`.
enum SignatureVerifier: Sendable {
    case hmac(SymmetricKey, bits: Int)
    case rsa(_RSA.Signing.PublicKey, bits: Int)
    case p256(P256.Signing.PublicKey)
    case p384(P384.Signing.PublicKey)

    /// Whether `signature` (the JWS signature's bytes) signs `input`.
    func verify(_ signature: Data, signs input: UnsafeRawBufferPointer) -> Bool {
        switch self {
        case let .hmac(key, bits):
            switch bits {
            case 384: return HMAC<SHA384>.isValidAuthenticationCode(signature, authenticating: input, using: key)
            case 512: return HMAC<SHA512>.isValidAuthenticationCode(signature, authenticating: input, using: key)
            default: return HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: input, using: key)
            }
        case let .rsa(key, bits):
            let rsa = _RSA.Signing.RSASignature(rawRepresentation: signature)
            switch bits {
            case 384: return key.isValidSignature(rsa, for: SHA384.hash(data: input), padding: .insecurePKCS1v1_5)
            case 512: return key.isValidSignature(rsa, for: SHA512.hash(data: input), padding: .insecurePKCS1v1_5)
            default: return key.isValidSignature(rsa, for: SHA256.hash(data: input), padding: .insecurePKCS1v1_5)
            }
        case let .p256(key):
            // JWS's ECDSA signature is r ‖ s, 64 bytes (RFC 7518 §3.4).
            guard let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else { return false }
            return key.isValidSignature(ecdsa, for: SHA256.hash(data: input))
        case let .p384(key):
            guard let ecdsa = try? P384.Signing.ECDSASignature(rawRepresentation: signature) else { return false }
            return key.isValidSignature(ecdsa, for: SHA384.hash(data: input))
        }
    }
}

extension String {
    /// Without one trailing `suffix`, if it ends with it.
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
