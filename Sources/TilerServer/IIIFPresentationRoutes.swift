import Synchronization
import TilerCore
import TilerHTTP

/// IIIF Presentation API 3.0, for Mirador, Universal Viewer and other clients that open
/// manifests rather than image services:
/// - `/iiif/3/ID/manifest.json`: a Manifest with one Canvas of the image's size, painted
///   by one Annotation whose body is the image with its ImageService3 (this server's
///   `/iiif/3/ID`) and a thumbnail (the pyramid's own);
/// - `/iiif/3/collection.json`: a Collection of every image's manifest, in the listing's
///   order (`/images`);
/// - `/iiif/3/albums/NAME/collection.json`: a Collection of one album's manifests.
///
/// A manifest's label is the photo's title (else the id), with its description as
/// `summary`, its copyright as `requiredStatement` (and `rights` when it is a licence
/// URI), its date as `navDate`, and creator, date, camera, lens, exposure and album as
/// `metadata` pairs.
///
/// Every id is absolute (`PublicAddress.absoluteBase`). With `--base-url` the documents are
/// the same for every client and cached (manifests per pyramid generation, the
/// collection per listing); without it they are built per request, say `Vary`, and are
/// never cached, so no client's Host or forwarded host reaches another.
///
/// Must come before `iiifRoutes`, which would read `/iiif/3/collection.json` as the IIIF
/// base URL of an image named `collection.json`.
func iiifPresentationRoutes(store: TileStore, address: PublicAddress) -> [Route] {
    let collectionCache = CollectionCache()
    return [
        Route("iiif-presentation", firstSegments: ["iiif"]) { request throws(HTTPError) in
            let s = request.segments
            guard s.count >= 3, s[0] == "iiif", s[1] == "3" else { return nil }
            let (base, hostVary) = address.absoluteBase(for: request.head)
            var vary = hostVary
            var cacheControl = vary == nil ? store.configuration.cacheControl : "no-cache"
            /// A response that depends on who asks: private, and saying so in `Vary`.
            func callerDependent() {
                cacheControl = TileStore.privateCacheControl
                vary = [vary, TileStore.privateVary].compactMap { $0 }.joined(separator: ", ")
            }
            let response: PreparedResponse
            if s.count == 3, s[2] == "collection.json" {
                // From memory, like `/images`. (A pyramid named `collection.json` loses only its
                // IIIF base URL's redirect; its info.json and images are unaffected.) Under
                // `--access`, only what the caller may see; the cache is keyed by that list.
                var pyramids = store.pyramids
                if let access = store.access {
                    let visible = access.visibility(for: request.head)
                    pyramids = pyramids.filter { visible($0.id.rawValue) }
                    callerDependent()
                }
                if vary == nil {
                    response = collectionCache.response(for: pyramids) {
                        prepared(collectionDocument(pyramids, base: base), cacheControl: cacheControl)
                    }
                } else {
                    response = prepared(collectionDocument(pyramids, base: base), cacheControl: cacheControl)
                }
            } else if s.count == 5, s[2] == "albums", s[4] == "collection.json" {
                // An album's collection: its manifests the caller may see, in name order. An
                // album of which the caller may see nothing is answered as an unknown one.
                try store.awaitCatalog(for: request)
                guard var pyramids = store.listings.album(named: s[3])?.images else { throw unknownAlbum(s[3]) }
                if let access = store.access {
                    let visible = access.visibility(for: request.head)
                    pyramids = pyramids.filter { visible($0.id.rawValue) }
                    callerDependent()
                }
                guard !pyramids.isEmpty else { throw unknownAlbum(s[3]) }
                // Built per request: an album is a part of the listing, and its document
                // costs what the filter above does.
                response = prepared(albumDocument(s[3], pyramids, base: base), cacheControl: cacheControl)
            } else if s.count == 4, s[3] == "manifest.json" {
                let pyramid = try store.pyramid(named: s[2], for: request)
                let limits = store.configuration.iiifLimits
                if vary == nil {
                    // Kept per pyramid generation, private ones apart with their own headers.
                    response = store.document("presentation", of: pyramid, contentType: presentationMediaType) {
                        manifestDocument($0, base: base, limits: limits)
                    }
                } else {
                    if store.isPrivate(pyramid) { callerDependent() }
                    response = prepared(manifestDocument(pyramid, base: base, limits: limits), cacheControl: cacheControl)
                }
            } else {
                return nil
            }
            return vary.map { .withHeaders([("Vary", $0)], .prepared(response)) } ?? .prepared(response)
        }
    ]
}

