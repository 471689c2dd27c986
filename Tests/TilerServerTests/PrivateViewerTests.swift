import Foundation
import Testing
import TilerCore
import TilerHTTP
@testable import TilerServer
import TilerTestSupport

/// The viewer on a share link (`/?token=…#/image/ID`), in Chromium: it carries the token
/// into every request it makes, so the private image opens with its tiles and the album
/// pages through the private images the token opens; without the link's token the image
/// says it cannot be opened, and the album shows only the public one.
@Suite(.serialized) struct PrivateViewerTests {
    @Test(.timeLimit(.minutes(10))) func aShareLinkOpensPrivateImagesInTheViewer() throws {
        let setup = try AccessTests.Setup()
        defer { setup.scratch.cleanUp() }
        let root = try PyramidRoot()
        try AccessTests.cutPyramids(["public-a", "secret-a", "secret-b"], into: root)
        let token = try setup.keys.tokens([
            TokenSpec(alg: "RS256", kid: "idp", claims: AccessTests.Setup.claims(["secret-*"]))
        ])[0]
        let accessLog = CollectedLog()
        try withTileServer(root, access: try setup.access(), accessLog: accessLog) { port in
            guard let driver = try startBrowser() else { return }
            defer { driver.quit() }
            let base = "http://127.0.0.1:\(port)/"
            try driver.navigate(base + "?token=\(token)#/image/secret-a")
            try driver.wait(
                for: "the private image's tiles",
                "const v = tilerViewer.view(); return v && v.id === 'secret-a' && v.pending === 0 && v.activeTiles > 0")
            #expect(try driver.execute("return tilerViewer.stats.tileErrors") as? Int == 0)
            // Its share button copies a link that opens it again: the page's token with the view.
            try driver.click("#share")
            let shared = try #require(
                driver.wait(for: "the shared link", "return document.getElementById('share').dataset.link || null") as? String)
            #expect(shared.contains("?token=\(token)#/image/secret-a?x="), "\(shared.prefix(80))")
            try driver.navigate(base + "?token=\(token)#/")
            try driver.wait(for: "the album of three", "return tilerViewer.album().total === 3 && tilerViewer.stats.thumbnailsLoaded === 3")
            try driver.expectNoScriptErrors()

            // The same links without the token.
            try driver.navigate(base + "#/")
            try driver.wait(for: "the album of one", "return tilerViewer.album().total === 1")
            try driver.navigate(base + "#/image/secret-b")
            try driver.wait(
                for: "the refusal", "return document.getElementById('status').textContent.includes('Could not open the image')")
            // A policy without a loginURL names no login to offer (its access service is external).
            #expect(try driver.execute("return document.getElementById('login').hidden") as? Bool == true)
            #expect(try driver.execute("return tilerViewer.stats.loginsOffered") as? Int == 0)
        }
        // Every request the viewer made for a private image carried the token, so none was
        // refused while the link had it: the 401s are the last part's alone.
        let refused = accessLog.linesWithMetadata.filter { $0.contains("status: 401") || $0.contains("\"status\": 401") }
        #expect(!accessLog.linesWithMetadata.isEmpty)
        #expect(!refused.isEmpty && refused.allSatisfy { $0.contains("secret-b") }, "\(refused.prefix(5))")
        #expect(!accessLog.linesWithMetadata.contains { $0.contains(String(token.split(separator: ".")[2])) })
    }
}
