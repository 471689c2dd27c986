import Foundation
import Testing
import TilerCore
import TilerHTTP
@testable import TilerServer
import TilerTestSupport

/// Private images (`--access`): every route that reveals an image refuses a caller without
/// a token that opens it, on every layout; the attacks on tokens a server meets; caches and
/// 304s that never hand one caller's private answer to another. Tokens are minted by PyJWT
/// (`TestKeys`), never by tiler.
@Suite(.serialized) struct AccessTests {
    /// A policy beside its keys: `public-*` public, everything else private, tokens from
    /// the HS256 secret (`site`), the RSA key (`idp`) or the P-256 key (`ec`), with an
    /// issuer and an audience.
    struct Setup {
        let scratch: Scratch
        let keys: TestKeys
        let policyPath: String
        static let issuer = "https://login.example.org"
        static let audience = "tiler"

        init() throws {
            scratch = try Scratch()
            keys = try TestKeys(in: scratch.path)
            policyPath = scratch.path("policy.json")
            try Self.policy(rules: [("public-*", "public"), ("*", "token")]).write(toFile: policyPath, atomically: true, encoding: .utf8)
        }

        /// The policy's text, with `loginURL` (the IIIF access service) when given.
        static func policy(rules: [(String, String)], loginURL: String? = nil) -> String {
            let ruleText = rules.map { #"{"images": "\#($0.0)", "access": "\#($0.1)"}"# }.joined(separator: ", ")
            let login = loginURL.map { #""loginURL": "\#($0)", "# } ?? ""
            return """
                {"keys": [{"kid": "site", "alg": "HS256", "secretFile": "site.key"},
                          {"kid": "idp", "alg": "RS256", "publicKeyFile": "idp.pem"},
                          {"kid": "ec", "alg": "ES256", "publicKeyFile": "ec.pem"}],
                 "issuer": "\(issuer)", "audience": "\(audience)", \(login)
                 "rules": [\(ruleText)]}
                """
        }

        func access() throws -> AccessControl {
            try AccessControl(path: policyPath, tokenCacheEntries: 64, log: criticalOnly)
        }

        /// Claims a valid token has, opening `images`.
        static func claims(_ images: [String], _ extra: [String: any Sendable] = [:]) -> [String: any Sendable] {
            var claims: [String: any Sendable] = ["exp": "+600", "iss": issuer, "aud": audience, "images": images]
            for (k, v) in extra { claims[k] = v }
            return claims
        }
    }

    /// Real pyramids of one 600 × 400 picture: drawn routes decode their tiles, and twins
    /// are equal.
    static func cutPyramids(_ ids: [String], into root: PyramidRoot) throws {
        let picture = try root.solidImage("picture", width: 600, height: 400, rgb: (10, 120, 200))
        for id in ids { try root.cut(picture, as: id) }
        try FileManager.default.removeItem(atPath: picture)
    }

    /// The routes that reveal something of image `id` (pixels, size, existence).
    static func routes(_ id: String) -> [String] {
        [
            "/images/\(id)", "/images/\(id)/tiles/0/0/0.png", "/images/\(id)/tiles/1/0/1.png", "/images/\(id)/thumbnail.png",
            "/images/\(id)/visible?x=0&y=0&width=300&height=200&scale=0.5",
            "/images/\(id).dzi", "/images/\(id)_files/9/0_0.png", "/images/\(id)_files/1/0_0.png",
            "/iiif/3/\(id)", "/iiif/3/\(id)/info.json", "/iiif/3/\(id)/full/max/0/default.png",
            "/iiif/3/\(id)/10,20,300,200/150,/0/default.jpg", "/iiif/3/\(id)/manifest.json",
            "/iiif/2/\(id)", "/iiif/2/\(id)/info.json", "/iiif/2/\(id)/full/full/0/default.png",
            "/iiif/2/\(id)/10,20,300,200/150,/0/default.jpg",
        ]
    }

    /// Without a token each route of a private image is 401 with `WWW-Authenticate: Bearer`,
    /// as are an unknown id under the private rule and a tile outside the pyramid; with a
    /// token that opens it, what a public image gets (and the same bytes); with a valid
    /// token for other images, 403. Listings show only what the caller may see. On every
    /// layout: folders, archives, a bucket, sources.
    @Test(.timeLimit(.minutes(10)), arguments: RootKind.allCases)
    func everyRouteOfAPrivateImageNeedsItsToken(_ kind: RootKind) throws {
        let setup = try Setup()
        defer { setup.scratch.cleanUp() }
        let root = try PyramidRoot()
        try Self.cutPyramids(["public-a", "secret-a", "secret-b"], into: root)
        let tokens = try setup.keys.tokens([
            TokenSpec(alg: "HS256", kid: "site", claims: Setup.claims(["secret-*"])),
            TokenSpec(alg: "RS256", kid: "idp", claims: Setup.claims(["secret-a"])),
            TokenSpec(alg: "ES256", kid: "ec", claims: Setup.claims(["other-*"])),
        ])
        let (all, onlyA, other) = (tokens[0], tokens[1], tokens[2])
        try withTileServer(root, as: kind, access: try setup.access()) { port in
            func get(_ path: String, _ token: String? = nil) throws -> RawResponse {
                try fetch(port, path, headers: token.map { ["Authorization: Bearer \($0)"] } ?? [])
            }
            for path in Self.routes("secret-a") + [
                "/images/secret-zzz", "/images/secret-zzz/tiles/0/0/0.png",
                "/images/secret-a/tiles/30/0/0.png", "/iiif/3/secret-zzz/info.json", "/images/secret-zzz.dzi",
                "/iiif/2/secret-zzz/info.json", "/iiif/2/secret-zzz/full/max/0/default.jpg",
            ] {
                let refused = try get(path)
                #expect(refused.status == 401, "\(path) without a token: \(refused.status) \(refused.text.prefix(200))")
                #expect(refused.header("WWW-Authenticate") == #"Bearer realm="tiler""#, "\(path)")
                #expect(refused.header("Cache-Control") == "no-store", "\(path)")
                #expect(!refused.text.contains("600") && !refused.text.contains("400"), "\(path) tells no size: \(refused.text)")
                let forbidden = try get(path, other)
                #expect(forbidden.status == 403, "\(path) with a token for other images: \(forbidden.status)")
            }
            for path in Self.routes("secret-a") {
                let open = try get(path, all)
                let twin = try get(path.replacingOccurrences(of: "secret-a", with: "public-a"))
                #expect([200, 303].contains(open.status), "\(path) with its token: \(open.status) \(open.text.prefix(200))")
                #expect(open.status == twin.status, "\(path)")
                if open.header("Content-Type")?.hasPrefix("image/") == true {
                    let same = open.body == twin.body
                    #expect(same, "\(path): the same pixels as the public twin")
                }
                #expect(open.header("Cache-Control") == "private, no-cache", "\(path): \(open.header("Cache-Control") ?? "none")")
                #expect(open.header("Vary")?.contains("Authorization, Cookie") == true, "\(path): Vary \(open.header("Vary") ?? "none")")
                #expect(twin.header("Cache-Control") != "private, no-cache", "\(path): the public twin stays public")
                #expect(try get(path.replacingOccurrences(of: "secret-a", with: "secret-b"), onlyA).status == 403, "\(path)")
                #expect(try get(path, onlyA).status == open.status, "\(path) with the RS256 token")
            }
            // Unknown ids and tiles outside the pyramid, with a token that may see them.
            #expect(try get("/images/secret-zzz", all).status == 404)
            #expect(try get("/images/secret-a/tiles/30/0/0.png", all).status == 404)

            // Listings: only what the caller may see, its total too.
            func listed(_ token: String?) throws -> (ids: [String], total: Int) {
                let answer = try get("/images", token)
                #expect(answer.header("Cache-Control") == "private, no-cache")
                let json = answer.json
                let ids = (json["images"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
                return (ids, json["total"] as? Int ?? -1)
            }
            #expect(try listed(nil) == (["public-a"], 1))
            #expect(try listed(other) == (["public-a"], 1))
            #expect(try listed(onlyA) == (["public-a", "secret-a"], 2))
            #expect(try listed(all) == (["public-a", "secret-a", "secret-b"], 3))
            let collection = try get("/iiif/3/collection.json").text
            #expect(collection.contains("public-a") && !collection.contains("secret-"), "\(collection.prefix(300))")
            #expect(try get("/iiif/3/collection.json", all).text.contains("secret-b"))
        }
    }

    /// The token arrives as a Bearer header, the cookie `tiler_token` (among others, quoted
    /// or not) or the query's `token`; a scheme other than Bearer is no token.
    @Test(.timeLimit(.minutes(10))) func tokensComeAsHeaderCookieOrQuery() throws {
        let setup = try Setup()
        defer { setup.scratch.cleanUp() }
        let root = try PyramidRoot()
        try Self.cutPyramids(["secret-a"], into: root)
        let token = try setup.keys.tokens([TokenSpec(alg: "HS256", kid: "site", claims: Setup.claims(["*"]))])[0]
        try withTileServer(root, access: try setup.access()) { port in
            let tile = "/images/secret-a/tiles/0/0/0.png"
            let cases: [(String, [String], Int)] = [
                (tile, ["Authorization: Bearer \(token)"], 200),
                (tile, ["authorization: bearer   \(token)"], 200),
                (tile, ["Authorization: Basic \(token)"], 401),
                (tile, ["Cookie: theme=dark; tiler_token=\(token); other=1"], 200),
                (tile, ["Cookie: tiler_token=\"\(token)\""], 200),
                (tile, ["Cookie: not_tiler_token=\(token)"], 401),
                (tile + "?token=\(token)", [], 200),
                (tile + "?a=1&token=\(token)&b=2", [], 200),
                (tile + "?xtoken=\(token)", [], 401),
                // A bad token beside a good one: the good one opens it.
                (tile + "?token=\(token)", ["Authorization: Bearer x.y.z"], 200),
            ]
            for (path, headers, status) in cases {
                let answer = try fetch(port, path, headers: headers)
                #expect(
                    answer.status == status,
                    "\(path.prefix(60)) \(headers.map { String($0.prefix(40)) }): \(answer.status) \(answer.text.prefix(120))")
            }
        }
    }

    /// Each attack a token-checking server meets answers 401 (or 431/414 for the oversized),
    /// never the image: no token, `alg: none`, HS256 signed with the RSA public key as its
    /// secret (algorithm confusion), unknown and injected `kid`, expired, not yet valid,
    /// wrong issuer and audience, tampered payload and signature, no `exp`, no `images`.
    @Test(.timeLimit(.minutes(10))) func attacksOnTokensAreRefused() throws {
        let setup = try Setup()
        defer { setup.scratch.cleanUp() }
        let root = try PyramidRoot()
        try Self.cutPyramids(["secret-a"], into: root)
        let rsaPublic = try String(contentsOfFile: setup.keys.rsaPublic, encoding: .utf8)
        let claims = Setup.claims(["*"])
        func without(_ name: String) -> [String: any Sendable] { claims.filter { $0.key != name } }
        let specs: [(String, TokenSpec)] = [
            ("valid", TokenSpec(alg: "HS256", kid: "site", claims: claims)),
            ("alg none", TokenSpec(alg: "none", kid: "site", claims: claims)),
            ("unknown kid", TokenSpec(alg: "HS256", kid: "nobody", claims: claims)),
            ("injected kid", TokenSpec(alg: "HS256", kid: "../../site.key", claims: claims)),
            ("no kid", TokenSpec(alg: "HS256", kid: nil, claims: claims)),
            ("RS256 token under the HS256 key's kid", TokenSpec(alg: "RS256", kid: "site", claims: claims)),
            ("expired", TokenSpec(alg: "HS256", kid: "site", claims: Setup.claims(["*"], ["exp": "-5"]))),
            ("not yet valid", TokenSpec(alg: "HS256", kid: "site", claims: Setup.claims(["*"], ["nbf": "+3600"]))),
            ("wrong issuer", TokenSpec(alg: "HS256", kid: "site", claims: Setup.claims(["*"], ["iss": "https://evil.example"]))),
            ("wrong audience", TokenSpec(alg: "HS256", kid: "site", claims: Setup.claims(["*"], ["aud": "someone-else"]))),
            ("no exp", TokenSpec(alg: "HS256", kid: "site", claims: without("exp"))),
            ("no images", TokenSpec(alg: "HS256", kid: "site", claims: without("images"))),
            ("critical extension", TokenSpec(alg: "HS256", kid: "site", claims: claims, extraHeaders: ["crit": "x"])),
        ]
        let tokens = try setup.keys.tokens(specs.map(\.1))
        let valid = tokens[0]
        // HS256 with the RSA public key's PEM as the HMAC secret, kid of the RSA key: the
        // classic confusion. PyJWT refuses to make it, so it is signed here with Python's hmac.
        let confused = try String(
            decoding: runPython(
                """
                import base64, hashlib, hmac, json, sys, time
                def b64(b): return base64.urlsafe_b64encode(b).rstrip(b'=')
                header = b64(json.dumps({'alg': 'HS256', 'kid': 'idp', 'typ': 'JWT'}).encode())
                body = b64(json.dumps({'exp': int(time.time()) + 600, 'images': ['*'], 'iss': sys.argv[2], 'aud': sys.argv[3]}).encode())
                signature = b64(hmac.new(sys.argv[1].encode(), header + b'.' + body, hashlib.sha256).digest())
                print((header + b'.' + body + b'.' + signature).decode())
                """, arguments: [rsaPublic, Setup.issuer, Setup.audience]), as: UTF8.self
        ).trimmingCharacters(in: .whitespacesAndNewlines)
        let parts = valid.split(separator: ".").map(String.init)
        let otherParts = tokens[6].split(separator: ".").map(String.init)  // the expired one
        func flippedCharacter(_ text: String, at i: Int) -> String {
            var characters = Array(text)
            characters[i] = characters[i] == "A" ? "B" : "A"
            return String(characters)
        }
        var attacks = Array(zip(specs.map(\.0), tokens).dropFirst())
        attacks += [
            ("algorithm confusion (HS256 with the RSA public key)", confused),
            ("tampered payload", parts[0] + "." + flippedCharacter(parts[1], at: 10) + "." + parts[2]),
            ("payload of another token", parts[0] + "." + otherParts[1] + "." + parts[2]),
            ("tampered signature", parts[0] + "." + parts[1] + "." + flippedCharacter(parts[2], at: 5)),
            ("no signature", parts[0] + "." + parts[1] + "."),
            ("two parts", parts[0] + "." + parts[1]),
            ("four parts", valid + ".x"),
            ("not base64", "%%%.***.!!!"),
            ("empty", ""),
        ]
        try withTileServer(root, access: try setup.access()) { port in
            let tile = "/images/secret-a/tiles/0/0/0.png"
            #expect(try fetch(port, tile, headers: ["Authorization: Bearer \(valid)"]).status == 200)
            for (name, token) in attacks {
                let answer = try fetch(port, tile, headers: ["Authorization: Bearer \(token)"])
                #expect(answer.status == 401, "\(name): \(answer.status) \(answer.text.prefix(160))")
                #expect(answer.header("Content-Type") == "application/json", "\(name)")
                let query = try fetch(port, tile + "?token=" + (token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""))
                #expect(query.status == 401, "\(name) in the query: \(query.status)")
            }
            // Oversized: refused before anything decodes them.
            let huge = String(repeating: "a", count: HTTPRequestParser.maximumTokenBytes + 100)
            #expect(try fetch(port, tile, headers: ["Authorization: Bearer \(huge)"]).status == 431)
            #expect(try fetch(port, tile, headers: ["Cookie: tiler_token=\(huge)"]).status == 431)
            #expect([401, 414].contains(try fetch(port, tile + "?token=" + huge).status))
            // A long Cookie line of other cookies is not refused for its length.
            let crumbs = (0..<60).map { "c\($0)=\(String(repeating: "x", count: 60))" }.joined(separator: "; ")
            #expect(try fetch(port, tile, headers: ["Cookie: \(crumbs); tiler_token=\(valid)"]).status == 200)
            #expect(try fetch(port, tile, headers: ["Cookie: \(crumbs)"]).status == 401)
        }
    }

    /// 10,000 distinct bad tokens (well-formed, signed with a key the server does not
    /// have) are each refused, none is remembered (the verified-token cache holds only
    /// good ones, and at most its capacity), and a good token still opens the image.
    @Test(.timeLimit(.minutes(10))) func manyBadTokensStayBounded() throws {
        let setup = try Setup()
        defer { setup.scratch.cleanUp() }
        let root = try PyramidRoot()
        try Self.cutPyramids(["secret-a"], into: root)
        let access = try setup.access()
        let good = try setup.keys.tokens([TokenSpec(alg: "HS256", kid: "site", claims: Setup.claims(["*"]))])[0]
        let parts = good.split(separator: ".").map(String.init)
        try withTileServer(root, access: access) { port in
            let client = try RawHTTPClient(port: port)
            for i in 0..<10_000 {
                // The good token's header and payload with a signature of its own: each a
                // different token, each needing a signature check.
                let signature = Data((0..<32).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i &* 7 &+ (i >> 8)) })
                    .base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                    .replacingOccurrences(of: "=", with: "")
                try client.request(
                    "/images/secret-a/tiles/0/0/0.png", headers: ["Authorization: Bearer \(parts[0]).\(parts[1]).\(signature)"])
                let answer = try client.readResponse()
                if answer.status != 401 {
                    Issue.record("bad token \(i): \(answer.status)")
                    break
                }
            }
            #expect(access.verifiedTokens == 0, "no bad token is remembered")
            try client.request("/images/secret-a/tiles/0/0/0.png", headers: ["Authorization: Bearer \(good)"])
            #expect(try client.readResponse().status == 200)
            #expect(access.verifiedTokens == 1)
        }
    }

