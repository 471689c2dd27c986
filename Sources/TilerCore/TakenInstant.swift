/// A photo's `dateTaken` as an instant: what `/images?sort=date` orders by and what IIIF
/// Presentation's `navDate` says.
///
/// Read from ISO 8601 as `tiler cut` writes it, `YYYY-MM-DDThh:mm:ss` with an optional
/// offset (`Z`, `±hh:mm`, `±hhmm`) and an optional fraction of a second (ignored), or a
/// date alone (midnight). Dates with offsets compare as instants:
/// `2024-05-01T23:30:00-02:00` comes after `2024-05-02T00:10:00+00:00`. A date without an
/// offset (a camera that records none) is read as if in UTC: its offset is unknown, and
/// this is the nearest guess that keeps the order of the photos of one camera.
public struct TakenInstant: Sendable, Hashable {
    /// Seconds since 1970-01-01T00:00:00Z.
    public let seconds: Int64

    public init(seconds: Int64) { self.seconds = seconds }

    /// nil for text that is not such a date (the image is then undated).
    public init?(_ text: String) {
        let b = Array(text.utf8.prefix(64))
        guard text.utf8.count <= 64 else { return nil }
        var i = 0
        /// `count` digits at `i`, as a number.
        func number(_ count: Int) -> Int? {
            guard i + count <= b.count else { return nil }
            var value = 0
            for k in i..<(i + count) {
                guard b[k] >= 0x30 && b[k] <= 0x39 else { return nil }
                value = value * 10 + Int(b[k] - 0x30)
            }
            i += count
            return value
        }
        func expect(_ byte: UInt8) -> Bool {
            guard i < b.count, b[i] == byte else { return false }
            i += 1
            return true
        }
        guard let year = number(4), expect(0x2D), let month = number(2), expect(0x2D), let day = number(2),
            year >= 1, (1...12).contains(month), (1...Self.days(inMonth: month, of: year)).contains(day)
        else { return nil }
        var (hour, minute, second, offset) = (0, 0, 0, 0)
        if i < b.count {
            guard expect(UInt8(ascii: "T")) || expect(UInt8(ascii: " ")), let h = number(2), expect(0x3A), let m = number(2),
                h <= 23, m <= 59
            else { return nil }
            (hour, minute) = (h, m)
            if expect(0x3A) {
                guard let s = number(2), s <= 60 else { return nil }
                second = s
                if expect(UInt8(ascii: ".")) || expect(UInt8(ascii: ",")) {
                    let start = i
                    while i < b.count, b[i] >= 0x30 && b[i] <= 0x39 { i += 1 }
                    guard i > start else { return nil }
                }
            }
            if i < b.count {
                if expect(UInt8(ascii: "Z")) || expect(UInt8(ascii: "z")) {
                    offset = 0
                } else {
                    let sign: Int
                    if expect(UInt8(ascii: "+")) {
                        sign = 1
                    } else if expect(UInt8(ascii: "-")) {
                        sign = -1
                    } else {
                        return nil
                    }
                    guard let oh = number(2) else { return nil }
                    _ = expect(0x3A)
                    guard let om = number(2), oh <= 23, om <= 59 else { return nil }
                    offset = sign * (oh * 3600 + om * 60)
                }
            }
            guard i == b.count else { return nil }
        }
        let days = Self.daysSinceEpoch(year: year, month: month, day: day)
        seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second - offset)
    }

    /// `YYYY-MM-DDThh:mm:ssZ`: the instant in UTC, as an `xsd:dateTime` (IIIF `navDate`).
    public var utcDateTime: String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let inDay = Int(seconds - days * 86_400)
        let (year, month, day) = Self.civil(daysSinceEpoch: Int(days))
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        var y = String(year)
        while y.count < 4 { y = "0" + y }
        return "\(y)-\(two(month))-\(two(day))T\(two(inDay / 3600)):\(two(inDay / 60 % 60)):\(two(inDay % 60))Z"
    }

    private static func days(inMonth month: Int, of year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 in the proleptic Gregorian calendar (H. Hinnant's
    /// `days_from_civil`).
    private static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The inverse (`civil_from_days`).
    private static func civil(daysSinceEpoch z0: Int) -> (year: Int, month: Int, day: Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
