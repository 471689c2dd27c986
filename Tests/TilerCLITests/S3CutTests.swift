import Foundation
import S3TestSupport
import Testing
import TilerCore
import TilerTestSupport

/// `tiler cut --archive --output s3://BUCKET/PREFIX` end to end: the built binary, a real
/// S3-compatible server (moto, signatures checked) on a loopback port, boto3 to read back
/// what tiler uploaded, and the official PMTiles reader to judge it.
@Suite(.serialized) struct S3CutTests {
    let server: S3TestServer
    let prefix = "cli-\(UUID().uuidString.prefix(8))"

    init() throws { server = try S3TestServer.shared.get() }

    /// The variables tiler reads, plus a staging folder of the test's own.
    func environment(_ scratch: Scratch, _ extra: [String: String] = [:]) -> [String: String] {
        server.environment.merging(["TILER_S3_STAGING": scratch.path("staging")]) { $1 }.merging(extra) { $1 }
    }

    /// Downloads `key` with boto3 to `path`.
    func download(_ key: String, to path: String) throws {
        try server.python(
            """
            import boto3, sys
            boto3.client("s3").download_file("tiles", sys.argv[1], sys.argv[2])
            """, arguments: [key, path])
    }

    /// The same image cut to a folder and to a bucket: boto3 downloads the object, and
    /// the official reader finds every tile of the folder cut in it, byte for byte.
    @Test(arguments: ["png", "jpeg", "webp"])
    func anArchiveCutToABucketIsTheFolderCutsTiles(format: String) throws {
        let scratch = try Scratch("s3-cut-\(format)")
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try CutCommandTests.makeImage(input, width: 3001, height: 1999, bands: format == "jpeg" ? 3 : 4, scratch: scratch)
        let tiler = try tilerBinary()
        let folderCut = try run(tiler, ["cut", input, "-o", scratch.path("folders"), "--format", format, "--quiet"])
        #expect(folderCut.status == 0, "\(folderCut.stderr)")
        let cut = try run(
            tiler, ["cut", input, "-o", "s3://tiles/\(prefix)/\(format)", "--format", format, "--archive", "--quiet", "--json"],
            environment: environment(scratch))
        #expect(cut.status == 0, "\(cut.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(cut.stdout.utf8)) as? [String: Any])
        let image = try #require((summary["images"] as? [[String: Any]])?.first)
        #expect(image["output"] as? String == "s3://tiles/\(prefix)/\(format)/photo.pmtiles")
        #expect(
            ArchiveCommandTests.entries(scratch.path("staging")).isEmpty,
            "staging holds \(ArchiveCommandTests.entries(scratch.path("staging")))")

