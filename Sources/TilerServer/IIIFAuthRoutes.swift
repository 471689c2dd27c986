import Foundation
import TilerCore
import TilerHTTP

/// IIIF Authorization Flow API 2.0 for private images (`--access`), as the contract says:
/// - a private image's `info.json` names an `AuthProbeService2` at `/iiif/3/ID/probe`,
///   whose `AuthAccessService2` is the policy's `loginURL` (profile `active`: the
///   operator's login page, which sets the cookie `tiler_token`), or without one profile
///   `external` (the cookie is set elsewhere); under it an `AuthAccessTokenService2` at
///   `/iiif/auth/token` and an `AuthLogoutService2` at `/iiif/auth/logout`;
/// - without a token that opens it, `info.json` is a 401 whose body is that description
///   alone (no size: nothing of a private image reaches a caller without a token);
/// - the probe answers 200 with an `AuthProbeResult2` whose `status` is what the image's
///   requests would get (200, 401, 403, 404) for the access token (`Authorization:
///   Bearer`) or any token the request carries;
/// - the token service is the spec's postMessage page: from a valid `tiler_token` cookie
///   it issues an access token, an opaque random string that only the probe accepts
///   (never a credential for the images), to the page's origin if the policy allows it
///   (`origins`, and the server's own);
/// - logout clears the cookie and forgets the access tokens issued from it.
func iiifAuthRoutes(store: TileStore, address: PublicAddress) -> [Route] {
    guard let access = store.access else { return [] }
    return [
        Route("iiif-auth", firstSegments: ["iiif"]) { request throws(HTTPError) in
            let s = request.segments
            if s.count == 4, s[0] == "iiif", s[1] == "3", s[3] == "probe" {
                return probe(s[2], request, access: access, store: store)
            }
            guard s.count == 3, s[0] == "iiif", s[1] == "auth" else { return nil }
            switch s[2] {
            case "token": return try tokenPage(request, access: access, address: address)
            case "logout": return logout(request, access: access)
            default: return nil
            }
        }
    ]
}

let authContext = "http://iiif.io/api/auth/2/context.json"

/// The services a private image's info.json names, under `base` (the server's public
/// base URL) for image `id`.
func authServices(for id: String, base: String, policy: AccessPolicy) -> [[String: Any]] {
    let encoded = id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? id
    let tokenService: [String: Any] = [
        "id": base + "/iiif/auth/token", "type": "AuthAccessTokenService2",
        "errorHeading": ["en": ["No access"]], "errorNote": ["en": ["You are not signed in, or your sign-in has expired."]],
    ]
    let logout: [String: Any] = [
        "id": base + "/iiif/auth/logout", "type": "AuthLogoutService2", "label": ["en": ["Sign out"]],
    ]
    var accessService: [String: Any] = ["type": "AuthAccessService2", "service": [tokenService, logout]]
    if let login = policy.loginURL {
        accessService["id"] = login
        accessService["profile"] = "active"
        accessService["label"] = ["en": ["Sign in to see this image"]]
        accessService["heading"] = ["en": ["This image is private"]]
        accessService["note"] = ["en": ["Sign in with an account that may see it."]]
        accessService["confirmLabel"] = ["en": ["Sign in"]]
    } else {
        accessService["profile"] = "external"
        accessService["label"] = ["en": ["Access to this image is given elsewhere"]]
    }
    return [
        [
            "id": base + IIIFVersion.v3.pathPrefix + encoded + "/probe", "type": "AuthProbeService2",
            "errorHeading": ["en": ["This image is private"]], "errorNote": ["en": ["You may not see it."]],
            "service": [accessService],
        ]
    ]
}

/// The 401 (or 403) `info.json` of a private image for a caller it is not open to: the
/// services alone, no size.
func privateInfoResponse(_ error: HTTPError, id: String, base: String, policy: AccessPolicy) -> HTTPResponse {
    let encoded = id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? id
    let body: [String: Any] = [
        "@context": [authContext, IIIFVersion.v3.context], "id": base + IIIFVersion.v3.pathPrefix + encoded, "type": "ImageService3",
        "protocol": "http://iiif.io/api/image", "profile": "level2",
        "service": authServices(for: id, base: base, policy: policy),
    ]
    let bytes = (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
    let response = HTTPResponse.bytes(
        status: error.status, contentType: IIIFVersion.v3.jsonLDMediaType, body: Array(bytes), cacheControl: "no-store")
    return error.status == 401
        ? .withHeaders([("WWW-Authenticate", error.challenge ?? "Bearer"), ("Vary", TileStore.privateVary)], response)
        : .withHeaders([("Vary", TileStore.privateVary)], response)
}

/// `info.json`'s body with the auth services added (and their context first).
func infoWithAuthServices(_ info: Data, id: String, base: String, policy: AccessPolicy) -> Data {
    guard var object = (try? JSONSerialization.jsonObject(with: info)) as? [String: Any] else { return info }
    object["@context"] = [authContext, IIIFVersion.v3.context]
    object["service"] = authServices(for: id, base: base, policy: policy)
    return (try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]))
        ?? info
}

