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

    /// Issue 31 #5: `tiler ls` of a store that gives the same `NextContinuationToken` on
    /// every page. Before, it listed page after page and never ended (still running after
    /// 15 s, 294 pages). Now the repeated token ends it with one line and exit 1. (The
    /// page and time bounds for tokens that differ: `S3ClientTests`.)
    @Test func lsEndsOnAListingThatNeverEnds() throws {
        let server = try S3TestServer(buckets: ["tiles"])
        defer { server.shutdown() }
        let tiler = try tilerBinary()
        let s3 = server.environment
        // Three keys, one a page: every page has a new token.
        for key in ["p/a.pmtiles", "p/b.pmtiles", "p/c.pmtiles"] {
            try server.python(
                "import boto3, os, sys; boto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT_URL']).put_object(Bucket='tiles', Key=sys.argv[1], Body=b'x')",
                arguments: [key])
        }
        try server.loopListings(true)
        // `timeout` ends a listing that would never end (killed: 137).
        let looping = try run("timeout", ["-s", "KILL", "60", tiler, "ls", "s3://tiles/p"], environment: s3)
        #expect(looping.status == 1, "\(looping.status) \(looping.stderr)")
        #expect(looping.stderr.contains("continuation token the store had already sent"), "\(looping.stderr)")
        #expect(looping.stderr.split(separator: "\n").count == 1, "\(looping.stderr)")
        try server.loopListings(false)
        #expect(try run(tiler, ["ls", "s3://tiles/p"], environment: s3).stderr.contains("already sent") == false)
        let bad = try run(tiler, ["ls", "s3://tiles/p"], environment: s3.merging(["TILER_S3_LIST_SECONDS": "0"]) { $1 })
        #expect(bad.status == 64 && bad.stderr.contains("TILER_S3_LIST_SECONDS"), "\(bad.status) \(bad.stderr)")
    }
}
