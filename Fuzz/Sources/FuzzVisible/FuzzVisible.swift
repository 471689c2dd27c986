import TilerCore

/// Input layout: 9 bytes (width, height, tile size, a size shift, the tile limit), then a query
/// string `name=value&...` split like the server does (no percent-decoding here: the
/// values reach `VisibleTilesQuery(queryItems:)` as the server would pass them).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size >= 9, size <= 2048 else { return 0 }
    let b = UnsafeBufferPointer(start: data, count: size)
    let shift = Int(b[7] % 24)
    let width = (1 + (Int(b[0]) | Int(b[1]) << 8 | Int(b[2]) << 16)) << shift
    let height = (1 + (Int(b[3]) | Int(b[4]) << 8)) << shift
    let sizes = PyramidGeometry.tileSizeRange
    let tileSize = sizes.lowerBound + (Int(b[5]) | Int(b[6]) << 8) % sizes.count
    let maximumTiles = 1 + Int(b[8]) * 32
    guard let geometry = try? PyramidGeometry(width: width, height: height, tileSize: tileSize) else { return 0 }

    let query = String(decoding: b[9...], as: UTF8.self)
    var items: [(name: String, value: String)] = []
    for part in query.split(separator: "&", omittingEmptySubsequences: true) {
        if let eq = part.firstIndex(of: "=") {
            items.append((String(part[..<eq]), String(part[part.index(after: eq)...])))
        } else {
            items.append((String(part), ""))
        }
    }
    // The byte-level reader the server tries first must agree with the item parser
    // whenever it answers: the same query, or the same error.
    let fast: Result<VisibleTilesQuery?, VisibleTilesError> = Result { () throws(VisibleTilesError) in
        try VisibleTilesQuery.parsingCommonForm(ArraySlice(b[9...]))
    }
    let q: VisibleTilesQuery
    do {
        q = try VisibleTilesQuery(queryItems: items)
    } catch {
        _ = error.description
        if case let .success(answer) = fast { precondition(answer == nil, "common form read a query the item parser refused") }
        if case let .failure(e) = fast { precondition(e == error, "common form threw \(e), item parser \(error)") }
        return 0
    }
    switch fast {
    case .success(let answer): precondition(answer == nil || answer == q, "common form read another query")
    case .failure(let e): preconditionFailure("common form threw \(e) for a query the item parser read")
    }
    precondition(q.viewport.width > 0 && q.viewport.height > 0 && q.scale > 0 && q.scale.isFinite)
    do {
        let answer = try geometry.visibleTiles(for: q, maximumTiles: maximumTiles)
        precondition(answer.tiles.count <= maximumTiles, "more tiles than the limit")
        precondition(geometry.contains(level: answer.level.level))
        var previous: Double = -1
        let cx = q.viewport.centerX, cy = q.viewport.centerY
        for t in answer.tiles {
            precondition(geometry.contains(t.coordinate), "tile \(t.coordinate) outside the pyramid")
            precondition(t.coordinate.level == answer.level.level)
            precondition(t.width > 0 && t.height > 0, "empty tile")
            precondition(q.wrapX || t.x == geometry.rectInImage(t.coordinate).x, "x differs from the geometry without wrap")
            let dx = Double(t.x) + Double(t.width) / 2 - cx, dy = Double(t.y) + Double(t.height) / 2 - cy
            let d = dx * dx + dy * dy
            precondition(d >= previous, "not nearest first")
            previous = d
        }
        if q.margin == 0 && !q.wrapX {
            // Every listed tile meets the viewport with positive area.
            for t in answer.tiles {
                let r = geometry.rectInImage(t.coordinate)
                let left = max(Double(r.x), q.viewport.x), right = min(Double(r.maxX), q.viewport.x + q.viewport.width)
                let top = max(Double(r.y), q.viewport.y), bottom = min(Double(r.maxY), q.viewport.y + q.viewport.height)
                precondition(left < right && top < bottom, "tile \(t.coordinate) does not meet the viewport")
            }
        }
    } catch {
        guard case .tooManyTiles = error else { preconditionFailure("visibleTiles threw \(error)") }
    }
    return 0
}
