import Foundation
import Testing
import TilerTestSupport

/// `tiler token` and `tiler serve --access`, the built binary: tokens it signs verify with
/// PyJWT (another implementation) under each algorithm, carry what was asked, and open
/// the images they name on a real server; a policy that cannot be used keeps the server
/// from starting, with a message naming the fault.
@Suite struct AccessCommandTests {
    @Test(.timeLimit(.minutes(10))) func tokensVerifyWithPyJWTAndOpenTheirImages() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let keys = try TestKeys(in: scratch.path)
        let tiler = try tilerBinary()
        for (alg, signing, verifying) in [
            ("HS256", keys.secret, keys.secret), ("RS256", keys.rsaPrivate, keys.rsaPublic), ("ES256", keys.ecPrivate, keys.ecPublic),
        ] {
            let minted = try run(
                tiler,
                [
                    "token", "--key", signing, "--kid", "k", "--images", "album-*", "one", "--ttl", "2h",
                    "--issuer", "https://login.example.org", "--audience", "tiler",
                ])
            #expect(minted.status == 0, "\(alg): \(minted.stderr)")
            let token = minted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            let header = try #require(
                JSONSerialization.jsonObject(with: base64URL(String(token.split(separator: ".")[0]))) as? [String: Any])
            #expect(header["alg"] as? String == alg && header["kid"] as? String == "k", "\(header)")
            let claims = try #require(try keys.verified(token, alg: alg, key: verifying), "\(alg): PyJWT refuses it")
            #expect(claims["images"] as? [String] == ["album-*", "one"])
            #expect(claims["iss"] as? String == "https://login.example.org" && claims["aud"] as? String == "tiler")
            let lifetime = (claims["exp"] as? Double ?? 0) - Date().timeIntervalSince1970
            #expect(lifetime > 7000 && lifetime <= 7201, "\(alg): exp is \(lifetime) s away")
            // Another key's holder cannot make it verify.
            #expect(try keys.verified(token, alg: alg == "HS256" ? "RS256" : "HS256", key: verifying) == nil)
        }

        // Refused: a short secret, a key that is no key, a lifetime past a year or none.
        try "short\n".write(toFile: scratch.path("short.key"), atomically: true, encoding: .utf8)
        try "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".write(
            toFile: scratch.path("bad.pem"), atomically: true, encoding: .utf8)
        for (arguments, expected) in [
            (["--key", scratch.path("short.key")], "at least 32 bytes"),
            (["--key", scratch.path("bad.pem")], "is neither an RSA"),
            (["--key", scratch.path("missing.key")], "cannot read"),
            (["--key", keys.secret, "--ttl", "400d"], "at most 366 days"),
            (["--key", keys.secret, "--ttl", "soon"], "is not a duration"),
        ] {
            let refused = try run(tiler, ["token", "--kid", "k", "--images", "*"] + arguments)
            #expect(refused.status != 0 && refused.stdout.isEmpty, "\(arguments)")
            #expect(refused.stderr.contains(expected), "\(arguments): \(refused.stderr)")
        }
        #expect(try run(tiler, ["token", "--key", keys.secret, "--kid", "k"]).status != 0, "no --images")
    }

    /// `tiler serve --access`: a bad policy stops it at start (status 1, the fault named);
    /// a good one serves private images to the tokens `tiler token` signs.
    @Test(.timeLimit(.minutes(10))) func serveChecksItsPolicyAtStart() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let keys = try TestKeys(in: scratch.path)
        let tiler = try tilerBinary()
        let root = scratch.path("root")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let picture = scratch.path("secret-a.png")
        try vips("black", picture, "300", "200")
        let cut = try run(tiler, ["cut", picture, "--output", root, "--quiet"])
        #expect(cut.status == 0, "\(cut.stderr)")

        let bad = scratch.path("bad.json")
        try #"{"rules": [{"images": "*", "access": "token"}], "keys": [{"kid": "a", "alg": "HS256"}]}"#
            .write(toFile: bad, atomically: true, encoding: .utf8)
        let refused = try run(tiler, ["serve", root, "--port", "0", "--access", bad])
        #expect(refused.status != 0, "\(refused.stdout)")
        #expect(refused.stderr.contains("--access") && refused.stderr.contains("secretFile"), "\(refused.stderr)")

        let policy = scratch.path("policy.json")
        try #"{"keys": [{"kid": "site", "alg": "HS256", "secretFile": "site.key"}], "rules": [{"images": "*", "access": "token"}]}"#
            .write(toFile: policy, atomically: true, encoding: .utf8)
        let server = try ServeProcess([root, "--port", "0", "--threads", "1", "--access", policy])
        defer { server.stop() }
        let token = try run(tiler, ["token", "--key", keys.secret, "--kid", "site", "--images", "secret-*"])
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let tile = "/images/secret-a/tiles/0/0/0.jpg"
        #expect(try fetch(server.port, tile).status == 401)
        #expect(try fetch(server.port, tile, headers: ["Authorization: Bearer \(token)"]).status == 200)
        #expect(try fetch(server.port, tile + "?token=\(token)").status == 200)
    }

    private func base64URL(_ text: String) -> Data {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard) ?? Data()
    }
}
