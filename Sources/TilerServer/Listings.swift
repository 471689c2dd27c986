import Synchronization
import TilerCore

/// How `/images` may be sorted: `sort=name` (the default), `sort=date` or `sort=-date`.
enum ListingSort: Sendable {
    /// Natural order of titles, else ids (`Pyramid.inListingOrder`).
    case name
    /// By `dateTaken` as instants, oldest first; ties in name order; undated last.
    case date
    /// By `dateTaken`, newest first; ties in name order; undated last.
    case newestFirst

    /// `name`, `date` or `-date`; nil for anything else.
    init?(parameter: String) {
        switch parameter {
        case "name": self = .name
        case "date": self = .date
        case "-date": self = .newestFirst
        default: return nil
        }
    }
}

/// One album: images whose `metadata.album` is `name`, in name order.
struct Album: Sendable {
    let name: String
    let images: [Pyramid]
}

/// What one catalog snapshot's listing is also read as: in date order (both ways), and
/// grouped into albums. Each is made the first time a request asks for it, and kept with
/// the snapshot (a new snapshot, after a scan that changed something, has new
/// `Listings`), so that a request never sorts the catalog.
///
/// The cost, once per change of the catalog: the date order sorts the dated pyramids by
/// (instant, position in name order), two integers per comparison, the instants read
/// once per pyramid when it was loaded (`Pyramid.taken`); albums are one pass over the
/// name order and a sort of the album names. Sorting 20,000 such pairs took 7.6 ms
/// (release build, on two shared cores busy with a test run): once per catalog change,
/// where per request it would cost more than the listing itself.
final class Listings: Sendable {
    /// The snapshot's listing: `Pyramid.inListingOrder`.
    let byName: [Pyramid]
    private let made = Mutex(Made())

    private struct Made {
        var oldestFirst: [Pyramid]?
        var newestFirst: [Pyramid]?
        var albums: (list: [Album], byName: [String: Int])?
    }

    init(byName: [Pyramid]) { self.byName = byName }

    /// Every pyramid in `sort`'s order.
    func ordered(_ sort: ListingSort) -> [Pyramid] {
        switch sort {
        case .name: return byName
        case .date: return kept(\.oldestFirst) { Self.byDate(byName, newestFirst: false) }
        case .newestFirst: return kept(\.newestFirst) { Self.byDate(byName, newestFirst: true) }
        }
    }

    /// The order kept in `slot`, made by `make` the first time.
    private func kept(_ slot: WritableKeyPath<Made, [Pyramid]?>, _ make: () -> [Pyramid]) -> [Pyramid] {
        made.withLock { m in
            if let order = m[keyPath: slot] { return order }
            let order = make()
            m[keyPath: slot] = order
            return order
        }
    }

    /// Every album, in natural order of names.
    var albums: [Album] { madeAlbums.list }

    /// The album named `name` exactly; nil when no image says it belongs to it.
    func album(named name: String) -> Album? {
        let (list, index) = madeAlbums
        return index[name].map { list[$0] }
    }

    private var madeAlbums: (list: [Album], byName: [String: Int]) {
        made.withLock { m in
            if let kept = m.albums { return kept }
            var members: [String: [Pyramid]] = [:]
            for p in byName {
                if let album = p.manifest.metadata?.album { members[album, default: []].append(p) }
            }
            let names = members.keys.map { (key: NaturalSortKey($0), name: $0) }.sorted(by: NaturalSortKey.areInOrder)
            let list = names.map { Album(name: $0.name, images: members[$0.name]!) }
            var index: [String: Int] = [:]
            for (i, album) in list.enumerated() { index[album.name] = i }
            m.albums = (list, index)
            return (list, index)
        }
    }

    /// The dated pyramids by instant (ties in name order), then the undated in name order.
    static func byDate(_ byName: [Pyramid], newestFirst: Bool) -> [Pyramid] {
        var dated: [(seconds: Int64, rank: Int)] = []
        dated.reserveCapacity(byName.count)
        var undated: [Pyramid] = []
        for (rank, p) in byName.enumerated() {
            if let taken = p.taken { dated.append((taken.seconds, rank)) } else { undated.append(p) }
        }
        dated.sort { a, b in
            if a.seconds != b.seconds { return newestFirst ? a.seconds > b.seconds : a.seconds < b.seconds }
            return a.rank < b.rank
        }
        return dated.map { byName[$0.rank] } + undated
    }
}