    /// The same private tile asked for with and without a token, in every order, and with
    /// validators (its ETag, If-Modified-Since) but no token: a caller without the token
    /// never gets the bytes or a 304, whatever the caches (the response cache, open tiles,
    /// the plain-tile fast path) hold; the query's token never reaches the access log.
    @Test(.timeLimit(.minutes(10)), arguments: [RootKind.folders, .archives])
    func cachesNeverHandAPrivateAnswerToAnotherCaller(_ kind: RootKind) throws {
        let setup = try Setup()
        defer { setup.scratch.cleanUp() }
        let root = try PyramidRoot()
        try Self.cutPyramids(["secret-a"], into: root)
        let token = try setup.keys.tokens([TokenSpec(alg: "ES256", kid: "ec", claims: Setup.claims(["secret-a"]))])[0]
        let accessLog = CollectedLog()
        try withTileServer(root, as: kind, access: try setup.access(), accessLog: accessLog) { port in
            let bearer = ["Authorization: Bearer \(token)"]
            for path in [
                "/images/secret-a/tiles/0/0/0.png", "/images/secret-a/tiles/1/0/0.png", "/images/secret-a",
                "/iiif/3/secret-a/full/120,/0/default.jpg", "/images/secret-a_files/5/0_0.png",
                "/iiif/2/secret-a/full/120,/0/default.jpg",
            ] {
                for round in 0..<3 {
                    let open = try fetch(port, path, headers: bearer)
                    #expect(open.status == 200, "\(path) round \(round)")
                    let refused = try fetch(port, path)
                    let differs = refused.body != open.body
                    #expect(refused.status == 401 && differs, "\(path) round \(round): \(refused.status)")
                    if let etag = open.header("ETag") {
                        #expect(try fetch(port, path, headers: ["If-None-Match: \(etag)"]).status == 401, "\(path): ETag alone")
                        #expect(try fetch(port, path, headers: ["If-None-Match: \(etag)"] + bearer).status == 304, "\(path)")
                    }
                    if let modified = open.header("Last-Modified") {
                        #expect(try fetch(port, path, headers: ["If-Modified-Since: \(modified)"]).status == 401, "\(path)")
                    }
                    #expect(try fetch(port, path + "?token=\(token)").status == 200)
                    #expect(try fetch(port, path, headers: ["Cookie: tiler_token=\(token)"]).status == 200)
                }
            }
        }
        let lines = accessLog.linesWithMetadata
        #expect(lines.count > 50)
        let signature = String(token.split(separator: ".")[2])
        #expect(!lines.contains { $0.contains(signature) }, "a token in the access log")
    }

