import Foundation
import Testing
import TilerCore
import TilerTestSupport

/// "Albums and metadata" (issue 34, item 1), the built binary end to end: photos whose
/// EXIF, IPTC and XMP were written by exiftool (an independent tool) are cut, and the
/// manifest, `tiler info`, archives, `GET /images/ID`, `/images` and `--sources` hold what
/// was written; GPS only with `--keep-location`; `--title`, `--description` and `--album`
/// override; hostile XMP is refused, never expanded; a private image's metadata is never
/// shown without a token.
@Suite(.serialized) struct CutMetadataTests {
    /// What exiftool writes into the full photo.
    static let fullTags = [
        "-XMP-dc:Title=Bridge at dusk", "-XMP-dc:Description=Über den Fluss, am Abend", "-XMP-dc:Creator=Ada Lovelace",
        "-XMP-dc:Rights=CC BY 4.0", "-EXIF:DateTimeOriginal=2024:05:01 14:03:22", "-EXIF:OffsetTimeOriginal=+02:00",
        "-EXIF:Make=Canon", "-EXIF:Model=Canon EOS R5", "-EXIF:LensModel=RF24-105mm F4 L IS USM", "-EXIF:ExposureTime=1/250",
        "-EXIF:FNumber=8", "-EXIF:ISO=100", "-GPSLatitude=48.8584", "-GPSLatitudeRef=S", "-GPSLongitude=2.2945",
        "-GPSLongitudeRef=E",
    ]

    /// A 300 × 200 JPEG with `tags` written by exiftool.
    static func photo(_ path: String, _ tags: [String]) throws {
        try vips("black", path, "300", "200", "--bands", "3")
        let written = try run(
            "exiftool", ["-q", "-overwrite_original", "-charset", "iptc=UTF8", "-IPTC:CodedCharacterSet=UTF8"] + tags + [path])
        try #require(written.status == 0, "exiftool: \(written.stderr)")
    }

    /// Cuts `input` as `id` into `root` and reads the manifest's metadata.
    static func cut(_ input: String, root: String, id: String, _ extra: [String] = []) throws -> PhotoMetadata? {
        let result = try run(try tilerBinary(), ["cut", input, "-o", root, "--name", id, "--quiet"] + extra)
        try #require(result.status == 0, "tiler cut \(extra): \(result.stderr)")
        let path = extra.contains("--archive") ? nil : "\(root)/\(id)/pyramid.json"
        guard let path else { return nil }
        return try JSONDecoder().decode(PyramidManifest.self, from: Data(contentsOf: URL(fileURLWithPath: path))).metadata
    }

    static let expected = PhotoMetadata(
        title: "Bridge at dusk", description: "Über den Fluss, am Abend", creator: "Ada Lovelace", copyright: "CC BY 4.0",
        dateTaken: "2024-05-01T14:03:22+02:00", camera: "Canon EOS R5", lens: "RF24-105mm F4 L IS USM",
        exposure: "1/250 s, f/8, ISO 100")

    @Test(.timeLimit(.minutes(10))) func whatThePhotoSaysIsKeptAsWritten() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let photo = scratch.path("photo.jpg")
        try Self.photo(photo, Self.fullTags)
        let root = scratch.path("tiles")

        // Location dropped by default.
        #expect(try Self.cut(photo, root: root, id: "plain") == Self.expected)
        let raw = try String(contentsOfFile: "\(root)/plain/pyramid.json", encoding: .utf8)
        #expect(!raw.contains("48.85") && !raw.contains("location"))

        // Kept with --keep-location, in degrees (south negative).
        let located = try #require(try Self.cut(photo, root: root, id: "located", ["--keep-location"]))
        let location = try #require(located.location)
        #expect(abs(location.lat - -48.8584) < 1e-6 && abs(location.lon - 2.2945) < 1e-6, "\(location)")
        var withoutLocation = located
        withoutLocation.location = nil
        #expect(withoutLocation == Self.expected)

