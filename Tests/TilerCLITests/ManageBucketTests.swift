import Foundation
import S3TestSupport
import Testing
import TilerTestSupport

/// `tiler info`, `verify` and `ls` on archives in a bucket (the S3 test server), through
/// the same reader as local archives.
@Suite(.serialized) struct ManageBucketTests {
    @Test func infoVerifyAndLsReadArchivesInABucket() throws {
        let server = try S3TestServer.shared.get()
        let prefix = "manage-\(UUID().uuidString.prefix(8))"
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let tiler = try tilerBinary()
        let environment = server.environment.merging(["TILER_S3_STAGING": scratch.path("staging")]) { $1 }
        try CutCommandTests.makeImage(scratch.path("photo.png"), width: 1000, height: 700, bands: 3, scratch: scratch)
        for name in ["photo", "second"] {
            let cut = try run(
                tiler, ["cut", scratch.path("photo.png"), "--archive", "-o", "s3://tiles/\(prefix)", "--name", name, "--quiet"],
                environment: environment)
            #expect(cut.status == 0, "\(cut.stderr)")
        }
        let url = "s3://tiles/\(prefix)/photo.pmtiles"
        let info = try run(tiler, ["info", url, "--json"], environment: environment)
        #expect(info.status == 0, "\(info.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any])
        #expect(object["layout"] as? String == "archive" && object["path"] as? String == url)
        #expect((object["totals"] as? [String: Any])?["tiles"] as? Int == 17)

        let verify = try run(tiler, ["verify", url], environment: environment)
        #expect(verify.status == 0 && verify.stdout.contains("17 tiles and the thumbnail checked: ok"), "\(verify.stderr)")

        let ls = try run(tiler, ["ls", "s3://tiles/\(prefix)", "--json"], environment: environment)
        #expect(ls.status == 0, "\(ls.stderr)")
        let listing = try #require(try JSONSerialization.jsonObject(with: Data(ls.stdout.utf8)) as? [String: Any])
        #expect((listing["pyramids"] as? [[String: Any]])?.map { $0["id"] as? String } == ["photo", "second"])

        let missing = try run(tiler, ["info", "s3://tiles/\(prefix)/none.pmtiles"], environment: environment)
        #expect(
            missing.status == 1 && missing.stderr == "tiler: info: s3://tiles/\(prefix)/none.pmtiles: no such object\n", "\(missing.stderr)"
        )
    }
}