        try download("\(prefix)/\(format)/photo.pmtiles", to: scratch.path("photo.pmtiles"))
        #expect(image["bytes"] as? Int == (try FileManager.default.attributesOfItem(atPath: scratch.path("photo.pmtiles"))[.size] as? Int))
        let check = try ArchiveCommandTests.checkWithPMTilesReader(
            scratch.path("photo.pmtiles"), against: scratch.path("folders/photo"),
            ignoring: ["created"])
        #expect(check.status == 0, "\(check.stderr)")
    }

    /// An archive larger than the part size goes up as a multipart upload: the object's
    /// ETag says how many parts, none stays open, and the reader still finds every tile.
    @Test func largeArchivesGoUpInParts() throws {
        let scratch = try Scratch("s3-parts")
        defer { scratch.cleanUp() }
        let input = scratch.path("noise.v")
        try vips("gaussnoise", scratch.path("noise-f.v"), "2600", "2600", "--sigma", "60")
        try vips("cast", scratch.path("noise-f.v"), input, "uchar")
        let tiler = try tilerBinary()
        #expect(try run(tiler, ["cut", input, "-o", scratch.path("folders"), "--format", "png", "--quiet"]).status == 0)
        let cut = try run(
            tiler, ["cut", input, "-o", "s3://tiles/\(prefix)", "--archive", "--format", "png", "--quiet", "--json"],
            environment: environment(scratch, ["TILER_S3_PART_SIZE": "5M"]))
        #expect(cut.status == 0, "\(cut.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(cut.stdout.utf8)) as? [String: Any])
        let bytes = try #require((summary["images"] as? [[String: Any]])?.first?["bytes"] as? Int)
        #expect(bytes > 5 << 20, "\(bytes) bytes: too small for two parts")
        let seen = try server.python(
            """
            import boto3, sys
            s3 = boto3.client("s3")
            print(s3.head_object(Bucket="tiles", Key=sys.argv[1] + "/noise.pmtiles")["ETag"].strip('"').split("-")[1])
            print(len(s3.list_multipart_uploads(Bucket="tiles", Prefix=sys.argv[1]).get("Uploads", [])))
            """, arguments: [prefix])
        #expect(seen == "\((bytes + (5 << 20) - 1) / (5 << 20))\n0\n")
        try download("\(prefix)/noise.pmtiles", to: scratch.path("noise.pmtiles"))
        let check = try ArchiveCommandTests.checkWithPMTilesReader(
            scratch.path("noise.pmtiles"), against: scratch.path("folders/noise"),
            ignoring: ["created"])
        #expect(check.status == 0, "\(check.stderr)")
    }

    /// An existing key is an error without --force (the object is left as it was), and
    /// replaced with it: the object then holds the second cut, tile for tile. The second
    /// cut is of other pixels (and another size) under the same id, so this holds however
    /// fast the two cuts run; an ETag (the MD5 of a one-part upload) cannot tell two cuts
    /// of the same image made in the same second apart.
    @Test func anExistingKeyNeedsForce() throws {
        let scratch = try Scratch("s3-force")
        defer { scratch.cleanUp() }
        let input = scratch.path("first/photo.png"), other = scratch.path("second/photo.png")
        try FileManager.default.createDirectory(atPath: scratch.path("first"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: scratch.path("second"), withIntermediateDirectories: true)
        try CutCommandTests.makeImage(input, width: 600, height: 400, bands: 3, scratch: scratch)
        try CutCommandTests.makeImage(other, width: 700, height: 300, bands: 3, scratch: scratch)
        let tiler = try tilerBinary()
        for (image, folder) in [(input, "first-folder"), (other, "second-folder")] {
            let cut = try run(tiler, ["cut", image, "-o", scratch.path(folder), "--quiet"])
            #expect(cut.status == 0, "\(cut.stderr)")
        }
        let arguments = ["-o", "s3://tiles/\(prefix)", "--archive", "--quiet"]
        #expect(try run(tiler, ["cut", input] + arguments, environment: environment(scratch)).status == 0)
        /// Whether the object is the folder cut in `folder`, tile for tile, by the official reader.
        func objectHolds(_ folder: String) throws -> ProcessOutput {
            let downloaded = scratch.path("download.pmtiles")
            try? FileManager.default.removeItem(atPath: downloaded)
            try download("\(prefix)/photo.pmtiles", to: downloaded)
            return try ArchiveCommandTests.checkWithPMTilesReader(
                downloaded, against: scratch.path("\(folder)/photo"), ignoring: ["created"])
        }
        let first = try objectHolds("first-folder")
        #expect(first.status == 0, "\(first.stderr)")

        let again = try run(tiler, ["cut", other] + arguments, environment: environment(scratch))
        #expect(again.status == 1)
        #expect(
            again.stderr
                == "tiler: cut: \(other): a pyramid named 'photo' already exists at s3://tiles/\(prefix)/photo.pmtiles; use --force to replace it or --name to choose another id\n"
        )
        let kept = try objectHolds("first-folder")
        #expect(kept.status == 0, "the refused cut changed the object: \(kept.stderr)")

        let forced = try run(tiler, ["cut", other] + arguments + ["--force"], environment: environment(scratch))
        #expect(forced.status == 0, "\(forced.stderr)")
        let replaced = try objectHolds("second-folder")
        #expect(replaced.status == 0, "the object is not the second cut: \(replaced.stderr)")
    }

    /// What cannot work is said before any cutting, in one line or a usage error.
    @Test func usageAndStorageErrorsComeFirst() throws {
        let scratch = try Scratch("s3-errors")
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try CutCommandTests.makeImage(input, width: 300, height: 200, bands: 3, scratch: scratch)
        let tiler = try tilerBinary()
        let noArchive = try run(tiler, ["cut", input, "-o", "s3://tiles/\(prefix)"], environment: environment(scratch))
        #expect(noArchive.status == 64)
        #expect(noArchive.stderr.contains("needs --archive"), "\(noArchive.stderr)")
        let endpointAlone = try run(tiler, ["cut", input, "-o", scratch.path("out"), "--s3-endpoint", server.endpoint])
        #expect(endpointAlone.status == 64 && endpointAlone.stderr.contains("--s3-endpoint applies to"), "\(endpointAlone.stderr)")
        let badBucket = try run(tiler, ["cut", input, "-o", "s3://No_Such/x", "--archive"], environment: environment(scratch))
        #expect(badBucket.status == 64 && badBucket.stderr.contains("is not a bucket name"), "\(badBucket.stderr)")
        let noCredentials = try run(
            tiler, ["cut", input, "-o", "s3://tiles/\(prefix)", "--archive"],
            environment: environment(scratch, ["AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""]))
        #expect(noCredentials.status == 64 && noCredentials.stderr.contains("AWS_ACCESS_KEY_ID"), "\(noCredentials.stderr)")

        let wrongSecret = try run(
            tiler, ["cut", input, "-o", "s3://tiles/\(prefix)", "--archive", "--quiet"],
            environment: environment(scratch, ["AWS_SECRET_ACCESS_KEY": "wrong"]))
        #expect(wrongSecret.status == 1)
        #expect(
            wrongSecret.stderr
                == "tiler: cut: s3://tiles: ListObjectsV2: 403 SignatureDoesNotMatch: The request signature we calculated does not match the signature you provided. Check your key and signing method.\n"
        )
        let noBucket = try run(
            tiler, ["cut", input, "-o", "s3://missing-bucket/x", "--archive", "--quiet"], environment: environment(scratch))
        #expect(noBucket.status == 1 && noBucket.stderr.contains("404 NoSuchBucket"), "\(noBucket.stderr)")
        let down = try run(
            tiler, ["cut", input, "-o", "s3://tiles/x", "--archive", "--quiet", "--s3-endpoint", "http://127.0.0.1:1"],
            environment: environment(scratch, ["TILER_S3_RETRIES": "0"]))
        #expect(down.status == 1 && down.stderr.hasPrefix("tiler: cut: s3://tiles: ListObjectsV2: "), "\(down.stderr)")
        #expect(ArchiveCommandTests.entries(scratch.path("staging")).isEmpty)
    }

    /// SIGINT while a multipart upload is under way (the storage is slow: every PUT is
    /// held 2 s): the upload is aborted, no object appears, no part stays behind, and the
    /// staging folder is gone. Exit 130.
    @Test func anInterruptedUploadLeavesNoObject() throws {
        let server = try S3TestServer(buckets: ["tiles"])
        defer { server.shutdown() }
        try server.delay("PUT", seconds: 2)
        let scratch = try Scratch("s3-interrupt")
        defer { scratch.cleanUp() }
        let input = scratch.path("noise.v")
        try vips("gaussnoise", scratch.path("noise-f.v"), "2600", "2600", "--sigma", "60")
        try vips("cast", scratch.path("noise-f.v"), input, "uchar")
        let cut = Process()
        cut.executableURL = URL(fileURLWithPath: try tilerBinary())
        cut.arguments = ["cut", input, "-o", "s3://tiles/\(prefix)", "--archive", "--format", "png", "--quiet"]
        cut.environment = ProcessInfo.processInfo.environment.merging(server.environment) { $1 }
            .merging(["TILER_S3_STAGING": scratch.path("staging"), "TILER_S3_PART_SIZE": "5M"]) { $1 }
        let errors = Pipe()
        cut.standardError = errors
        try cut.run()
        // Waits (60 s at most) until the multipart upload exists.
        let started = try server.python(
            """
            import boto3, sys, time
            s3 = boto3.client("s3")
            deadline = time.time() + 60
            while time.time() < deadline:
                if s3.list_multipart_uploads(Bucket="tiles").get("Uploads"):
                    print("started")
                    break
                time.sleep(0.05)
            """)
        #expect(started == "started\n")
        kill(cut.processIdentifier, SIGINT)
        cut.waitUntilExit()
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(cut.terminationReason == .exit && cut.terminationStatus == 128 + SIGINT, "\(stderr)")
        try server.delay("PUT", seconds: 0)
        let left = try server.python(
            """
            import boto3
            s3 = boto3.client("s3")
            print(s3.list_objects_v2(Bucket="tiles")["KeyCount"], len(s3.list_multipart_uploads(Bucket="tiles").get("Uploads", [])))
            """)
        #expect(left == "0 0\n")
        #expect(
            ArchiveCommandTests.entries(scratch.path("staging")).isEmpty,
            "staging holds \(ArchiveCommandTests.entries(scratch.path("staging")))")
    }

    /// `tiler pack FOLDER --output s3://…` uploads the folder as one archive that the
    /// official reader finds equal to the folder, tile for tile; an existing key needs
    /// --force; `--output` also names another local folder.
    @Test func aFolderPackedIntoABucketIsTheFolder() throws {
        let scratch = try Scratch("s3-pack")
        defer { scratch.cleanUp() }
        let input = scratch.path("photo.png")
        try CutCommandTests.makeImage(input, width: 3001, height: 1999, bands: 3, scratch: scratch)
        let tiler = try tilerBinary()
        #expect(try run(tiler, ["cut", input, "-o", scratch.path("folders"), "--format", "webp", "--quiet"]).status == 0)
        let arguments = ["pack", scratch.path("folders/photo"), "--output", "s3://tiles/\(prefix)/packed"]
        let pack = try run(tiler, arguments + ["--json"], environment: environment(scratch))
        #expect(pack.status == 0, "\(pack.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(pack.stdout.utf8)) as? [String: Any])
        let report = try #require((summary["pyramids"] as? [[String: Any]])?.first)
        #expect(report["output"] as? String == "s3://tiles/\(prefix)/packed/photo.pmtiles")
        #expect(ArchiveCommandTests.entries(scratch.path("staging")).isEmpty)
        try download("\(prefix)/packed/photo.pmtiles", to: scratch.path("photo.pmtiles"))
        #expect(report["bytes"] as? Int == (try FileManager.default.attributesOfItem(atPath: scratch.path("photo.pmtiles"))[.size] as? Int))
        let check = try ArchiveCommandTests.checkWithPMTilesReader(
            scratch.path("photo.pmtiles"), against: scratch.path("folders/photo"),
            ignoring: [])
        #expect(check.status == 0, "\(check.stderr)")

        let again = try run(tiler, arguments, environment: environment(scratch))
        #expect(again.status == 1)
        #expect(
            again.stderr.contains("s3://tiles/\(prefix)/packed/photo.pmtiles") && again.stderr.contains("already exists"), "\(again.stderr)"
        )
        #expect(try run(tiler, arguments + ["--force"], environment: environment(scratch)).status == 0)

        let local = try run(tiler, ["pack", scratch.path("folders/photo"), "-o", scratch.path("elsewhere/archives")])
        #expect(local.status == 0, "\(local.stderr)")
        #expect(FileManager.default.fileExists(atPath: scratch.path("elsewhere/archives/photo.pmtiles")))
        #expect(!FileManager.default.fileExists(atPath: scratch.path("folders/photo.pmtiles")))
        let endpointAlone = try run(tiler, ["pack", scratch.path("folders/photo"), "--s3-endpoint", server.endpoint])
        #expect(endpointAlone.status == 64 && endpointAlone.stderr.contains("--s3-endpoint applies to"), "\(endpointAlone.stderr)")
        let noBucket = try run(
            tiler, ["pack", scratch.path("folders/photo"), "-o", "s3://no-such-bucket/x"], environment: environment(scratch))
        #expect(noBucket.status == 1 && noBucket.stderr.hasPrefix("tiler: pack: s3://no-such-bucket"), "\(noBucket.stderr)")
    }
}
