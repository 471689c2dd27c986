import TilerCore
import TilerHTTP
import TilerImaging

/// A drawn image (a IIIF region, a DeepZoom level below the pyramid) as a response.
///
/// From the cache when it was drawn before. Otherwise its peak memory is estimated here,
/// on the event loop and before anything is read: more than the whole render budget is a
/// 400 (the request can never be drawn; a smaller size can). Then it is drawn on the
/// blocking pool once the budget admits it (503 with `Retry-After` when it waited
/// `renderWait` seconds for room), and cached like a document of the pyramid until it is
/// re-cut. Requests for the same drawing (same cache key: image generation, privacy and
/// request) that come while it is being drawn wait for it and share its answer. A drawing
/// that fails (a missing or damaged tile) is a 500 with a short message and no caching;
/// the details go to the log, once per failure and pyramid generation.
///
/// `quality` is the JPEG or WebP encoder's, when not the renderer's default.
func drawnResponse(
    _ name: String, of pyramid: Pyramid, store: TileStore, contentType: String, quality: Int? = nil,
    job makeJob: (RegionRenderer) -> RegionRenderer.Job
) throws(HTTPError) -> HTTPResponse {
    let key = CachedItem.document(generation: store.cacheGeneration(of: pyramid), name: name)
    if let hit = store.cache.value(for: key) { return .prepared(hit) }
    var renderer: RegionRenderer
    do {
        renderer = try store.renderer(for: pyramid)
        if let quality { renderer.encoderQuality = quality }
    } catch {
        store.log.error("cannot draw image '\(pyramid.id)': \(error)")
        throw HTTPError(500, "image '\(pyramid.id)' cannot be drawn; the server log has details")
    }
    let job = makeJob(renderer)
    let estimate = renderer.estimatedPeakBytes(job)
    let budget = store.renderBudget
    guard estimate <= budget.capacity else {
        throw HTTPError(
            400,
            "drawing this image needs about \(estimate >> 20) MiB, more than this server allows for "
                + "drawing (\(budget.capacity >> 20) MiB); ask for a smaller size or region")
    }
    @Sendable func draw(_ renderer: RegionRenderer) -> HTTPResponse {
        if let hit = store.cache.value(for: key) { return .prepared(hit) }
        guard budget.admit(estimate) == .admitted else {
            return .withHeaders(
                [("Retry-After", "1")],
                .error(HTTPError(503, "the server is busy drawing other images; try again shortly")))
        }
        let bytes: [UInt8]
        store.drawingCount.add(1, ordering: .relaxed)
        do {
            defer { budget.release(estimate) }
            bytes = try RenderBudget.holding { () throws(RenderError) -> [UInt8] in
                try renderer.render(job, maximumBytes: budget.capacity)
            }
        } catch let RenderError.unavailable(_, timedOut) {
            // Storage is down or slow (already logged by StorageHealth): try again later.
            let error =
                timedOut
                ? HTTPError(504, "object storage did not answer in time to draw this image; retry later")
                : HTTPError(503, "object storage is unavailable; retry later")
            return .withHeaders([("Retry-After", "1")], .error(error))
        } catch {
            store.faults.once("\(pyramid.generation) \(error)", "cannot draw \(name) of image '\(pyramid.id)': \(error)")
            return .error(HTTPError(500, "image '\(pyramid.id)' cannot be drawn; the server log has details"))
        }
        // Large drawings (a big IIIF region) are sent once and not kept, like large files.
        guard bytes.count <= store.configuration.maximumCachedFileBytes else {
            let headers = store.cacheHeaders(generation: key.generation)
            return .prepared(
                PreparedResponse(
                    body: bytes, contentType: contentType, etag: nil,
                    lastModified: pyramid.validators.lastModified,
                    cacheControl: headers.cacheControl, vary: headers.vary))
        }
        return .prepared(store.document(name, of: pyramid, contentType: contentType) { _ in bytes })
    }
    return .blocking(.render) { [renderer] in
        if let hit = store.cache.value(for: key) { return .prepared(hit) }
        // The same drawing asked for meanwhile waits for this one. (The work throws nothing.)
        return (try? store.drawings.run(key) { draw(renderer) }) ?? .error(HTTPError(500, "the drawing failed"))
    }
}
