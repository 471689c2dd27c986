import TilerCore
import TilerHTTP
import TilerSystem

/// `/healthz` (liveness) and `/readyz` (readiness). `/healthz`: 200 with `{"status": "ok"}` while the loops answer. With an `s3://` root
/// it also says whether object storage answers: `"storage": "ok"`, or
/// `"storage": "unavailable"` with `"storageDownSeconds"` and `"storageError"` (still
/// 200: the server serves what it has cached, and recovers by itself when storage does).
/// While `tiler serve` still reads ROOT at start-up it says `"catalog": "loading"` (and,
/// for a bucket, `"storage"`), still 200: the process is alive and answers.
func healthRoutes(store: TileStore) -> [Route] {
    let body = Array(#"{"status":"ok"}"#.utf8)
    let bucketBody = Array(#"{"status":"ok","storage":"ok"}"#.utf8)
    let readyBody = Array(#"{"status":"ready"}"#.utf8)
    let bucket = store.servesBucket
    return [
        Route("health", firstSegments: ["healthz"]) { request in
            guard request.segments == ["healthz"] else { return nil }
            if store.catalogIsLoading {
                // Alive and answering, still reading ROOT (`tiler serve` listens first).
                var json = JSONWriter(capacity: 128)
                json.beginObject()
                json.field("status", "ok")
                json.field("catalog", "loading")
                if bucket { json.field("storage", store.health.outage == nil ? "ok" : "unavailable") }
                json.endObject()
                return .json(json.bytes, cacheControl: "no-store")
            }
            guard bucket else { return .json(body, cacheControl: "no-store") }
            guard let outage = store.health.outage else { return .json(bucketBody, cacheControl: "no-store") }
            var json = JSONWriter(capacity: 256)
            json.beginObject()
            json.field("status", "ok")
            json.field("storage", "unavailable")
            json.field("storageDownSeconds", Int(outage.seconds.rounded()))
            json.field("storageError", String(outage.error.prefix(300)))
            json.endObject()
            return .json(json.bytes, cacheControl: "no-store")
        },
        // Readiness, apart from liveness: a load balancer sends traffic only while this is
        // 200 (the first scan of ROOT done and, for a bucket, storage answering).
        Route("ready", firstSegments: ["readyz"]) { request in
            guard request.segments == ["readyz"] else { return nil }
            guard let reason = store.readiness else { return .json(readyBody, cacheControl: "no-store") }
            var json = JSONWriter(capacity: 256)
            json.beginObject()
            json.field("status", "not ready")
            json.field("reason", reason)
            json.endObject()
            return .withHeaders([("Retry-After", "1")], .json(json.bytes, status: 503, cacheControl: "no-store"))
        },
    ]
}

/// The image API: `/images` (`?sort=name|date|-date`, `?album=NAME`), `/albums`, `/images/ID`, `/images/ID/tiles/L/R/C.EXT`,
/// `/images/ID/thumbnail.EXT` and `/images/ID/visible`. Every URL in their documents
/// starts with `address.linkPrefix` (the base URL, or nothing for root-relative paths),
/// which is the same for every request, so the documents are cached as they are.
func imageRoutes(store: TileStore, address: PublicAddress) -> [Route] {
    let links = Links(prefix: address.linkPrefix)
    return [
        Route("images", firstSegments: ["images"]) { request throws(HTTPError) in
            let s = request.segments
            guard s.first == "images" else { return nil }
            switch s.count {
            case 1: return try listImages(request, store, links)
            case 2: return try manifest(request, s[1], store, links)
            case 3 where s[2] == "visible": return try visible(request, s[1], store, links)
            case 3 where s[2].hasPrefix("thumbnail."): return try thumbnail(request, s[1], s[2], store)
            case 6 where s[2] == "tiles": return try tile(request, s, store)
            default: return nil
            }
        },
        Route("albums", firstSegments: ["albums"]) { request throws(HTTPError) in
            guard request.segments == ["albums"] else { return nil }
            return try listAlbums(request, store, links)
        },
    ]
}

/// A strictly decimal non-negative integer: digits only, no sign, no leading zero.
/// Returns nil for malformed text and `Int.max` for numbers too large to be a tile.
func parseIndex(_ text: Substring) -> Int? { parseIndex(utf8: text.utf8) }

/// `parseIndex` over bytes.
func parseIndex(utf8 text: some Collection<UInt8>) -> Int? {
    // One pass over the bytes: three numbers of every tile request go through here.
    var value = 0
    var count = 0
    var leadingZero = false
    for b in text {
        guard b >= 0x30 && b <= 0x39 else { return nil }
        if count == 0 { leadingZero = b == 0x30 }
        if count < 15 { value = value &* 10 &+ Int(b &- 0x30) }
        count += 1
    }
    if count == 0 || (count > 1 && leadingZero) { return nil }
    return count > 15 ? Int.max : value
}

/// The answer to the request a tile server gets most, a plain tile path
/// `/images/ID/tiles/L/R/C.EXT` of a pyramid the catalog knows, read straight from the
/// target's bytes: no `Request`, no segment strings but the id, no route tried. The same
/// tile response the `images` route gives (`TileStore.tileResponse`), errors from that
/// call included (a tile outside the pyramid, a damaged file: the route would make the
/// same call). Anything else is nil, and the routes answer it with their checks and
/// messages: a query, a `%`, `\`, `.` or `..` in the path, a malformed number, an id the
/// catalog does not hold, another extension, a number past `Int32`.
///
/// It saves about a third of a tile request's instructions in user space
/// (`scripts/bench-instructions`); `RouterTests` checks that it answers exactly as the
/// routes do.
func plainTileResponse(to head: HTTPRequestHead, from store: TileStore, recent: RecentPyramid) -> HTTPResponse? {
    head.target.withUnsafeBufferPointer { whole -> HTTPResponse? in
        let prefix = staticBytes("/images/"), tiles = staticBytes("tiles")
        // "/images/" is eight bytes: one word compared.
        guard whole.count > prefix.count,
            UnsafeRawPointer(whole.baseAddress!).loadUnaligned(as: UInt64.self)
                == UnsafeRawPointer(prefix.baseAddress!).loadUnaligned(as: UInt64.self)
        else {
            return nil
        }
        // Under `--access`, a share link's tile (`…/0/0/0.jpg?token=JWT`, what the viewer
        // asks for) is plain too: the path ends at a query that is one token and nothing
        // else (`AccessControl.plainQueryToken`), looked at only when the scan below meets its `?`.
        let tokenQueries = store.access != nil
        // After /images/: ID, tiles, LEVEL, ROW and COLUMN.EXT, split at four slashes; any
        // byte that needs the routes' decoding or checks sends the request to them.
        return withUnsafeTemporaryAllocation(of: Int.self, capacity: 6) { cut -> HTTPResponse? in
            cut[0] = prefix.count - 1
            var found = 0
            var end = whole.count  // the path's: the target's, or where a token query starts
            var queryToken: AccessControl.ShareToken?  // that query's token
            // Eight bytes at a time: the refused bytes, then each slash in order.
            var i = prefix.count
            let base = UnsafeRawPointer(whole.baseAddress!)
            while end - i >= 8 {
                let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                let refused =
                    bytes(of: word, equalTo: UInt8(ascii: "%")) | bytes(of: word, equalTo: UInt8(ascii: "?"))
                    | bytes(of: word, equalTo: UInt8(ascii: "#")) | bytes(of: word, equalTo: UInt8(ascii: "\\"))
                if refused != 0 {
                    // The bytes before the first refused one go to the loop below.
                    let q = i + refused.trailingZeroBitCount / 8
                    guard tokenQueries, let token = AccessControl.plainQueryToken(whole, query: q, memo: head.credentialMemo)
                    else { return nil }
                    (end, queryToken) = (q, token)
                    break
                }
                var slashes = bytes(of: word, equalTo: UInt8(ascii: "/"))
                while slashes != 0 {
                    guard found < 4 else { return nil }
                    found += 1
                    cut[found] = i + slashes.trailingZeroBitCount / 8
                    slashes &= slashes &- 1
                }
                i += 8
            }
            bytes: for i in i..<end {
                switch whole[i] {
                case UInt8(ascii: "/"):
                    guard found < 4 else { return nil }
                    found += 1
                    cut[found] = i
                case UInt8(ascii: "?"):
                    guard tokenQueries, let token = AccessControl.plainQueryToken(whole, query: i, memo: head.credentialMemo)
                    else { return nil }
                    (end, queryToken) = (i, token)
                    break bytes
                case UInt8(ascii: "%"), UInt8(ascii: "#"), UInt8(ascii: "\\"): return nil
                default: continue
                }
            }
            let t = UnsafeBufferPointer(rebasing: whole[..<end])
            guard found == 4 else { return nil }
            cut[5] = t.count
            /// Segment k, between two cuts; nil when empty.
            @inline(__always) func segment(_ k: Int) -> UnsafeBufferPointer<UInt8>? {
                cut[k + 1] - cut[k] > 1 ? UnsafeBufferPointer(rebasing: t[(cut[k] + 1)..<cut[k + 1]]) : nil
            }
            guard let id = segment(0), !id.allSatisfy({ $0 == UInt8(ascii: ".") }),
                let tilesSegment = segment(1), same(tilesSegment, tiles),
                let levelText = segment(2), let rowText = segment(3), let last = segment(4),
                let dot = last.lastIndex(of: UInt8(ascii: ".")),
                let level = parseIndex(utf8: levelText), let row = parseIndex(utf8: rowText),
                let column = parseIndex(utf8: last[..<dot]),
                level <= Int(Int32.max), row <= Int(Int32.max), column <= Int(Int32.max),
                let pyramid = recent.pyramid(id, in: store.catalog),
                TileFormat(fileExtensionBytes: UnsafeBufferPointer(rebasing: last[(dot + 1)...])) == pyramid.manifest.format
            else { return nil }
            do throws(HTTPError) {
                // A private pyramid's tile only with a token that opens it (a 401 or 403
                // here is the one the routes would give: the check comes first there too).
                // A share link's token is handed on, not sought again.
                let isPrivate = try store.access?.authorize(pyramid, head, queryToken: queryToken) ?? false
                return try store.tileResponse(
                    TileCoordinate(level: level, row: row, column: column), of: pyramid, isPrivate: isPrivate)
            } catch {
                return .error(error)
            }
        }
    }
}

/// The bytes of `word` equal to `byte`: the high bit of each set, every other bit clear.
/// Exact for every byte (the "has zero byte" test with no carry between bytes).
@inline(__always) private func bytes(of word: UInt64, equalTo byte: UInt8) -> UInt64 {
    let low7: UInt64 = 0x7F7F_7F7F_7F7F_7F7F
    let x = word ^ (0x0101_0101_0101_0101 &* UInt64(byte))
    return ~(((x & low7) &+ low7) | x | low7)
}

/// Whether `a` and `b` hold the same bytes (`elementsEqual`, without its iterators).
@inline(__always) private func same(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
    guard a.count == b.count else { return false }
    for i in 0..<a.count where a[i] != b[i] { return false }
    return true
}

/// A static string's UTF-8 bytes, to compare request bytes with.
private func staticBytes(_ s: StaticString) -> UnsafeBufferPointer<UInt8> {
    UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount)
}

private func tile(_ request: Request, _ s: [String], _ store: TileStore) throws(HTTPError) -> HTTPResponse {
    // ["images", ID, "tiles", LEVEL, ROW, "COLUMN.EXT"]
    let last = Substring(s[5])
    // By Character, as always: plain tile paths (ASCII) are answered before the routes, by
    // `plainTileResponse`, and here a dot joined to a combining mark is not a dot.
    guard let dot = last.lastIndex(of: ".") else { throw HTTPError(404, "a tile path ends in COLUMN.EXT") }
    let columnText = last[..<dot], ext = last[last.index(after: dot)...]
    guard let level = parseIndex(Substring(s[3])), let row = parseIndex(Substring(s[4])),
        let column = parseIndex(columnText)
    else {
        throw HTTPError(400, "level, row and column must be non-negative integers")
    }
    let pyramid = try store.pyramid(named: s[1], for: request)
    guard TileFormat(fileExtension: ext) == pyramid.manifest.format else {
        throw HTTPError(404, "image '\(pyramid.id)' has .\(pyramid.manifest.format.fileExtension) tiles, not .\(ext.prefix(16))")
    }
    guard level <= Int(Int32.max), row <= Int(Int32.max), column <= Int(Int32.max) else {
        throw HTTPError(404, "no tile \(s[3].prefix(20))/\(s[4].prefix(20))/\(columnText.prefix(20)) in image '\(pyramid.id)'")
    }
    return try store.tileResponse(TileCoordinate(level: level, row: row, column: column), of: pyramid)
}

private func thumbnail(_ request: Request, _ name: String, _ fileName: String, _ store: TileStore) throws(HTTPError) -> HTTPResponse {
    let pyramid = try store.pyramid(named: name, for: request)
    guard let file = pyramid.thumbnailFile else { throw HTTPError(404, "image '\(pyramid.id)' has no thumbnail") }
    let storedExt = file.split(separator: ".").last.map(String.init) ?? ""
    let askedExt = String(fileName.dropFirst("thumbnail.".count))
    guard let format = TileFormat(fileExtension: storedExt), TileFormat(fileExtension: askedExt) == format else {
        throw HTTPError(404, "image '\(pyramid.id)' has no thumbnail '\(fileName.prefix(40))' (it is '\(file)')")
    }
    return try store.thumbnailResponse(of: pyramid, contentType: format.mimeType)
}

private func manifest(_ request: Request, _ name: String, _ store: TileStore, _ links: Links) throws(HTTPError) -> HTTPResponse {
    let pyramid = try store.pyramid(named: name, for: request)
    return .prepared(store.document("manifest", of: pyramid, contentType: "application/json") { manifestDocument($0, links) })
}

/// The start of every link in the image API's documents: the base URL or nothing.
struct Links: Sendable {
    /// `https://example.org/tiles` or `""`.
    let prefix: String
    /// The same, JSON-escaped, for documents written byte by byte.
    let escapedPrefix: [UInt8]

    init(prefix: String) {
        self.prefix = prefix
        var json = JSONWriter(capacity: prefix.utf8.count + 8)
        json.value(prefix)
        escapedPrefix = Array(json.bytes.dropFirst().dropLast())
    }

    /// `PREFIX/images/ID`.
    func image(_ p: Pyramid) -> String { "\(prefix)/images/\(p.id)" }
    /// `PREFIX/images/ID/thumbnail.EXT`.
    func thumbnail(_ p: Pyramid) -> String { "\(prefix)/images/\(p.id)/thumbnail.\(thumbnailExtension(p))" }
    /// `PREFIX/iiif/3/albums/NAME/collection.json`, the name percent-encoded.
    func albumCollection(_ name: String) -> String { prefix + albumCollectionPath(name) }
}

/// `url`, `thumbnail` and the fields every image listing carries: `title` (the
/// metadata's title, else the id) and `dateTaken` when known.
private func writeSummary(_ p: Pyramid, _ links: Links, _ json: inout JSONWriter) {
    let m = p.manifest
    json.field("id", p.id.rawValue)
    json.field("title", m.metadata?.title ?? p.id.rawValue)
    if let date = m.metadata?.dateTaken { json.field("dateTaken", date) }
    json.field("width", m.width)
    json.field("height", m.height)
    json.field("tileSize", m.tileSize)
    json.field("format", m.format.rawValue)
    json.field("maxLevel", m.maxLevel)
    if m.isPadded {
        json.key("padded")
        json.value(true)
    }
    json.field("url", links.image(p))
    json.key("thumbnail")
    json.beginObject()
    json.field("url", links.thumbnail(p))
    json.field("width", m.thumbnail.width)
    json.field("height", m.thumbnail.height)
    json.endObject()
}

func thumbnailExtension(_ p: Pyramid) -> String {
    if let file = p.thumbnailFile, let ext = file.split(separator: ".").last, TileFormat(fileExtension: String(ext)) != nil {
        return String(ext)
    }
    return p.manifest.format.fileExtension
}

/// The `/images/ID` document: the summary, `levels` and the `tiles` URL template.
func manifestDocument(_ p: Pyramid, _ links: Links) -> [UInt8] {
    var json = JSONWriter(capacity: 1024)
    json.beginObject()
    writeSummary(p, links, &json)
    json.field("tiles", "\(links.image(p))/tiles/{level}/{row}/{column}.\(p.manifest.format.fileExtension)")
    json.key("levels")
    json.beginArray()
    for l in p.geometry.levels {
        json.beginObject()
        json.field("level", l.level)
        json.field("width", l.width)
        json.field("height", l.height)
        json.field("columns", l.columns)
        json.field("rows", l.rows)
        json.endObject()
    }
    json.endArray()
    json.field("formatVersion", p.manifest.formatVersion)
    if let quality = p.manifest.quality { json.field("quality", quality) }
    if let bands = p.manifest.bands { json.field("bands", bands) }
    if let background = p.manifest.background { json.field("background", background) }
    // Provenance, as `pyramid.json` records it.
    if let created = p.manifest.created { json.field("created", created) }
    if let source = p.manifest.source {
        json.key("source")
        json.beginObject()
        json.field("file", source.file)
        json.field("bytes", source.bytes)
        json.endObject()
    }
    if let version = p.manifest.tilerVersion { json.field("tilerVersion", version) }
    if let metadata = p.manifest.metadata { writeMetadata(metadata, &json) }
    json.endObject()
    return json.bytes
}

/// The manifest's `metadata` object, each key only when known.
private func writeMetadata(_ m: PhotoMetadata, _ json: inout JSONWriter) {
    json.key("metadata")
    json.beginObject()
    for (name, value) in [
        ("title", m.title), ("description", m.description), ("creator", m.creator), ("copyright", m.copyright),
        ("dateTaken", m.dateTaken), ("camera", m.camera), ("lens", m.lens), ("exposure", m.exposure),
    ] {
        if let value { json.field(name, value) }
    }
    if let location = m.location {
        json.key("location")
        json.beginObject()
        json.field("lat", location.lat)
        json.field("lon", location.lon)
        json.endObject()
    }
    if let album = m.album { json.field("album", album) }
    json.endObject()
}

private func listImages(_ request: Request, _ store: TileStore, _ links: Links) throws(HTTPError) -> HTTPResponse {
    var offset = 0, limit = 50
    var sort = ListingSort.name
    var albumName: String?
    var sought: PyramidID?
    let maximum = store.configuration.maximumListLimit
    for (name, value) in try request.queryItems() {
        switch name {
        case "offset":
            guard let v = parseIndex(Substring(value)), v < Int(Int32.max) else {
                throw HTTPError(400, "parameter 'offset' must be a non-negative integer")
            }
            offset = v
        case "limit":
            guard let v = parseIndex(Substring(value)), v >= 1, v <= maximum else {
                throw HTTPError(400, "parameter 'limit' must be an integer in 1...\(maximum)")
            }
            limit = v
        case "sort":
            guard let v = ListingSort(parameter: value) else {
                throw HTTPError(400, "parameter 'sort' must be 'name', 'date' or '-date', not '\(value.prefix(40))'")
            }
            sort = v
        case "album":
            guard !value.isEmpty, value.utf8.count <= PhotoMetadata.maximumFieldBytes else {
                throw HTTPError(400, "parameter 'album' must be an album's name (1...\(PhotoMetadata.maximumFieldBytes) bytes)")
            }
            albumName = value
        case "find":
            guard let id = PyramidID(value) else {
                throw HTTPError(
                    400, "parameter 'find' must be an image id (letters, digits, '.', '_', '-'; at most \(PyramidID.maximumLength))")
            }
            sought = id
        default: continue
        }
    }
    // From memory: the catalog's background scan keeps the listing, no request waits.
    // Until its first scan ends the listing would be incomplete: wait for it.
    try store.awaitCatalog(for: request)
    let listings = store.listings
    var all: [Pyramid]
    if let albumName {
        // An album is kept in name order; another order is the snapshot's, filtered.
        all =
            sort == .name
            ? listings.album(named: albumName)?.images ?? []
            : listings.ordered(sort).filter { $0.manifest.metadata?.album == albumName }
    } else {
        all = listings.ordered(sort)
    }
    // Under `--access`, only what the caller may see, counted in `total` too.
    if let access = store.access {
        let visible = access.visibility(for: request.head)
        all = all.filter { visible($0.id.rawValue) }
    }
    if let sought {
        // `find=ID`: the page (of `limit`) holding ID, wherever it falls in this order;
        // not found (not listed for this caller, or no such image): 404.
        guard let index = all.firstIndex(where: { $0.id == sought }) else {
            throw HTTPError(404, "image '\(sought)' is not in this listing")
        }
        offset = index / limit * limit
    }
    var json = JSONWriter(capacity: 4096)
    json.beginObject()
    json.key("images")
    json.beginArray()
    if offset < all.count {
        for p in all[offset..<min(all.count, offset + limit)] {
            json.beginObject()
            writeSummary(p, links, &json)
            json.endObject()
        }
    }
    json.endArray()
    json.field("total", all.count)
    json.field("offset", offset)
    json.field("limit", limit)
    json.endObject()
    return listing(json.bytes, store)
}

/// A listing's response: public, or under `--access` private and varying with the
/// caller's credentials (what it lists depends on them).
private func listing(_ body: [UInt8], _ store: TileStore) -> HTTPResponse {
    guard store.access != nil else { return .json(body) }
    return .withHeaders([("Vary", TileStore.privateVary)], .json(body, cacheControl: TileStore.privateCacheControl))
}

/// `GET /albums`: `{"albums": [{"name", "count", "cover": {"id", "thumbnail"}, "collection"}]}`,
/// in natural order of names. Under `--access`, counts and covers are of what the caller
/// may see, and an album of which the caller may see nothing is not listed.
private func listAlbums(_ request: Request, _ store: TileStore, _ links: Links) throws(HTTPError) -> HTTPResponse {
    try store.awaitCatalog(for: request)
    let visible = store.access?.visibility(for: request.head)
    var json = JSONWriter(capacity: 4096)
    json.beginObject()
    json.key("albums")
    json.beginArray()
    for album in store.listings.albums {
        let images = visible.map { v in album.images.filter { v($0.id.rawValue) } } ?? album.images
        guard let cover = images.first else { continue }
        json.beginObject()
        json.field("name", album.name)
        json.field("count", images.count)
        json.key("cover")
        json.beginObject()
        json.field("id", cover.id.rawValue)
        json.field("thumbnail", links.thumbnail(cover))
        json.endObject()
        json.field("collection", links.albumCollection(album.name))
        json.endObject()
    }
    json.endArray()
    json.endObject()
    return listing(json.bytes, store)
}

private func visible(_ request: Request, _ name: String, _ store: TileStore, _ links: Links) throws(HTTPError) -> HTTPResponse {
    let pyramid = try store.pyramid(named: name, for: request)
    let answer: VisibleTilesPlan
    do {
        let query =
            try VisibleTilesQuery.parsingCommonForm(request.rawQuery)
            ?? VisibleTilesQuery(queryItems: try request.queryItems())
        answer = try pyramid.geometry.visibleTilesPlan(for: query, maximumTiles: store.configuration.maximumVisibleTiles)
    } catch let e as VisibleTilesError {
        throw HTTPError(400, e.description)
    } catch let e as HTTPError {
        throw e
    } catch {
        throw HTTPError(400, "\(error)")
    }
    let headers = store.cacheHeaders(generation: store.cacheGeneration(of: pyramid))
    let document = visibleDocument(answer, of: pyramid, linkPrefix: links.escapedPrefix)
    guard let vary = headers.vary else {
        return .json(document, cacheControl: headers.cacheControl?.isEmpty == false ? headers.cacheControl : nil)
    }
    return .withHeaders([("Vary", vary)], .json(document, cacheControl: headers.cacheControl))
}
