import Foundation

/// What HEAD says about an object.
public struct S3ObjectInfo: Sendable, Equatable {
    public var size: UInt64
    /// The entity tag, quotes included, as S3 sends it: compared, never interpreted.
    public var etag: String
}

/// One object of a listing.
public struct S3Object: Sendable, Hashable {
    public var key: String
    public var size: UInt64
    public var etag: String
    /// When the object was stored, in seconds since 1970 (the listing's `LastModified`);
    /// nil when the listing did not say.
    public var lastModified: Int64?

    public init(key: String, size: UInt64, etag: String, lastModified: Int64? = nil) {
        self.key = key
        self.size = size
        self.etag = etag
        self.lastModified = lastModified
    }

    /// Seconds since 1970 of an ISO 8601 UTC time as S3 writes it,
    /// `2026-11-23T13:10:28.000Z` (fractions ignored), or nil.
    static func seconds(iso8601 text: String) -> Int64? {
        let b = Array(text.utf8)
        guard b.count >= 20, b[4] == 0x2D, b[7] == 0x2D, b[10] == 0x54, b[13] == 0x3A, b[16] == 0x3A, b.last == 0x5A else { return nil }
        func number(_ r: Range<Int>) -> Int64? {
            var n: Int64 = 0
            for i in r {
                guard b[i] >= 0x30, b[i] <= 0x39 else { return nil }
                n = n * 10 + Int64(b[i] - 0x30)
            }
            return n
        }
        guard let y = number(0..<4), let m = number(5..<7), let d = number(8..<10), let h = number(11..<13),
            let mi = number(14..<16), let s = number(17..<19), (1...12).contains(m), (1...31).contains(d), h < 24, mi < 60, s < 61
        else {
            return nil
        }
        // Days from the civil date (Howard Hinnant's algorithm).
        let yy = m <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return days * 86_400 + h * 3600 + mi * 60 + s
    }
}

/// One page of ListObjectsV2.
public struct S3ListPage: Sendable {
    public var objects: [S3Object]
    /// Pass to the next call for the next page; nil on the last page.
    public var continuationToken: String?
}
