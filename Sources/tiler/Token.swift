import ArgumentParser
import Foundation
import TilerServer

extension Tiler {
    /// `tiler token`: prints a token for `tiler serve --access`.
    struct Token: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print an access token (JWT) that opens private images.",
            discussion: """
                Signs with --key: the secret file an HS256 key of the policy names, or a PEM \
                private key (RSA for RS256, P-256 for ES256) whose public key the policy names. \
                The token carries exp (now + --ttl), iat, images (the globs), and iss and aud \
                when given (give them when the policy names an issuer and an audience). Send it \
                as `Authorization: Bearer TOKEN`, the cookie tiler_token, or in a share link: \
                http://HOST/?token=TOKEN#/image/ID. Anyone holding it sees those images until \
                it expires.
                """
        )

        @Option(help: ArgumentHelp("The secret (HS256) or PEM private key (RS256, ES256) to sign with.", valueName: "file"))
        var key: String

        @Option(help: ArgumentHelp("The key's id, as the policy names it (the token's header kid).", valueName: "kid"))
        var kid: String

        @Option(
            name: .long, parsing: .upToNextOption,
            help: ArgumentHelp("Globs of the image ids the token opens (e.g. album-2024-*).", valueName: "glob"))
        var images: [String] = []

        @Option(help: ArgumentHelp("How long it is valid: 90s, 30m, 12h, 7d (at most 366d).", valueName: "duration"))
        var ttl = "1h"

        @Option(help: ArgumentHelp("The iss claim, when the policy names an issuer.", valueName: "issuer"))
        var issuer: String?

        @Option(help: ArgumentHelp("The aud claim, when the policy names an audience.", valueName: "audience"))
        var audience: String?

        func validate() throws {
            guard Self.seconds(ttl) != nil else {
                throw ValidationError("--ttl '\(ttl)' is not a duration: a number with s, m, h or d (90s, 30m, 12h, 7d)")
            }
            guard !images.isEmpty else { throw ValidationError("name the images the token opens: --images GLOB...") }
        }

        func run() throws {
            do {
                let token = try TokenMinter.mint(
                    keyFile: key, kid: kid, images: images, lifetime: Self.seconds(ttl)!, issuer: issuer, audience: audience)
                print(token)
            } catch {
                FileHandle.standardError.write(Data("tiler token: \(error)\n".utf8))
                throw ExitCode.failure
            }
        }

        /// `90s`, `30m`, `12h`, `7d` or a bare number of seconds.
        static func seconds(_ text: String) -> Double? {
            let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
            var number = Substring(text), unit = 1.0
            if let last = text.last, let u = units[last] {
                number = text.dropLast()
                unit = u
            }
            guard let value = Double(number), value.isFinite, value > 0 else { return nil }
            return value * unit
        }
    }
}