private func probe(_ id: String, _ request: Request, access: AccessControl, store: TileStore) -> HTTPResponse {
    var status = 200
    var heading: String?
    do throws(HTTPError) {
        // An access token from the token service opens what its cookie opened.
        if access.policy.isPrivate(id), let grant = access.accessTokenGrant(request.head), grant.opens(id) {
            status = try store.pyramidIfPresent(named: id, for: request, checkingAccess: false) == nil ? 404 : 200
        } else {
            status = try store.pyramidIfPresent(named: id, for: request) == nil ? 404 : 200
        }
    } catch {
        if error == TileStore.lookupMustBlock { return .error(error) }
        status = error.status
        heading = status == 401 ? "This image is private" : status == 403 ? "You may not see this image" : nil
    }
    var body: [String: Any] = ["@context": authContext, "type": "AuthProbeResult2", "status": status]
    if let heading {
        body["heading"] = ["en": [heading]]
        body["note"] = ["en": [status == 401 ? "Sign in to see it." : "Your account does not open it."]]
    }
    let bytes = (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])) ?? Data()
    return .withHeaders(
        [("Vary", TileStore.privateVary)],
        .bytes(status: 200, contentType: "application/json", body: Array(bytes), cacheControl: "no-store"))
}

/// The spec's postMessage page (§4.3): always 200, its script posting an access token or
/// an error to `origin`.
private func tokenPage(_ request: Request, access: AccessControl, address: PublicAddress) throws(HTTPError) -> HTTPResponse {
    var messageId: String?
    var origin: String?
    for item in try request.queryItems() {
        if item.name == "messageId", messageId == nil { messageId = item.value }
        if item.name == "origin", origin == nil { origin = item.value }
    }
    // Both end up inside a script: only what they may hold gets in, and nothing to escape.
    guard let messageId, !messageId.isEmpty, messageId.count <= 128,
        messageId.unicodeScalars.allSatisfy({
            $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-_.:".unicodeScalars.contains($0))
        })
    else { throw HTTPError(400, "the token service needs a messageId of at most 128 letters, digits, '-', '_', '.' or ':'") }
    guard let origin, let parsed = WebOrigin(origin) else {
        throw HTTPError(400, "the token service needs the origin of the page asking (scheme://host[:port])")
    }
    let ownOrigin = WebOrigin(address.absoluteBase(for: request.head).url)
    var message: [String: Any] = ["@context": authContext, "messageId": messageId]
    if parsed != ownOrigin, !access.policy.origins.contains(parsed.text) {
        message["type"] = "AuthAccessTokenError2"
        message["profile"] = "invalidOrigin"
        message["heading"] = ["en": ["This page may not ask for access"]]
    } else {
        switch access.issueAccessToken(request.head) {
        case let .issued(token, expiresIn):
            message["type"] = "AuthAccessToken2"
            message["accessToken"] = token
            message["expiresIn"] = expiresIn
        case let .refused(problem):
            message["type"] = "AuthAccessTokenError2"
            message["profile"] = problem
            message["heading"] = ["en": [problem == "missingAspect" ? "You are not signed in" : "Your sign-in is not valid"]]
        }
    }
    let json = (try? JSONSerialization.data(withJSONObject: message, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
    // The JSON holds the token, ids and texts of our own, and messageId/origin checked
    // above: no `<` can close the script early.
    let page = """
        <!doctype html>
        <html><head><meta charset="utf-8"><title>tiler</title></head><body>
        <script>window.parent.postMessage(\(String(decoding: json, as: UTF8.self)), \("\"" + parsed.text + "\""));</script>
        </body></html>

        """
    return .withHeaders(
        [("Vary", "Cookie")], .bytes(status: 200, contentType: "text/html; charset=utf-8", body: Array(page.utf8), cacheControl: "no-store")
    )
}

private func logout(_ request: Request, access: AccessControl) -> HTTPResponse {
    access.revokeAccessTokens(issuedFrom: request.head.cookieToken)
    let page = """
        <!doctype html>
        <html><head><meta charset="utf-8"><title>Signed out · tiler</title></head><body>
        <p>You are signed out: private images are closed to this browser again.</p>
        <script>window.close();</script>
        </body></html>

        """
    return .withHeaders(
        [("Set-Cookie", "tiler_token=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax")],
        .bytes(status: 200, contentType: "text/html; charset=utf-8", body: Array(page.utf8), cacheControl: "no-store"))
}

/// A web origin, `scheme://host[:port]` (http or https), as postMessage takes it.
struct WebOrigin: Equatable {
    let text: String

    init?(_ value: String) {
        guard value.count <= 256, let url = URL(string: value), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = url.host, !host.isEmpty,
            host.unicodeScalars.allSatisfy({
                $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-.[]:".unicodeScalars.contains($0))
            })
        else { return nil }
        let defaultPort = scheme == "http" ? 80 : 443
        let port = url.port.map { $0 == defaultPort ? "" : ":\($0)" } ?? ""
        let shownHost = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        text = "\(scheme)://\(shownHost.lowercased())\(port)"
    }
}
