import Foundation
import Testing
import TilerHTTP
@testable import TilerServer

/// A proxy set up half-way is logged (issue 31, item 11): `X-Forwarded-Prefix` without
/// `--base-url`, and a prefix the proxy passes on unstripped, each once however many
/// requests show it, naming the prefix but never the rest of the path or the query.
@Suite struct ProxyHintsTests {
    static func warnings(_ log: CollectedLog) -> [String] { log.messages.filter { $0.hasPrefix("warning:") } }

    @Test func aForwardedPrefixWithoutABaseURLIsLoggedOnce() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 300, height: 200)
        let log = CollectedLog()
        try withTileServer(root, log: log) { port throws in
            for path in ["/", "/images?token=secret-one", "/images/a/tiles/0/0/0.png", "/viewer/viewer.js"] {
                let response = try request(port, "GET", path, headers: ["X-Forwarded-Prefix: /some/prefix"])
                #expect(response.status == 200, "\(path)")
            }
            // An ordinary request says nothing.
            #expect(try request(port, "GET", "/images").status == 200)
        }
        let warnings = Self.warnings(log)
        #expect(warnings.count == 1, "\(warnings)")
        #expect(warnings.first?.contains("X-Forwarded-Prefix") == true && warnings.first?.contains("/some/prefix") == true)
        #expect(warnings.first?.contains("--base-url") == true)
        #expect(!log.messages.joined().contains("secret"))
    }

    @Test func aForwardedPrefixWithABaseURLIsQuiet() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 300, height: 200)
        let log = CollectedLog()
        try withTileServer(root, log: log, { $0.baseURL = try! BaseURL(parsing: "https://example.org/some/prefix") }) { port throws in
            #expect(try request(port, "GET", "/images", headers: ["X-Forwarded-Prefix: /some/prefix"]).status == 200)
        }
        #expect(Self.warnings(log).isEmpty, "\(log.messages)")
    }

    @Test func anUnstrippedPrefixIsLoggedOnceAndOtherPathsAreNot() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 300, height: 200)
        let log = CollectedLog()
        try withTileServer(root, log: log) { port throws in
            // What a scanner asks for, or a browser's favicon: 404, and no warning.
            for path in ["/wp-login.php", "/favicon.ico", "/cgi-bin/test.cgi?x=1", "/some/thing/else"] {
                #expect(try request(port, "GET", path).status == 404, "\(path)")
            }
            #expect(Self.warnings(log).isEmpty, "\(log.messages)")
            // A proxy that did not strip /some/prefix: 404s, and one warning naming it.
            for path in ["/some/prefix/", "/some/prefix/images?token=secret-two", "/some/prefix/images/a/tiles/0/0/0.png"] {
                #expect(try request(port, "GET", path).status == 404, "\(path)")
            }
        }
        let warnings = Self.warnings(log)
        #expect(warnings.count == 1, "\(warnings)")
        #expect(warnings.first?.contains("/some/prefix/…") == true, "\(warnings)")
        #expect(warnings.first?.contains("strip") == true)
        #expect(!log.messages.joined().contains("secret") && !log.messages.joined().contains("tiles/0"))
    }

    @Test func aPrefixThatIsNotAPlainPathIsNotShown() throws {
        let root = try PyramidRoot()
        try root.addPyramid("a", width: 300, height: 200)
        let log = CollectedLog()
        try withTileServer(root, log: log) { port throws in
            #expect(try request(port, "GET", "/images", headers: ["X-Forwarded-Prefix: /a\"b<script>"]).status == 200)
            #expect(try request(port, "GET", "/x%20y/images/a").status == 404)
        }
        let warnings = Self.warnings(log)
        #expect(warnings.count == 2, "\(warnings)")
        #expect(warnings.allSatisfy { $0.contains("(a prefix not shown)") && !$0.contains("script") && !$0.contains("x y") })
    }
}