        // --title, --description and --album set or override.
        let overridden = try #require(
            try Self.cut(photo, root: root, id: "told", ["--title", "Pont", "--description", "Le soir", "--album", "Paris 2024"]))
        #expect(overridden.title == "Pont" && overridden.description == "Le soir" && overridden.album == "Paris 2024")
        #expect(overridden.creator == "Ada Lovelace" && overridden.dateTaken == Self.expected.dateTaken)

        // tiler info shows it.
        let info = try run(try tilerBinary(), ["info", "\(root)/told"])
        #expect(info.status == 0)
        for line in ["title", "Pont", "album", "Paris 2024", "date taken", "2024-05-01T14:03:22+02:00", "1/250 s, f/8, ISO 100"] {
            #expect(info.stdout.contains(line), "tiler info lacks \(line): \(info.stdout)")
        }
    }

    /// Where XMP says nothing: IPTC's object name, caption, by-line and copyright notice,
    /// else EXIF's ImageDescription, Artist and Copyright; a photo without any metadata
    /// gets no `metadata` at all.
    @Test(.timeLimit(.minutes(10))) func iptcThenExifWhenXMPSaysNothing() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let root = scratch.path("tiles")
        let iptc = scratch.path("iptc.jpg")
        try Self.photo(
            iptc,
            [
                "-IPTC:ObjectName=Brücke", "-IPTC:Caption-Abstract=A caption", "-IPTC:By-line=Grace Hopper",
                "-IPTC:CopyrightNotice=© 2024 Grace", "-EXIF:ImageDescription=EXIF title", "-EXIF:Artist=Not this one",
            ])
        let fromIPTC = try #require(try Self.cut(iptc, root: root, id: "iptc"))
        #expect(fromIPTC.title == "Brücke" && fromIPTC.description == "A caption")
        #expect(fromIPTC.creator == "Grace Hopper" && fromIPTC.copyright == "© 2024 Grace")

        let exif = scratch.path("exif.jpg")
        try Self.photo(
            exif,
            [
                "-EXIF:ImageDescription=Only EXIF", "-EXIF:Artist=Alan Turing", "-EXIF:Copyright=(c) Alan", "-EXIF:Make=FUJIFILM",
                "-EXIF:Model=X-T4",
            ])
        let fromEXIF = try #require(try Self.cut(exif, root: root, id: "exif"))
        #expect(
            fromEXIF
                == PhotoMetadata(title: "Only EXIF", creator: "Alan Turing", copyright: "(c) Alan", camera: "FUJIFILM X-T4"))

        let bare = scratch.path("bare.jpg")
        try vips("black", bare, "300", "200", "--bands", "3")
        #expect(try Self.cut(bare, root: root, id: "bare") == nil)
        #expect(!(try String(contentsOfFile: "\(root)/bare/pyramid.json", encoding: .utf8)).contains("metadata"))
    }

    /// `photo` with an XMP packet of our own put in as JPEG's `APP1` segment (exiftool
    /// would not write a hostile packet).
    static func withXMP(_ jpeg: [UInt8], _ packet: String) -> [UInt8] {
        let payload = Array("http://ns.adobe.com/xap/1.0/\0".utf8) + Array(packet.utf8)
        let length = payload.count + 2
        precondition(length < 65536)
        return [0xFF, 0xD8, 0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload + jpeg.dropFirst(2)
    }

    @Test(.timeLimit(.minutes(10))) func hostileXMPIsRefusedNeverExpanded() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let root = scratch.path("tiles")
        let base = scratch.path("base.jpg")
        try Self.photo(base, ["-EXIF:Artist=Still read"])
        let jpeg = [UInt8](try Data(contentsOf: URL(fileURLWithPath: base)))
        let secret = "SECRET-\(UUID().uuidString)"
        try secret.write(toFile: scratch.path("secret.txt"), atomically: true, encoding: .utf8)

        var entities = #"<!ENTITY lol "lol">"#
        var previous = "lol"
        for i in 1...9 {
            entities += "<!ENTITY lol\(i) \"" + String(repeating: "&\(previous);", count: 10) + "\">"
            previous = "lol\(i)"
        }
        func packet(_ doctype: String, _ title: String) -> String {
            """
            <?xpacket begin="" id="W5M0MpCehiHzreSzNTczkc9d"?>\(doctype)<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF \
            xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="" \
            xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title><rdf:Alt><rdf:li xml:lang="x-default">\(title)</rdf:li>\
            </rdf:Alt></dc:title></rdf:Description></rdf:RDF></x:xmpmeta><?xpacket end="w"?>
            """
        }
        let cases = [
            ("laughs", packet("<!DOCTYPE x:xmpmeta [\(entities)]>", "&\(previous);")),
            ("external", packet("<!DOCTYPE x:xmpmeta [<!ENTITY xxe SYSTEM \"file://\(scratch.path("secret.txt"))\">]>", "&xxe;")),
            ("malformed", packet("", "<unclosed>")),
        ]
        for (id, xmp) in cases {
            let photo = scratch.path("\(id).jpg")
            try Data(Self.withXMP(jpeg, xmp)).write(to: URL(fileURLWithPath: photo))
            let started = Date()
            let metadata = try Self.cut(photo, root: root, id: id)
            #expect(Date().timeIntervalSince(started) < 30)
            #expect(metadata == PhotoMetadata(creator: "Still read"), "\(id): \(String(describing: metadata))")
            let manifest = try String(contentsOfFile: "\(root)/\(id)/pyramid.json", encoding: .utf8)
            #expect(!manifest.contains(secret) && !manifest.contains("lollol"), "\(id)")
            #expect((try FileManager.default.attributesOfItem(atPath: "\(root)/\(id)/pyramid.json")[.size] as? Int ?? 0) < 8192)
        }
        // A well-formed packet in the same place is read (the hostile ones were refused for
        // what they are, not for where they sit).
        let good = scratch.path("good.jpg")
        try Data(Self.withXMP(jpeg, packet("", "Fine"))).write(to: URL(fileURLWithPath: good))
        #expect(try Self.cut(good, root: root, id: "good")?.title == "Fine")
    }

    /// A 10 MB XMP packet (in a PNG's `iTXt` chunk, which has no 64 KiB bound): the cut
    /// ignores it and keeps what else the photo says.
    @Test(.timeLimit(.minutes(10))) func aTenMegabyteXMPPacketIsIgnored() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let base = scratch.path("base.png")
        try vips("black", base, "300", "200", "--bands", "3")
        let big = scratch.path("big.png")
        let script = """
            import struct, sys, zlib
            data = open(sys.argv[1], 'rb').read()
            title = 'x' * (10 << 20)
            xmp = ('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
                   '<rdf:Description rdf:about="" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>' + title +
                   '</dc:title></rdf:Description></rdf:RDF></x:xmpmeta>').encode()
            body = b'iTXt' + b'XML:com.adobe.xmp\\0\\0\\0\\0\\0' + xmp
            chunk = struct.pack('>I', len(body) - 4) + body + struct.pack('>I', zlib.crc32(body) & 0xffffffff)
            open(sys.argv[2], 'wb').write(data[:33] + chunk + data[33:])
            """
        let made = try run("python3", ["-c", script, base, big])
        try #require(made.status == 0, "\(made.stderr)")
        let header = try run("vipsheader", ["-a", big])
        #expect(header.stdout.contains("xmp-data"), "libvips does not read the packet: \(header.stdout)")
        let root = scratch.path("tiles")
        #expect(try Self.cut(big, root: root, id: "big") == nil)
        #expect((try FileManager.default.attributesOfItem(atPath: "\(root)/big/pyramid.json")[.size] as? Int ?? 0) < 8192)
    }

    /// Archives keep the metadata (`tiler info --json`, `tiler unpack`), and the server
    /// shows it in `/images/ID` and `/images` (`title`, else the id; `dateTaken`), for a
    /// folder, an archive and a source served on the fly alike.
    @Test(.timeLimit(.minutes(10))) func archivesAndTheServerCarryIt() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let photo = scratch.path("sources/photo.jpg")
        try FileManager.default.createDirectory(atPath: scratch.path("sources"), withIntermediateDirectories: true)
        try Self.photo(photo, Self.fullTags)
        let root = scratch.path("tiles")
        let tiler = try tilerBinary()
        _ = try Self.cut(photo, root: root, id: "packed", ["--archive", "--album", "Paris"])
        _ = try Self.cut(photo, root: root, id: "folder")
        let bare = scratch.path("bare.png")
        try vips("black", bare, "300", "200")
        _ = try Self.cut(bare, root: root, id: "bare")
        _ = try Self.cut(bare, root: root, id: "zz-10", ["--title", "aardvark 10"])
        _ = try Self.cut(bare, root: root, id: "zz-9", ["--title", "Aardvark 9"])

        var expected = Self.expected
        expected.album = "Paris"
        let info = try run(tiler, ["info", "\(root)/packed.pmtiles", "--json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any])
        let manifest = try JSONSerialization.data(withJSONObject: try #require(object["manifest"]))
        #expect(try JSONDecoder().decode(PyramidManifest.self, from: manifest).metadata == expected)
        let unpacked = scratch.path("unpacked")
        try FileManager.default.createDirectory(atPath: unpacked, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: "\(root)/packed.pmtiles", toPath: "\(unpacked)/packed.pmtiles")
        #expect(try run(tiler, ["unpack", "\(unpacked)/packed.pmtiles", "--quiet"]).status == 0)
        let back = try JSONDecoder().decode(
            PyramidManifest.self, from: Data(contentsOf: URL(fileURLWithPath: "\(unpacked)/packed/pyramid.json")))
        #expect(back.metadata == expected)

        let server = try ServeProcess([root, "--port", "0", "--threads", "1", "--sources", scratch.path("sources")])
        defer { server.stop() }
        for (id, wanted) in [("packed", expected), ("folder", Self.expected), ("photo", Self.expected)] {
            let answer = try fetch(server.port, "/images/\(id)")
            #expect(answer.status == 200, "\(id)")
            let metadata = try #require(answer.json["metadata"] as? [String: Any], "\(id): \(answer.text)")
            let decoded = try JSONDecoder().decode(PhotoMetadata.self, from: JSONSerialization.data(withJSONObject: metadata))
            #expect(decoded == wanted, "\(id)")
            #expect(answer.json["title"] as? String == "Bridge at dusk")
        }
        let bareAnswer = try fetch(server.port, "/images/bare")
        #expect(bareAnswer.json["metadata"] == nil && bareAnswer.json["title"] as? String == "bare")
        let list = try fetch(server.port, "/images?limit=100")
        let entries = try #require(list.json["images"] as? [[String: Any]])
        let byID = Dictionary(uniqueKeysWithValues: entries.map { ($0["id"] as? String ?? "", $0) })
        for id in ["packed", "folder", "photo"] {
            #expect(byID[id]?["title"] as? String == "Bridge at dusk", "\(id)")
            #expect(byID[id]?["dateTaken"] as? String == "2024-05-01T14:03:22+02:00", "\(id)")
        }
        #expect(byID["bare"]?["title"] as? String == "bare" && byID["bare"]?["dateTaken"] == nil)
        // In natural order of the titles (numbers by value, without case), else the ids;
        // equal titles by id.
        #expect(entries.map { $0["id"] as? String } == ["zz-9", "zz-10", "bare", "folder", "packed", "photo"])
    }

    /// A private image's metadata shows nowhere without a token: `/images/ID` is 401 and
    /// `/images` leaves the image out; with a token both show it.
    @Test(.timeLimit(.minutes(10))) func aPrivateImagesMetadataNeedsAToken() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let keys = try TestKeys(in: scratch.path)
        let photo = scratch.path("photo.jpg")
        try Self.photo(photo, Self.fullTags)
        let root = scratch.path("tiles")
        _ = try Self.cut(photo, root: root, id: "secret-photo", ["--album", "Hidden album"])
        let policy = scratch.path("policy.json")
        try #"{"keys": [{"kid": "site", "alg": "HS256", "secretFile": "site.key"}], "rules": [{"images": "*", "access": "token"}]}"#
            .write(toFile: policy, atomically: true, encoding: .utf8)
        let server = try ServeProcess([root, "--port", "0", "--threads", "1", "--access", policy])
        defer { server.stop() }
        let token = try run(try tilerBinary(), ["token", "--key", keys.secret, "--kid", "site", "--images", "secret-*"])
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        for path in ["/images/secret-photo", "/images"] {
            let anonymous = try fetch(server.port, path)
            for leak in ["Bridge at dusk", "Ada Lovelace", "Hidden album", "2024-05-01"] {
                #expect(!anonymous.text.contains(leak), "\(path) shows \(leak) without a token")
            }
            let opened = try fetch(server.port, path, headers: ["Authorization: Bearer \(token)"])
            #expect(opened.status == 200 && opened.text.contains("Bridge at dusk"), "\(path): \(opened.text)")
        }
        #expect(try fetch(server.port, "/images/secret-photo").status == 401)
    }

    @Test func badOverridesAreRefused() throws {
        let tiler = try tilerBinary()
        for (arguments, message) in [
            (["a.jpg", "b.jpg", "--title", "One"], "--title needs exactly one input"),
            (["a.jpg", "--title", String(repeating: "x", count: PhotoMetadata.maximumFieldBytes + 1)], "--title is"),
            (["a.jpg", "--album", "  "], "--album is empty"),
        ] {
            let refused = try run(tiler, ["cut"] + arguments)
            #expect(refused.status != 0 && refused.stderr.contains(message), "\(arguments): \(refused.stderr)")
        }
    }
}
