import Foundation

/// HTTP dates (RFC 9110 section 5.6.7): the IMF-fixdate form and the two obsolete ones, read
/// strictly (a date in another shape, such as another zone than GMT, is no date), with names in
/// any case. A two-digit year is read against `now`, the transport's clock: a date more than 50
/// years after it is in the century before (RFC 9110 section 5.6.7).
enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    static func parse(_ value: String, now: Date) -> Date? {
        let text = String(HeaderList.trimmed(value[...]))
        // Sun, 06 Nov 1994 08:49:37 GMT
        if let match = text.wholeMatch(
            of: /([A-Za-z]{3}), (\d{2}) ([A-Za-z]{3}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) ([Gg][Mm][Tt])/)
        {
            return date(
                day: match.2, month: match.3, year: match.4, hour: match.5, minute: match.6, second: match.7, now: now)
        }
        // Sunday, 06-Nov-94 08:49:37 GMT
        if let match = text.wholeMatch(
            of: /([A-Za-z]{6,9}), (\d{2})-([A-Za-z]{3})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) ([Gg][Mm][Tt])/)
        {
            return date(
                day: match.2, month: match.3, year: match.4, hour: match.5, minute: match.6, second: match.7, now: now)
        }
        // Sun Nov  6 08:49:37 1994
        if let match = text.wholeMatch(of: /([A-Za-z]{3}) ([A-Za-z]{3}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})/) {
            return date(
                day: match.3, month: match.2, year: match.7, hour: match.4, minute: match.5, second: match.6, now: now)
        }
        return nil
    }

    private static func date(
        day: Substring, month: Substring, year: Substring, hour: Substring, minute: Substring, second: Substring,
        now: Date
    ) -> Date? {
        guard let month = months.firstIndex(of: month.lowercased()),
            let day = Int(HeaderList.trimmed(day)), var year = Int(year),
            let hour = Int(hour), let minute = Int(minute), let second = Int(second),
            (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "GMT")!
        if year < 100 {
            // A two-digit year more than 50 years ahead is the latest past year with those digits.
            let current = calendar.component(.year, from: now)
            year += current - current % 100
            if year > current + 50 { year -= 100 }
        }
        return calendar.date(
            from: DateComponents(year: year, month: month + 1, day: day, hour: hour, minute: minute, second: second))
    }
}