/// `Content-Type` of Presentation documents: JSON-LD with the version 3 context.
let presentationMediaType = #"application/ld+json;profile="http://iiif.io/api/presentation/3/context.json""#
private let presentationContext = "http://iiif.io/api/presentation/3/context.json"

/// A per-request document with an ETag of its bytes, so a client revalidates with a 304.
private func prepared(_ body: [UInt8], cacheControl: String) -> PreparedResponse {
    PreparedResponse(
        body: body, contentType: presentationMediaType, etag: "\"p-\(String(fnv1a(body), radix: 16))\"",
        lastModified: nil, cacheControl: cacheControl.isEmpty ? nil : cacheControl)
}

/// FNV-1a of the bytes: the ETag changes exactly when the document does.
func fnv1a(_ bytes: [UInt8]) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for b in bytes { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 }
    return hash
}

/// `BASE/iiif/3/ID`: the image service, and the start of every id of its manifest.
private func serviceID(_ p: Pyramid, _ base: String) -> String { "\(base)\(IIIFVersion.v3.pathPrefix)\(p.id)" }

/// `{"none": [text]}`: a language map for text that is in no language (ids, sizes).
private func languageMap(_ json: inout JSONWriter, _ key: String, _ text: String, language: String = "none") {
    json.key(key)
    json.beginObject()
    json.key(language)
    json.beginArray()
    json.value(text)
    json.endArray()
    json.endObject()
}

/// The pyramid's own thumbnail as a Presentation `thumbnail` array.
private func writeThumbnail(_ p: Pyramid, _ base: String, _ json: inout JSONWriter) {
    let ext = thumbnailExtension(p)
    json.key("thumbnail")
    json.beginArray()
    json.beginObject()
    json.field("id", "\(base)/images/\(p.id)/thumbnail.\(ext)")
    json.field("type", "Image")
    json.field("format", TileFormat(fileExtension: ext)?.mimeType ?? p.manifest.format.mimeType)
    json.field("width", p.manifest.thumbnail.width)
    json.field("height", p.manifest.thumbnail.height)
    json.endObject()
    json.endArray()
}

/// Whether `text` is a licence URI, the only form Presentation 3's `rights` takes: a
/// Creative Commons or RightsStatements.org URI.
func isLicenceURI(_ text: String) -> Bool {
    let hosts = ["creativecommons.org/", "rightsstatements.org/"]
    return ["http://", "https://"].contains { scheme in
        hosts.contains { host in text.hasPrefix(scheme + host) && text.count > (scheme + host).count }
    } && !text.contains(where: { $0 == " " || $0 == "\"" || $0 == "<" || $0 == ">" || $0.isNewline })
}

/// The Manifest of one pyramid.
func manifestDocument(_ p: Pyramid, base: String, limits: IIIFLimits) -> [UInt8] {
    let service = serviceID(p, base)
    let m = p.manifest
    let format = IIIFFormat(m.format)
    // The painted image: the whole picture at the largest size this server draws, which
    // the limits may make smaller than the canvas.
    let request = IIIFImageRequest(
        identifier: p.id.rawValue, region: .full, size: IIIFSize(.max),
        rotation: IIIFRotation(), quality: .default, format: format)
    let plan = try? IIIFImagePlan(request, geometry: p.geometry, limits: limits)
    let canvas = "\(service)/canvas/1"
    var json = JSONWriter(capacity: 2048)
    json.beginObject()
    json.field("@context", presentationContext)
    json.field("id", "\(service)/manifest.json")
    json.field("type", "Manifest")
    let photo = m.metadata ?? PhotoMetadata()
    languageMap(&json, "label", photo.title ?? p.id.rawValue)
    if let description = photo.description { languageMap(&json, "summary", description) }
    json.key("metadata")
    json.beginArray()
    /// One label/value pair; the label in English, the value in no language.
    func pair(_ label: String, _ value: String?) {
        guard let value else { return }
        json.beginObject()
        languageMap(&json, "label", label, language: "en")
        languageMap(&json, "value", value)
        json.endObject()
    }
    pair("Creator", photo.creator)
    pair("Date", photo.dateTaken)
    pair("Camera", photo.camera)
    pair("Lens", photo.lens)
    pair("Exposure", photo.exposure)
    pair("Album", photo.album)
    pair("Size", "\(m.width) × \(m.height) pixels")
    pair("Source", m.source?.file)
    json.endArray()
    if let copyright = photo.copyright {
        let licence = isLicenceURI(copyright)
        json.key("requiredStatement")
        json.beginObject()
        languageMap(&json, "label", licence ? "Rights" : "Attribution", language: "en")
        languageMap(&json, "value", copyright)
        json.endObject()
        if licence { json.field("rights", copyright) }
    }
    // `navDate`: an xsd:dateTime with a time zone, given in UTC as the specification
    // prefers (`TakenInstant`: a date without an offset is read as UTC).
    if let taken = p.taken { json.field("navDate", taken.utcDateTime) }
    writeThumbnail(p, base, &json)
    json.key("items")
    json.beginArray()
    json.beginObject()
    json.field("id", canvas)
    json.field("type", "Canvas")
    languageMap(&json, "label", p.id.rawValue)
    json.field("width", m.width)
    json.field("height", m.height)
    json.key("items")
    json.beginArray()
    json.beginObject()
    json.field("id", "\(service)/page/1")
    json.field("type", "AnnotationPage")
    json.key("items")
    json.beginArray()
    json.beginObject()
    json.field("id", "\(service)/annotation/1")
    json.field("type", "Annotation")
    json.field("motivation", "painting")
    json.key("body")
    json.beginObject()
    json.field("id", "\(service)/full/max/0/default.\(format.rawValue)")
    json.field("type", "Image")
    json.field("format", format.mimeType)
    json.field("width", plan?.width ?? m.width)
    json.field("height", plan?.height ?? m.height)
    json.key("service")
    json.beginArray()
    json.beginObject()
    json.field("id", service)
    json.field("type", "ImageService3")
    json.field("profile", "level2")
    json.endObject()
    json.endArray()
    json.endObject()
    json.field("target", canvas)
    json.endObject()
    json.endArray()
    json.endObject()
    json.endArray()
    json.endObject()
    json.endArray()
    json.endObject()
    return json.bytes
}