    /// A keep-alive connection whose credentials change between requests, as the
    /// connection's memo of its last judged token (`CredentialMemo`) must follow: each
    /// request is judged by the token it sends now. A token noted for one image opens no
    /// other; a bad token after a good one, or none, is refused; the cookie the same; a
    /// token that has expired is refused on the connection that used it; a new policy
    /// judges again.
    @Test(.timeLimit(.minutes(10))) func oneConnectionsChangingTokensAreEachJudged() throws {
        let setup = try Setup()
        defer { setup.scratch.cleanUp() }
        let root = try PyramidRoot()
        try Self.cutPyramids(["secret-a", "secret-b"], into: root)
        let access = try setup.access()
        let tokens = try setup.keys.tokens([
            TokenSpec(alg: "ES256", kid: "ec", claims: Setup.claims(["secret-a"])),
            TokenSpec(alg: "HS256", kid: "site", claims: Setup.claims(["*"])),
            TokenSpec(alg: "HS256", kid: "site", claims: Setup.claims(["*"], ["exp": "+3"])),
        ])
        let (forA, forAll, brief) = (tokens[0], tokens[1], tokens[2])
        var tampered = Array(forA.utf8)
        tampered[tampered.count - 3] = tampered[tampered.count - 3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let bad = String(decoding: tampered, as: UTF8.self)
        let a = "/images/secret-a/tiles/0/0/0.png", b = "/images/secret-b/tiles/0/0/0.png"
        try withTileServer(root, access: access) { port in
            let client = try RawHTTPClient(port: port)
            func status(_ path: String, _ headers: [String]) throws -> Int {
                try client.request(path, headers: headers)
                return try client.readResponse().status
            }
            let steps: [(String, [String], Int)] = [
                (a, ["Authorization: Bearer \(forA)"], 200), (a, ["Authorization: Bearer \(forA)"], 200),
                (a, ["Authorization: Bearer \(forA)"], 200), (b, ["Authorization: Bearer \(forA)"], 403),
                (a, ["Authorization: Bearer \(forA)"], 200), (a, ["Authorization: Bearer \(bad)"], 401),
                (a, ["Authorization: Bearer \(forA)"], 200), (a, [], 401), (a, ["Authorization: Bearer \(forA)"], 200),
                (a, ["authorization:bearer \(forA)   "], 200), (b, ["AUTHORIZATION: Bearer \(forA)"], 403),
                (a, ["Authorization: Bearer \(forAll)"], 200), (b, ["Authorization: Bearer \(forAll)"], 200),
                (b, ["Authorization: Bearer \(forAll)"], 200), (b, ["Authorization: Bearer \(forA)"], 403),
                (a, ["Cookie: tiler_token=\(forA)"], 200), (a, ["Cookie: tiler_token=\(forA)"], 200),
                (b, ["Cookie: tiler_token=\(forA)"], 403), (a, ["Cookie: tiler_token=\(bad)"], 401),
                (a, ["Cookie: x=1; tiler_token=\(forA)"], 200), (a, ["Cookie: x=1"], 401),
                (a, ["Authorization: Bearer \(forA)", "Authorization: Bearer \(bad)"], 401),
                (a, ["Authorization: Bearer \(forA)"], 200),
                // A share link's token: kept by the memo, compared byte for byte.
                (a + "?token=\(forA)", [], 200), (a + "?token=\(forA)", [], 200), (b + "?token=\(forA)", [], 403),
                (a + "?token=\(bad)", [], 401), (a + "?token=\(forA)", [], 200), (a, [], 401),
                (a + "?token=\(forA)x", [], 401), (a + "?token=\(forA.dropLast())", [], 401),
                (a + "?token=\(forA)&x=1", [], 200), (a + "?token=\(forA)", [], 200),
                (b + "?token=\(forAll)", [], 200), (b + "?token=\(forAll)", [], 200), (b + "?token=\(forA)", [], 403),
                (b + "?token=\(forA)", ["Authorization: Bearer \(forAll)"], 200), (b + "?token=\(forA)", [], 403),
            ]
            for (i, (path, headers, expected)) in steps.enumerated() {
                let got = try status(path, headers)
                #expect(got == expected, "step \(i): \(path) with \(headers.map { $0.prefix(30) }): \(got)")
            }
            // A token noted on the connection stops opening anything once it expires.
            #expect(try status(b, ["Authorization: Bearer \(brief)"]) == 200)
            #expect(try status(b, ["Authorization: Bearer \(brief)"]) == 200)
            Thread.sleep(forTimeInterval: 4)
            #expect(try status(b, ["Authorization: Bearer \(brief)"]) == 401, "expired")
            // A new policy (no HS256 key): the token noted under the last one is judged again.
            #expect(try status(b, ["Authorization: Bearer \(forAll)"]) == 200)
            #expect(try status(b, ["Authorization: Bearer \(forAll)"]) == 200)
            try Setup.policy(rules: [("public-*", "public"), ("*", "token")])
                .replacingOccurrences(of: #"{"kid": "site", "alg": "HS256", "secretFile": "site.key"},"#, with: "")
                .write(toFile: setup.policyPath, atomically: true, encoding: .utf8)
            access.reloadIfChanged()
            #expect(try status(b, ["Authorization: Bearer \(forAll)"]) == 401, "its key is gone")
            #expect(try status(a, ["Authorization: Bearer \(forA)"]) == 200)
        }
    }

    /// The policy is re-read when it changes: a rule made public opens the image to anyone;
    /// a file that no longer loads is logged and the last good policy stays in force.
    @Test(.timeLimit(.minutes(10))) func thePolicyIsReloadedAndABadOneIgnored() throws {
        let setup = try Setup()
        defer { setup.scratch.cleanUp() }
        let root = try PyramidRoot()
        try Self.cutPyramids(["secret-a"], into: root)
        let log = CollectedLog()
        let access = try AccessControl(path: setup.policyPath, tokenCacheEntries: 64, log: log.logger)
        try withTileServer(root, access: access) { port in
            let tile = "/images/secret-a/tiles/0/0/0.png"
            #expect(try fetch(port, tile).status == 401)
            try Setup.policy(rules: [("secret-*", "public")]).write(toFile: setup.policyPath, atomically: true, encoding: .utf8)
            access.reloadIfChanged()
            #expect(try fetch(port, tile).status == 200)
            #expect(try fetch(port, tile).header("Cache-Control") != "private, no-cache")
            try #"{"rules": [{"images": "*", "acess": "public"}]}"#.write(toFile: setup.policyPath, atomically: true, encoding: .utf8)
            access.reloadIfChanged()
            #expect(log.messages.contains { $0.contains("not reloaded") }, "\(log.messages)")
            #expect(try fetch(port, tile).status == 200, "the last good policy stays")
            try Setup.policy(rules: [("*", "token")]).write(toFile: setup.policyPath, atomically: true, encoding: .utf8)
            access.reloadIfChanged()
            let closed = try fetch(port, tile)
            #expect(closed.status == 401, "closed again; no cached public answer is served: \(closed.status)")
        }
    }

    /// IIIF Authorization Flow 2.0 over HTTP: a private image's info.json names its probe,
    /// access (the policy's login page), token and logout services, and without a token is
    /// a 401 without the image's size; the probe answers what the image would; the token
    /// service turns a valid `tiler_token` cookie into an opaque access token for pages of
    /// allowed origins only, which opens the probe and nothing else; logout clears the
    /// cookie and the access tokens made from it.
    @Test(.timeLimit(.minutes(10))) func iiifAuthorizationFlow() throws {
        let setup = try Setup()
        defer { setup.scratch.cleanUp() }
        var policy = Setup.policy(rules: [("public-*", "public"), ("*", "token")])
        policy = policy.replacingOccurrences(
            of: #""audience": "tiler","#,
            with: #""audience": "tiler", "loginURL": "https://example.org/login", "origins": ["https://viewer.example.org"],"#)
        try policy.write(toFile: setup.policyPath, atomically: true, encoding: .utf8)
        let root = try PyramidRoot()
        try Self.cutPyramids(["secret-a", "public-a"], into: root)
        let cookie = try setup.keys.tokens([TokenSpec(alg: "HS256", kid: "site", claims: Setup.claims(["secret-*"]))])[0]
        try withTileServer(root, access: try setup.access()) { port in
            // The server's own origin, as the Host the test client sends names it.
            let own = "http://127.0.0.1"
            // info.json: 401 with the services and no size; with a token, the whole document.
            let closed = try fetch(port, "/iiif/3/secret-a/info.json")
            #expect(closed.status == 401)
            let closedInfo = closed.json
            #expect(closedInfo["width"] == nil && closedInfo["height"] == nil && closedInfo["sizes"] == nil)
            #expect(
                closedInfo["@context"] as? [String] == [
                    "http://iiif.io/api/auth/2/context.json", "http://iiif.io/api/image/3/context.json",
                ])
            let probeService = try #require((closedInfo["service"] as? [[String: Any]])?.first)
            #expect(probeService["type"] as? String == "AuthProbeService2")
            #expect(probeService["id"] as? String == own + "/iiif/3/secret-a/probe")
            let accessService = try #require((probeService["service"] as? [[String: Any]])?.first)
            #expect(accessService["type"] as? String == "AuthAccessService2" && accessService["profile"] as? String == "active")
            #expect(accessService["id"] as? String == "https://example.org/login")
            let inner = accessService["service"] as? [[String: Any]] ?? []
            #expect(inner.map { $0["type"] as? String } == ["AuthAccessTokenService2", "AuthLogoutService2"])
            #expect(inner.first?["id"] as? String == own + "/iiif/auth/token")
            // An unknown id under the private rule looks the same.
            let unknown = try fetch(port, "/iiif/3/secret-zzz/info.json")
            #expect(unknown.status == 401 && unknown.json["width"] == nil)
            let open = try fetch(port, "/iiif/3/secret-a/info.json", headers: ["Cookie: tiler_token=\(cookie)"])
            #expect(open.status == 200 && open.json["width"] as? Int == 600 && open.json["service"] != nil)
            #expect(try fetch(port, "/iiif/3/public-a/info.json").json["service"] == nil, "a public image names no auth services")
            // 2.1 names no services (Auth 2.0 is for 3.0): its info.json is refused like its
            // images, and with a token is the plain document.
            let closed2 = try fetch(port, "/iiif/2/secret-a/info.json")
            #expect(closed2.status == 401 && closed2.header("WWW-Authenticate") != nil)
            #expect(closed2.json["service"] == nil && closed2.json["width"] == nil && !closed2.text.contains("600"))
            let open2 = try fetch(port, "/iiif/2/secret-a/info.json", headers: ["Cookie: tiler_token=\(cookie)"])
            #expect(open2.status == 200 && open2.json["width"] as? Int == 600 && open2.json["service"] == nil)
            #expect(open2.json["@context"] as? String == "http://iiif.io/api/image/2/context.json")
            #expect(open2.header("Cache-Control") == "private, no-cache")

            func probe(_ id: String, _ headers: [String] = []) throws -> Int? {
                let answer = try fetch(port, "/iiif/3/\(id)/probe", headers: headers)
                #expect(answer.status == 200 && answer.json["type"] as? String == "AuthProbeResult2")
                return answer.json["status"] as? Int
            }
            #expect(try probe("secret-a") == 401)
            #expect(try probe("public-a") == 200)
            #expect(try probe("secret-a", ["Cookie: tiler_token=\(cookie)"]) == 200)

            func tokenMessage(origin: String, cookie: String?) throws -> [String: Any] {
                let answer = try fetch(
                    port, "/iiif/auth/token?messageId=m-1&origin=\(origin)",
                    headers: cookie.map { ["Cookie: tiler_token=\($0)"] } ?? [])
                #expect(answer.status == 200 && answer.header("Content-Type")?.hasPrefix("text/html") == true)
                let text = answer.text
                let start = try #require(text.range(of: "postMessage(")), end = try #require(text.range(of: ", \"\(origin)\");"))
                let json = try JSONSerialization.jsonObject(with: Data(text[start.upperBound..<end.lowerBound].utf8))
                return try #require(json as? [String: Any])
            }
            let missing = try tokenMessage(origin: own, cookie: nil)
            #expect(missing["type"] as? String == "AuthAccessTokenError2" && missing["profile"] as? String == "missingAspect")
            #expect(missing["messageId"] as? String == "m-1")
            let foreign = try tokenMessage(origin: "https://evil.example", cookie: cookie)
            #expect(foreign["profile"] as? String == "invalidOrigin" && foreign["accessToken"] == nil)
            #expect(try tokenMessage(origin: "https://viewer.example.org", cookie: cookie)["accessToken"] is String)
            let issued = try tokenMessage(origin: own, cookie: cookie)
            let accessToken = try #require(issued["accessToken"] as? String)
            #expect(!cookie.contains(accessToken) && (issued["expiresIn"] as? Int ?? 0) > 0)
            // The access token opens the probe, and nothing else.
            #expect(try probe("secret-a", ["Authorization: Bearer \(accessToken)"]) == 200)
            #expect(try fetch(port, "/images/secret-a/tiles/0/0/0.png", headers: ["Authorization: Bearer \(accessToken)"]).status == 401)
            #expect(try fetch(port, "/iiif/3/secret-a/info.json", headers: ["Authorization: Bearer \(accessToken)"]).status == 401)
            // Bad requests to the token service.
            #expect(try fetch(port, "/iiif/auth/token?messageId=%3Cscript%3E&origin=\(own)").status == 400)
            #expect(try fetch(port, "/iiif/auth/token?messageId=1&origin=javascript:alert(1)").status == 400)
            // Logout: the cookie cleared, the access token made from it forgotten.
            let out = try fetch(port, "/iiif/auth/logout", headers: ["Cookie: tiler_token=\(cookie)"])
            #expect(out.status == 200 && out.header("Set-Cookie")?.hasPrefix("tiler_token=; Path=/; Max-Age=0") == true)
            #expect(try probe("secret-a", ["Authorization: Bearer \(accessToken)"]) == 401)
        }
    }

    /// A policy that cannot be used is refused with a message naming what is wrong.
    @Test func badPoliciesAreRefused() throws {
        let setup = try Setup()
        defer { setup.scratch.cleanUp() }
        try "short\n".write(toFile: setup.scratch.path("short.key"), atomically: true, encoding: .utf8)
        let cases: [(String, String)] = [
            ("not json", "is not JSON"),
            (#"{"rules": [], "colour": 1}"#, "unknown field 'colour'"),
            (#"{"rules": [{"images": "*", "access": "secret"}]}"#, "'access' must be"),
            (#"{"rules": [{"images": "*"}]}"#, "'access' must be"),
            (#"{"keys": [{"kid": "a", "alg": "HS256", "secretFile": "short.key"}], "rules": []}"#, "at least 32 bytes"),
            (#"{"keys": [{"kid": "a", "alg": "HS256", "secretFile": "missing.key"}], "rules": []}"#, "cannot read"),
            (#"{"keys": [{"kid": "a", "alg": "none", "secretFile": "site.key"}], "rules": []}"#, "'alg' must be one of"),
            (#"{"keys": [{"kid": "a", "alg": "RS256", "publicKeyFile": "site.key"}], "rules": []}"#, "is not a PEM public key"),
            (#"{"keys": [{"kid": "a", "alg": "ES256", "publicKeyFile": "idp.pem"}], "rules": []}"#, "is not a PEM public key"),
            (
                #"{"keys": [{"kid": "a", "alg": "HS256", "secretFile": "site.key"}, {"kid": "a", "alg": "HS256", "secretFile": "site.key"}], "rules": []}"#,
                "two keys named 'a'"
            ),
            (#"{"rules": [], "loginURL": "javascript:alert(1)"}"#, "'loginURL' must be an http"),
        ]
        for (text, expected) in cases {
            let path = setup.scratch.path("bad.json")
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            do {
                _ = try AccessPolicy.load(from: path)
                Issue.record("accepted: \(text)")
            } catch {
                #expect(error.description.contains(expected), "\(text): \(error)")
            }
        }
        #expect(throws: AccessPolicyError.self) { try AccessPolicy.load(from: setup.scratch.path("none.json")) }
    }
}
