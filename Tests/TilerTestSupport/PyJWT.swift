import Foundation

/// Keys and tokens for the private-image tests, made by an implementation other than
/// tiler's: PyPI's PyJWT and `cryptography` (`scripts/install-deps test`).
public struct TestKeys: Sendable {
    /// The folder they are in, beside a policy that names them.
    public let folder: String
    /// An HS256 secret (48 random bytes, base64url text and a line break).
    public var secret: String { folder + "/site.key" }
    /// An RSA 2048 key pair (PEM), for RS256.
    public var rsaPrivate: String { folder + "/idp-private.pem" }
    public var rsaPublic: String { folder + "/idp.pem" }
    /// A P-256 key pair (PEM), for ES256.
    public var ecPrivate: String { folder + "/ec-private.pem" }
    public var ecPublic: String { folder + "/ec.pem" }

    /// Makes the keys in `folder` (with Python's `cryptography`).
    public init(in folder: String) throws {
        self.folder = folder
        try runPython(
            """
            import secrets, sys
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric import rsa, ec
            folder = sys.argv[1]
            open(folder + '/site.key', 'w').write(secrets.token_urlsafe(48) + '\\n')
            def save(key, name):
                open(folder + '/' + name + '-private.pem', 'wb').write(key.private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
                open(folder + '/' + name + '.pem', 'wb').write(key.public_key().public_bytes(
                    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
            save(rsa.generate_private_key(public_exponent=65537, key_size=2048), 'idp')
            save(ec.generate_private_key(ec.SECP256R1()), 'ec')
            """, arguments: [folder])
    }

    /// Tokens signed by PyJWT, one per spec: `alg` (HS256 with `secret`, RS256 with the
    /// RSA key, ES256 with the EC key, or `none`), `headers` (e.g. `kid`) and `claims`,
    /// where a claim `exp`, `nbf` or `iat` given as a string `+N`/`-N` is now ± N seconds.
    public func tokens(_ specs: [TokenSpec]) throws -> [String] {
        let input = try JSONSerialization.data(withJSONObject: specs.map(\.json))
        let output = try runPython(
            """
            import json, sys, time, jwt
            folder = sys.argv[1]
            keys = {'HS256': open(folder + '/site.key').read().rstrip('\\n'),
                    'RS256': open(folder + '/idp-private.pem').read(),
                    'ES256': open(folder + '/ec-private.pem').read(), 'none': None}
            now = int(time.time())
            out = []
            for spec in json.load(sys.stdin):
                claims = {k: (now + int(v) if isinstance(v, str) and v[:1] in '+-' and k in ('exp', 'nbf', 'iat') else v)
                          for k, v in spec['claims'].items()}
                out.append(jwt.encode(claims, keys[spec['alg']], algorithm=spec['alg'], headers=spec['headers']))
            print(json.dumps(out))
            """, arguments: [folder], input: input)
        guard let tokens = try JSONSerialization.jsonObject(with: output) as? [String], tokens.count == specs.count else {
            throw ToolError(description: "PyJWT answered \(String(decoding: output, as: UTF8.self))")
        }
        return tokens
    }

    /// Whether PyJWT verifies `token` with `key` (HS256 secret file, or a PEM public key)
    /// and `alg`, and its claims then (as JSON), else nil.
    public func verified(_ token: String, alg: String, key: String) throws -> [String: Any]? {
        let output = try runPython(
            """
            import json, sys, jwt
            token, alg, path = sys.argv[1:4]
            key = open(path).read()
            if alg == 'HS256': key = key.rstrip('\\n')
            try:
                print(json.dumps(jwt.decode(token, key, algorithms=[alg], options={'verify_aud': False})))
            except jwt.PyJWTError as e:
                print(json.dumps(None))
            """, arguments: [token, alg, key])
        return try JSONSerialization.jsonObject(with: output, options: .fragmentsAllowed) as? [String: Any]
    }
}

/// One token for `TestKeys.tokens`.
public struct TokenSpec: Sendable {
    public var alg: String
    public var kid: String?
    public var claims: [String: any Sendable]
    public var extraHeaders: [String: String]

    public init(alg: String, kid: String?, claims: [String: any Sendable], extraHeaders: [String: String] = [:]) {
        self.alg = alg
        self.kid = kid
        self.claims = claims
        self.extraHeaders = extraHeaders
    }

    var json: [String: Any] {
        var headers: [String: Any] = extraHeaders
        if let kid { headers["kid"] = kid }
        return ["alg": alg, "headers": headers, "claims": claims]
    }
}

/// Runs a Python 3 script; its stdout, or a `ToolError` with its stderr.
@discardableResult
public func runPython(_ script: String, arguments: [String] = [], input: Data? = nil) throws -> Data {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", "-c", script] + arguments
    let output = Pipe(), errors = Pipe(), stdin = Pipe()
    process.standardOutput = output
    process.standardError = errors
    process.standardInput = stdin
    try process.run()
    if let input { stdin.fileHandleForWriting.write(input) }
    try stdin.fileHandleForWriting.close()
    // stdout first, then stderr: the scripts write little to stderr (a traceback).
    let result = output.fileHandleForReading.readDataToEndOfFile()
    let errorBytes = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw ToolError(description: "python3: \(String(decoding: errorBytes, as: UTF8.self))")
    }
    return result
}
