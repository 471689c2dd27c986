import Foundation
import ObjectStorage
import S3TestSupport
import Testing
import TilerSystem
import TilerTestSupport

/// The client against a real S3-compatible server (moto, signatures checked), and
/// against loopback sockets that misbehave on purpose.
@Suite struct S3ClientTests {
    let server: S3TestServer
    let bucket = "tiles"
    /// Every test writes under its own prefix of the shared server's bucket.
    let prefix = "client-\(UUID().uuidString.prefix(8))"

    init() throws { server = try S3TestServer.shared.get() }

    func client(secret: String? = nil, token: String? = nil, key: String? = nil, partSize: Int = 5 << 20) -> S3Client {
        var credentials = S3Credentials(accessKeyID: key ?? server.accessKeyID, secretAccessKey: secret ?? server.secretAccessKey)
        if let token { credentials.sessionToken = token }
        return S3Client(
            configuration: S3Configuration(
                credentials: credentials, region: server.region, endpoint: server.endpoint,
                requestTimeout: 20, partSize: partSize))
    }

    @Test func putHeadRangeListDelete() throws {
        let s3 = client()
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let etag = try s3.put(bucket: bucket, key: "\(prefix)/a.bin", body: .bytes(bytes))
        let info = try #require(try s3.head(bucket: bucket, key: "\(prefix)/a.bin"))
        #expect(info.size == 1000)
        #expect(info.etag == etag)
        #expect(try s3.get(bucket: bucket, key: "\(prefix)/a.bin", offset: 10, length: 20) == Array(bytes[10..<30]))
        #expect(try s3.get(bucket: bucket, key: "\(prefix)/a.bin", offset: 0, length: 1000, ifMatch: etag) == bytes)
        #expect(try s3.head(bucket: bucket, key: "\(prefix)/missing") == nil)
        let listed = try s3.listAll(bucket: bucket, prefix: prefix + "/")
        #expect(
            listed.map { S3Object(key: $0.key, size: $0.size, etag: $0.etag) } == [S3Object(key: "\(prefix)/a.bin", size: 1000, etag: etag)]
        )
        // LastModified is read (the server's Last-Modified for archives served from a bucket).
        let stored = try #require(listed.first?.lastModified)
        #expect(abs(stored - Int64(Date().timeIntervalSince1970)) < 3600, "\(stored)")
        try s3.delete(bucket: bucket, key: "\(prefix)/a.bin")
        try s3.delete(bucket: bucket, key: "\(prefix)/a.bin")
        #expect(try s3.head(bucket: bucket, key: "\(prefix)/a.bin") == nil)
    }

    /// moto recomputes every signature with botocore: a wrong secret must be refused, so
    /// a signing bug cannot pass unnoticed. The error names the key and S3's code.
    @Test func aWrongSecretIsRefusedWithItsCode() throws {
        let s3 = client(secret: "not-the-secret")
        let error = try #require(throws: S3Error.self) {
            try s3.put(bucket: bucket, key: "\(prefix)/x", body: .bytes([1, 2, 3]))
        }
        #expect(error.code == "SignatureDoesNotMatch")
        #expect(error.status == 403)
        #expect(error.description.hasPrefix("s3://tiles/\(prefix)/x: PUT: 403 SignatureDoesNotMatch"))
        #expect(!error.isUnavailable)
        let list = try #require(throws: S3Error.self) { try s3.list(bucket: bucket, prefix: prefix + "/") }
        #expect(list.code == "SignatureDoesNotMatch")
        let unknown = try #require(throws: S3Error.self) {
            try client(key: "AKIAUNKNOWNKEY000000").head(bucket: bucket, key: "\(prefix)/x")
        }
        #expect(unknown.status == 403)
    }

    @Test func temporaryCredentialsSendTheirSessionToken() throws {
        let (key, secret, token) = server.session
        let s3 = client(secret: secret, token: token, key: key)
        try s3.put(bucket: bucket, key: "\(prefix)/session", body: .bytes([9]))
        #expect(try s3.get(bucket: bucket, key: "\(prefix)/session", offset: 0, length: 1) == [9])
        let wrong = try #require(throws: S3Error.self) {
            try client(secret: secret, token: token + "x", key: key).get(bucket: bucket, key: "\(prefix)/session", offset: 0, length: 1)
        }
        #expect(wrong.code == "InvalidToken")
        let missing = try #require(throws: S3Error.self) {
            try client(secret: secret, key: key).get(bucket: bucket, key: "\(prefix)/session", offset: 0, length: 1)
        }
        #expect(missing.status == 403)
    }

    /// Keys and prefixes with characters that must be percent-encoded are signed as AWS
    /// canonicalises them, and boto3 reads back exactly the key written. ('%' and
    /// "!$,;" are left out: moto's checker sees paths decoded once, and refuses boto3's
    /// own correct signatures for them; scripts/s3-test-server says more.)
    @Test func keysThatNeedEncodingRoundTrip() throws {
        let s3 = client()
        let keys = ["\(prefix)/with space/a+b=c&d.bin", "\(prefix)/ünï/cödé~*'().bin", "\(prefix)/x/#?[]@.bin"]
        for (i, key) in keys.enumerated() { try s3.put(bucket: bucket, key: key, body: .bytes([UInt8(i)])) }
        let listed = try s3.listAll(bucket: bucket, prefix: "\(prefix)/").map(\.key).sorted()
        #expect(listed == keys.sorted())
        let spaced = try s3.listAll(bucket: bucket, prefix: "\(prefix)/with space/").map(\.key)
        #expect(spaced == [keys[0]])
        let seen = try server.python(
            """
            import boto3, sys
            s3 = boto3.client("s3")
            for o in s3.list_objects_v2(Bucket="tiles", Prefix=sys.argv[1])["Contents"]:
                print(o["Key"], s3.get_object(Bucket="tiles", Key=o["Key"])["Body"].read().hex())
            """, arguments: [prefix + "/"])
        #expect(seen.split(separator: "\n").map(String.init).sorted() == keys.enumerated().map { "\($1) 0\($0)" }.sorted())
    }

    @Test func listingFollowsContinuationTokens() throws {
        let s3 = client()
        let keys = (0..<7).map { "\(prefix)/k\($0)" }
        for key in keys { try s3.put(bucket: bucket, key: key, body: .bytes([1])) }
        try s3.put(bucket: bucket, key: "\(prefix)-other/k", body: .bytes([1]))
        let first = try s3.list(bucket: bucket, prefix: prefix + "/", maxKeys: 3)
        #expect(first.objects.count == 3)
        #expect(first.continuationToken != nil)
        #expect(try s3.listAll(bucket: bucket, prefix: prefix + "/", pageSize: 3).map(\.key) == keys)
        let tooMany = try #require(throws: S3Error.self) { try s3.listAll(bucket: bucket, prefix: prefix + "/", limit: 5, pageSize: 3) }
        #expect(tooMany.description.contains("more than 5 objects"))
    }

    /// Issue 31 #5: listings that would never end are refused: a continuation token the
    /// store sent before (a store that repeats its token), more pages than
    /// `listPages`, more time than `listSeconds`.
    @Test func listingsThatWouldNeverEndAreRefused() throws {
        let storage = try S3TestServer(buckets: ["tiles"])
        defer { storage.shutdown() }
        func client(pages: Int = S3Configuration.defaultListPages, seconds: Double = S3Configuration.defaultListSeconds) -> S3Client {
            S3Client(
                configuration: S3Configuration(
                    credentials: S3Credentials(accessKeyID: storage.accessKeyID, secretAccessKey: storage.secretAccessKey),
                    region: storage.region, endpoint: storage.endpoint, requestTimeout: 20, listPages: pages,
                    listSeconds: seconds))
        }
        let keys = (0..<4).map { "p/k\($0)" }
        for key in keys { try client().put(bucket: bucket, key: key, body: .bytes([1])) }
        #expect(try client(pages: 4).listAll(bucket: bucket, prefix: "p/", pageSize: 1).map(\.key) == keys)
        let pages = try #require(throws: S3Error.self) { try client(pages: 3).listAll(bucket: bucket, prefix: "p/", pageSize: 1) }
        #expect(pages.description.contains("did not end within 3 pages (TILER_S3_LIST_PAGES)"), "\(pages)")
        let slow = try #require(throws: S3Error.self) { try client(seconds: 0.001).listAll(bucket: bucket, prefix: "p/", pageSize: 1) }
        #expect(slow.description.contains("did not end within 0.001 s"), "\(slow)")
        try storage.loopListings(true)
        let started = Date()
        let looping = try #require(throws: S3Error.self) { try client().listAll(bucket: bucket, prefix: "p/") }
        #expect(
            looping.description.contains("page 2 of the listing of 'p/' gave a continuation token the store had already sent"), "\(looping)"
        )
        #expect(!looping.isUnavailable)
        print("a listing that repeats its token: refused after 2 pages, \(String(format: "%.3f", Date().timeIntervalSince(started))) s")
    }

    /// A file larger than the part size goes up in parts; boto3 reads back the same
    /// bytes, and no multipart upload is left open.
    @Test func multipartUploadIsReadBackByBoto3() throws {
        let s3 = client(partSize: 5 << 20)
        let (path, bytes) = try Self.randomFile(size: (11 << 20) + 12345)
        defer { unlink(path) }
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        var started: String?
        var ended = false
        try s3.upload(
            file: FileDescriptor(rawValue: fd), size: UInt64(bytes.count), bucket: bucket, key: "\(prefix)/big.bin", ifNoneMatch: true,
            uploadStarted: { started = $0 }, uploadEnded: { ended = true })
        #expect(started != nil)
        #expect(ended)
        let answer = try server.python(
            """
            import boto3, hashlib, sys
            s3 = boto3.client("s3")
            body = s3.get_object(Bucket="tiles", Key=sys.argv[1] + "/big.bin")["Body"].read()
            open(sys.argv[2], "wb").write(body)
            print(s3.head_object(Bucket="tiles", Key=sys.argv[1] + "/big.bin")["ETag"].endswith('-3"'))
            print(len(s3.list_multipart_uploads(Bucket="tiles", Prefix=sys.argv[1]).get("Uploads", [])))
            """, arguments: [prefix, path + ".back"])
        defer { unlink(path + ".back") }
        #expect(answer == "True\n0\n")
        #expect(FileManager.default.contents(atPath: path + ".back") == Data(bytes))
        // Without --force semantics, the existing key is left alone.
        let again = try #require(throws: S3Error.self) {
            try s3.upload(
                file: FileDescriptor(rawValue: fd), size: UInt64(bytes.count), bucket: bucket, key: "\(prefix)/big.bin", ifNoneMatch: true)
        }
        #expect(again.code == "PreconditionFailed")
        let small = try #require(throws: S3Error.self) {
            try s3.upload(file: FileDescriptor(rawValue: fd), size: 10, bucket: bucket, key: "\(prefix)/big.bin", ifNoneMatch: true)
        }
        #expect(small.code == "PreconditionFailed")
        #expect(try s3.head(bucket: bucket, key: "\(prefix)/big.bin")?.size == UInt64(bytes.count))
    }

    /// Cancelled after the first part: the upload is aborted, no object appears and no
    /// upload stays open.
    @Test func cancelledUploadLeavesNoObject() throws {
        let s3 = client(partSize: 5 << 20)
        let (path, bytes) = try Self.randomFile(size: 12 << 20)
        defer { unlink(path) }
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        let parts = Counter()
        let error = try #require(throws: S3Error.self) {
            try s3.upload(
                file: FileDescriptor(rawValue: fd), size: UInt64(bytes.count), bucket: bucket, key: "\(prefix)/cut.bin", ifNoneMatch: false,
                isCancelled: { parts.value >= 1 }, uploaded: { _ in parts.increment() })
        }
        #expect(error.kind == .cancelled)
        #expect(parts.value == 1)
        #expect(try s3.head(bucket: bucket, key: "\(prefix)/cut.bin") == nil)
        let open = try server.python(
            """
            import boto3, sys
            print(len(boto3.client("s3").list_multipart_uploads(Bucket="tiles", Prefix=sys.argv[1]).get("Uploads", [])))
            """, arguments: [prefix])
        #expect(open == "0\n")
    }

    /// A range read with the ETag of a replaced object is refused rather than mixing
    /// bytes of two versions.
    @Test func aReplacedObjectIsDetectedByIfMatch() throws {
        let s3 = client()
        let first = try s3.put(bucket: bucket, key: "\(prefix)/v", body: .bytes([1, 1, 1, 1]))
        try s3.put(bucket: bucket, key: "\(prefix)/v", body: .bytes([2, 2, 2, 2]))
        let error = try #require(throws: S3Error.self) {
            try s3.get(bucket: bucket, key: "\(prefix)/v", offset: 1, length: 2, ifMatch: first)
        }
        #expect(error.code == "PreconditionFailed")
        #expect(error.description.contains("changed"))
    }

    /// Issue #31 item 4: a store (or proxy) that ignores `If-Match` answers from the new
    /// version of a replaced object; the answer's ETag tells, and the read is refused as
    /// the object changed instead of handing out bytes of another version. Tags are
    /// compared without a weak prefix or quotes.
    @Test func anAnswerWithAnotherETagIsTheObjectChanged() throws {
        let storage = try S3TestServer(buckets: ["tiles"])
        defer { storage.shutdown() }
        try storage.ignoreIfMatch(true)
        let s3 = S3Client(
            configuration: S3Configuration(
                credentials: S3Credentials(accessKeyID: storage.accessKeyID, secretAccessKey: storage.secretAccessKey),
                region: storage.region, endpoint: storage.endpoint, retries: 1))
        let first = try s3.put(bucket: bucket, key: "v", body: .bytes([1, 1, 1, 1]))
        let second = try s3.put(bucket: bucket, key: "v", body: .bytes([2, 2, 2, 2]))
        let error = try #require(throws: S3Error.self) { try s3.get(bucket: bucket, key: "v", offset: 1, length: 2, ifMatch: first) }
        #expect(error.kind == .objectChanged && error.isObjectChanged && !error.isUnavailable, "\(error)")
        #expect(error.description.contains("the store ignored If-Match"), "\(error)")
        #expect(try s3.get(bucket: bucket, key: "v", offset: 1, length: 2, ifMatch: second) == [2, 2])
        let bare = String(second.dropFirst().dropLast())
        #expect(try s3.get(bucket: bucket, key: "v", offset: 1, length: 2, ifMatch: bare) == [2, 2])
        #expect(try s3.get(bucket: bucket, key: "v", offset: 1, length: 2, ifMatch: "W/" + second) == [2, 2])
    }

    /// A server that accepts the connection and never answers: the request ends with
    /// `timedOut` after its retries, instead of hanging.
    @Test func aSilentServerTimesOut() throws {
        let listener = try LoopbackListener()
        let s3 = S3Client(
            configuration: S3Configuration(
                credentials: S3Credentials(accessKeyID: "a", secretAccessKey: "b"), endpoint: "http://127.0.0.1:\(listener.port)",
                connectTimeout: 1, requestTimeout: 0.3, retries: 1))
        let error = try #require(throws: S3Error.self) { try s3.get(bucket: bucket, key: "k", offset: 0, length: 4) }
        #expect(error.kind == .timedOut)
        #expect(error.isUnavailable)
        #expect(error.description.hasPrefix("s3://tiles/k: GET: timed out"))
    }

    @Test func aClosedPortIsAConnectionError() throws {
        let port = try LoopbackListener().port  // closed again when the listener goes
        let s3 = S3Client(
            configuration: S3Configuration(
                credentials: S3Credentials(accessKeyID: "a", secretAccessKey: "b"), endpoint: "http://127.0.0.1:\(port)",
                connectTimeout: 1, requestTimeout: 1, retries: 2))
        let error = try #require(throws: S3Error.self) { try s3.head(bucket: bucket, key: "k") }
        #expect(error.kind == .connection)
        #expect(error.isUnavailable)
    }

    /// Answers that claim or carry more than was asked for never size a buffer and are
    /// refused.
    @Test func oversizedAnswersAreRefused() throws {
        let huge = "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-3/10\r\nContent-Length: 10\r\n\r\n0123456789"
        let lying = "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-3/10\r\nContent-Length: 99999999999999\r\n\r\n0123"
        let wrongRange = "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 4-7/10\r\nContent-Length: 4\r\n\r\n4567"
        // The lying length is refused by its header or by the transfer's end, whichever
        // the client meets first (it depends on how the bytes arrive): both are refusals.
        let cases: [(String, [String])] = [
            (huge, ["larger than 4 bytes"]), (lying, ["bytes remaining", "larger than 4 bytes"]),
            (wrongRange, ["Content-Range 'bytes 4-7/10'"]),
        ]
        for (answer, expected) in cases {
            let server = try CannedServer(reply: answer)
            let s3 = S3Client(
                configuration: S3Configuration(
                    credentials: S3Credentials(accessKeyID: "a", secretAccessKey: "b"), endpoint: "http://127.0.0.1:\(server.port)",
                    connectTimeout: 1, requestTimeout: 2, retries: 0))
            let error = try #require(throws: S3Error.self) { try s3.get(bucket: bucket, key: "k", offset: 0, length: 4) }
            #expect(expected.contains { error.description.contains($0) }, "\(error)")
        }
    }

    @Test func settingsComeFromTheEnvironment() throws {
        #expect(throws: S3Error.self) { try S3Configuration(environment: [:]) }
        let base = ["AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"]
        let plain = try S3Configuration(environment: base)
        #expect(plain.region == "us-east-1")
        #expect(plain.endpoint == nil)
        #expect(plain.credentials.sessionToken == nil)
        let full = try S3Configuration(
            environment: base.merging([
                "AWS_SESSION_TOKEN": "t", "AWS_DEFAULT_REGION": "eu-west-3", "AWS_ENDPOINT_URL": "http://127.0.0.1:9000/",
                "TILER_S3_TIMEOUT": "2.5", "TILER_S3_CONNECT_TIMEOUT": "1", "TILER_S3_RETRIES": "0", "TILER_S3_PART_SIZE": "8M",
                "TILER_S3_LIST_PAGES": "50", "TILER_S3_LIST_SECONDS": "7.5",
            ]) { $1 })
        #expect(full.listPages == 50 && full.listSeconds == 7.5)
        #expect(plain.listPages == S3Configuration.defaultListPages && plain.listSeconds == S3Configuration.defaultListSeconds)
        #expect(full.credentials.sessionToken == "t")
        #expect(full.region == "eu-west-3")
        #expect(full.endpoint == "http://127.0.0.1:9000")
        #expect(full.requestTimeout == 2.5)
        #expect(full.retries == 0)
        #expect(full.partSize == 8 << 20)
        #expect(
            try S3Configuration(
                environment: base.merging(["AWS_ENDPOINT_URL": "http://a:1"]) { $1 },
                endpoint: "https://b:2"
            ).endpoint == "https://b:2")
        for (name, value) in [
            ("AWS_ENDPOINT_URL", "ftp://x"), ("AWS_ENDPOINT_URL", "http://x/path"), ("TILER_S3_PART_SIZE", "1M"),
            ("TILER_S3_TIMEOUT", "0"), ("TILER_S3_RETRIES", "many"), ("AWS_REGION", "us east"),
            ("TILER_S3_LIST_PAGES", "0"), ("TILER_S3_LIST_SECONDS", "1e9"),
        ] {
            let error = try #require(throws: S3Error.self) { try S3Configuration(environment: base.merging([name: value]) { $1 }) }
            #expect(error.description.contains(name == "AWS_ENDPOINT_URL" ? "endpoint" : name), "\(error)")
        }
        // 10,000 parts at most: a 1 TiB object gets parts of 105 MiB.
        #expect(plain.partSize(forObjectOf: 1 << 40) == Int((UInt64(1 << 40) + 9_999) / 10_000))
        #expect(plain.partSize(forObjectOf: 1 << 20) == S3Configuration.defaultPartSize)
    }

    @Test func locationsParse() throws {
        let location = try S3Location(parsing: "s3://tiles/some/prefix/")
        #expect(location.bucket == "tiles")
        #expect(location.prefix == "some/prefix")
        #expect(location.key("a.pmtiles") == "some/prefix/a.pmtiles")
        #expect(location.description == "s3://tiles/some/prefix")
        let top = try S3Location(parsing: "s3://my-bucket.1")
        #expect(top.prefix == "")
        #expect(top.key("a.pmtiles") == "a.pmtiles")
        #expect(top.listPrefix == "")
        for bad in ["s3://", "s3://ab", "s3://Tiles/x", "s3://-x-/y", "s3://tiles/a//b", "s3://tiles/../b", "s3://tiles/a\u{1}"] {
            #expect(throws: S3Error.self, "\(bad)") { try S3Location(parsing: bad) }
        }
    }

    static func randomFile(size: Int) throws -> (String, [UInt8]) {
        var generator = SystemRandomNumberGenerator()
        let bytes =
            (0..<size / 8).flatMap { _ in withUnsafeBytes(of: generator.next() as UInt64) { Array($0) } }
            + (0..<size % 8).map { _ in UInt8.random(in: 0...255) }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("s3-\(UUID().uuidString)").path
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else {
            throw S3TestServerError("cannot write \(path)")
        }
        return (path, bytes)
    }
}
