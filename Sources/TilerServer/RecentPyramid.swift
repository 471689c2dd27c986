import Synchronization

/// The pyramid one event loop's plain tile paths named last, kept for the next one: a
/// viewer asks for many tiles of one image in a row, and a hit needs no `String` of the id,
/// no hash and no catalog lock (a third of the lookup's cost in user space). A kept
/// pyramid holds only while the catalog's `version` is the one read before it was looked
/// up, so a rescan's change is seen by the next request. Each loop has its own (one per
/// `Router`), so its lock is never contended.
final class RecentPyramid: Sendable {
    private struct Kept {
        var id: [UInt8] = []
        var version: UInt64 = 0
        var pyramid: Pyramid?
    }

    private let kept = Mutex(Kept())

    /// The pyramid `catalog` holds under the id `id` (UTF-8 bytes), or nil when it holds
    /// none, or something that is not a pyramid (a broken one).
    func pyramid(_ id: UnsafeBufferPointer<UInt8>, in catalog: PyramidCatalog) -> Pyramid? {
        let version = catalog.version
        // Read in place under the lock (binding the kept value would copy it).
        let hit = kept.withLock { k -> Pyramid? in
            guard k.version == version, k.id.count == id.count,
                k.id.withUnsafeBufferPointer({ kept in
                    var i = 0
                    while i < kept.count, kept[i] == id[i] { i += 1 }
                    return i == kept.count
                })
            else { return nil }
            return k.pyramid
        }
        if let hit { return hit }
        guard case .pyramid(let pyramid)? = catalog.entry(String(decoding: id, as: UTF8.self)) else { return nil }
        kept.withLock { $0 = Kept(id: Array(id), version: version, pyramid: pyramid) }
        return pyramid
    }
}