/// The Collection of every pyramid's manifest, in the order given (the listing's).
func collectionDocument(_ pyramids: [Pyramid], base: String) -> [UInt8] {
    collection(id: "\(base)\(IIIFVersion.v3.pathPrefix)collection.json", label: ("Images", "en"), pyramids, base: base)
}

/// The Collection of one album's manifests, labelled with its name.
func albumDocument(_ name: String, _ pyramids: [Pyramid], base: String) -> [UInt8] {
    collection(id: base + albumCollectionPath(name), label: (name, "none"), pyramids, base: base)
}

private func collection(id: String, label: (text: String, language: String), _ pyramids: [Pyramid], base: String)
    -> [UInt8]
{
    var json = JSONWriter(capacity: 512 + pyramids.count * 400)
    json.beginObject()
    json.field("@context", presentationContext)
    json.field("id", id)
    json.field("type", "Collection")
    languageMap(&json, "label", label.text, language: label.language)
    json.key("items")
    json.beginArray()
    for p in pyramids {
        json.beginObject()
        json.field("id", "\(serviceID(p, base))/manifest.json")
        json.field("type", "Manifest")
        languageMap(&json, "label", p.manifest.metadata?.title ?? p.id.rawValue)
        writeThumbnail(p, base, &json)
        json.endObject()
    }
    json.endArray()
    json.endObject()
    return json.bytes
}

/// `/iiif/3/albums/NAME/collection.json`, every byte of the name but the unreserved ones
/// (RFC 3986) percent-encoded.
func albumCollectionPath(_ name: String) -> String {
    var path = Array("/iiif/3/albums/".utf8)
    let hex = Array("0123456789ABCDEF".utf8)
    for b in name.utf8 {
        switch b {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            path.append(b)
        default: path += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 15)]]
        }
    }
    path += Array("/collection.json".utf8)
    return String(decoding: path, as: UTF8.self)
}

/// An album no image the caller may see belongs to: 404, the same whether it is unknown or
/// all of its images are private.
private func unknownAlbum(_ name: String) -> HTTPError {
    HTTPError(404, "no album named '\(name.prefix(80))'")
}

/// The collection document for a fixed base URL, kept until the listing changes (a
/// pyramid added, removed or re-cut): a listing of many pyramids is not rebuilt per
/// request.
final class CollectionCache: Sendable {
    private let entry = Mutex<(key: [UInt64], response: PreparedResponse)?>(nil)

    func response(for pyramids: [Pyramid], make: () -> PreparedResponse) -> PreparedResponse {
        let key = pyramids.map(\.generation)
        if let hit = entry.withLock({ $0?.key == key ? $0?.response : nil }) { return hit }
        let made = make()
        entry.withLock { $0 = (key, made) }
        return made
    }
}
