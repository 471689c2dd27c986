/// HTTP dates (RFC 9110 §5.6.7) without Foundation: formatting as IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`) and parsing all three accepted forms.
public enum HTTPDate {
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    private static let monthBytes: [[UInt8]] = months.map { Array($0.utf8) }
    private static let dayBytes: [[UInt8]] = days.map { Array($0.utf8) }

    /// The 29-byte IMF-fixdate for `seconds` since 1970.
    public static func format(_ seconds: Int64) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(29)
        let day = floorDivide(seconds, 86400)
        let secondOfDay = seconds - day * 86400
        let (y, m, d) = civil(fromDays: day)
        let weekday = Int((day % 7 + 11) % 7)  // 1970-01-01 was a Thursday
        out += dayBytes[weekday]
        out += [UInt8(ascii: ","), UInt8(ascii: " ")]
        two(&out, Int(d))
        out.append(UInt8(ascii: " "))
        out += monthBytes[Int(m) - 1]
        out.append(UInt8(ascii: " "))
        let year = Int(y)
        two(&out, year / 100 % 100)
        two(&out, year % 100)
        out.append(UInt8(ascii: " "))
        two(&out, Int(secondOfDay / 3600))
        out.append(UInt8(ascii: ":"))
        two(&out, Int(secondOfDay / 60 % 60))
        out.append(UInt8(ascii: ":"))
        two(&out, Int(secondOfDay % 60))
        out += Array(" GMT".utf8)
        return out
    }

    /// Seconds since 1970 for an IMF-fixdate, RFC 850 or asctime date; nil if malformed.
    public static func parse<C: Collection>(_ bytes: C) -> Int64? where C.Element == UInt8 {
        let b = Array(bytes)
        guard let comma = b.firstIndex(of: UInt8(ascii: ",")) else { return parseAsctime(b) }
        // After "Sun," or "Sunday,": either " 06 Nov 1994 08:49:37 GMT" or " 06-Nov-94 08:49:37 GMT".
        var p = comma + 1
        guard p < b.count, b[p] == UInt8(ascii: " ") else { return nil }
        p += 1
        guard let day = number(b, &p, 2) else { return nil }
        let separator = p < b.count ? b[p] : 0
        guard separator == UInt8(ascii: " ") || separator == UInt8(ascii: "-") else { return nil }
        p += 1
        guard let month = monthNumber(b, &p), p < b.count, b[p] == separator else { return nil }
        p += 1
        var year: Int
        if separator == UInt8(ascii: " ") {
            guard let y = number(b, &p, 4) else { return nil }
            year = y
        } else {
            guard let y = number(b, &p, 2) else { return nil }
            year = y < 70 ? 2000 + y : 1900 + y
        }
        guard p < b.count, b[p] == UInt8(ascii: " ") else { return nil }
        p += 1
        guard let time = clock(b, &p), b.count - p == 4, b[p...].elementsEqual(" GMT".utf8) else { return nil }
        return seconds(year: year, month: month, day: day, time: time)
    }

    /// `Sun Nov  6 08:49:37 1994`
    private static func parseAsctime(_ b: [UInt8]) -> Int64? {
        guard b.count == 24 else { return nil }
        var p = 4
        guard let month = monthNumber(b, &p), b[p] == UInt8(ascii: " ") else { return nil }
        p += 1
        if b[p] == UInt8(ascii: " ") { p += 1 }
        guard let day = number(b, &p, p == 8 ? 2 : 1), b[p] == UInt8(ascii: " ") else { return nil }
        p += 1
        guard let time = clock(b, &p), b[p] == UInt8(ascii: " ") else { return nil }
        p += 1
        guard let year = number(b, &p, 4), p == b.count else { return nil }
        return seconds(year: year, month: month, day: day, time: time)
    }

    private static func seconds(year: Int, month: Int, day: Int, time: Int) -> Int64? {
        guard (1...31).contains(day), (1...12).contains(month) else { return nil }
        return days(fromCivil: Int64(year), Int64(month), Int64(day)) * 86400 + Int64(time)
    }

    private static func number(_ b: [UInt8], _ p: inout Int, _ digits: Int) -> Int? {
        guard p + digits <= b.count else { return nil }
        var v = 0
        for i in p..<(p + digits) {
            guard b[i] >= 0x30, b[i] <= 0x39 else { return nil }
            v = v * 10 + Int(b[i] - 0x30)
        }
        p += digits
        return v
    }

    private static func monthNumber(_ b: [UInt8], _ p: inout Int) -> Int? {
        guard p + 3 <= b.count else { return nil }
        for (i, m) in monthBytes.enumerated() where b[p..<(p + 3)].elementsEqual(m) {
            p += 3
            return i + 1
        }
        return nil
    }

    /// `HH:MM:SS` as seconds of the day.
    private static func clock(_ b: [UInt8], _ p: inout Int) -> Int? {
        guard let h = number(b, &p, 2), p < b.count, b[p] == UInt8(ascii: ":") else { return nil }
        p += 1
        guard let m = number(b, &p, 2), p < b.count, b[p] == UInt8(ascii: ":") else { return nil }
        p += 1
        guard let s = number(b, &p, 2), h < 24, m < 60, s < 61 else { return nil }
        return h * 3600 + m * 60 + s
    }

    private static func two(_ out: inout [UInt8], _ v: Int) {
        out.append(UInt8(0x30 + v / 10))
        out.append(UInt8(0x30 + v % 10))
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 { a >= 0 ? a / b : -((-a + b - 1) / b) }

    // Howard Hinnant's days_from_civil / civil_from_days.
    static func days(fromCivil y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, m, d)
    }
}
