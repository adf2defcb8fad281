import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Which responses ``CacheOverrideURLProtocol`` rewrites into cacheable ones, and for how long.
///
/// A response is rewritten when something in it stops it from being cached, or it says nothing
/// about freshness: `Cache-Control` with `no-cache`, `no-store`, `must-revalidate`, `private` or
/// `max-age=0`; `Pragma: no-cache`; an `Expires` in the past (or unreadable); `Vary: *`; or no
/// positive `max-age` and no future `Expires` at all. Its caching headers are replaced by
/// `Cache-Control: max-age=N`, and the original values stay readable in `X-Original-Cache-Control`,
/// `X-Original-Pragma`, `X-Original-Expires` and `X-Original-Vary`.
public struct CacheOverride: Sendable {
    /// The `max-age` written into rewritten responses. Default: one hour.
    public var maximumAge: Duration

    /// The URLs the override applies to; empty, the default, means every http(s) URL.
    public var endpoints: [Endpoint]

    /// - Parameters:
    ///   - maximumAge: the `max-age` written into rewritten responses.
    ///   - endpoints: the URLs it applies to; empty means every http(s) URL.
    public init(maximumAge: Duration = .seconds(3600), endpoints: [Endpoint] = []) {
        self.maximumAge = maximumAge
        self.endpoints = endpoints
    }

    /// Whether responses to `url` are rewritten.
    public func applies(to url: URL) -> Bool {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else { return false }
        return endpoints.isEmpty || endpoints.contains { $0.matches(url) }
    }

    /// `response` with its caching headers rewritten when they would stop it from being cached,
    /// or `response` itself when they would not.
    public func rewritten(_ response: HTTPURLResponse) -> HTTPURLResponse {
        // A rewritten response says only `max-age=N` about caching: with N > 0 it needs nothing.
        if let rewritten = response as? OverriddenHTTPURLResponse, rewritten.isFresh { return response }
        guard let url = response.url else { return response }
        let headers = HeaderFields(of: response)
        guard Self.needsRewrite(headers) else { return response }
        var fields = HeaderFields()
        var originals: [(name: String, lowercasedName: String, value: String)] = []
        for (lowercasedName, field) in headers.byLowercasedName {
            switch lowercasedName {
            case "cache-control", "pragma", "expires":
                originals.append(
                    ("X-Original-" + Self.canonical(field.name), "x-original-" + lowercasedName, field.value))
            case "vary" where ASCII.lowercasedElements(field.value).contains("*"):
                originals.append(("X-Original-Vary", "x-original-vary", field.value))
            default:
                fields.set(field.value, name: field.name, lowercasedName: lowercasedName)
            }
        }
        for original in originals {
            fields.set(original.value, name: original.name, lowercasedName: original.lowercasedName)
        }
        let seconds = max(0, Int(maximumAge.components.seconds))
        fields.set("max-age=\(seconds)", name: "Cache-Control", lowercasedName: "cache-control")
        return OverriddenHTTPURLResponse(
            url: url, statusCode: response.statusCode, headerFields: fields, isFresh: seconds > 0)
            ?? response
    }

    static func canonical(_ name: String) -> String {
        switch name.lowercased() {
        case "cache-control": "Cache-Control"
        case "pragma": "Pragma"
        case "expires": "Expires"
        default: name
        }
    }

    /// True when the response would not be reused as it is.
    static func needsRewrite(_ response: HTTPURLResponse) -> Bool {
        needsRewrite(HeaderFields(of: response))
    }

    private static let blockingDirectives: Set<String> = [
        "no-cache", "no-store", "must-revalidate", "private", "max-age=0",
    ]

    static func needsRewrite(_ headers: HeaderFields) -> Bool {
        let directives = headers["cache-control"].map(ASCII.lowercasedElements) ?? []
        if directives.contains(where: {
            blockingDirectives.contains($0) || $0.hasPrefix("no-cache=") || $0.hasPrefix("private=")
        }) {
            return true
        }
        if headers["pragma"]?.lowercased().contains("no-cache") == true { return true }
        if let vary = headers["vary"], ASCII.lowercasedElements(vary).contains("*") {
            return true
        }
        let hasPositiveMaxAge = directives.contains {
            $0.hasPrefix("max-age=") && (Int($0.dropFirst("max-age=".count)) ?? 0) > 0
        }
        if let expires = headers["expires"] {
            guard let date = HTTPDate.parse(expires) else { return true }
            if date <= Date() && !hasPositiveMaxAge { return true }
            return false
        }
        return !hasPositiveMaxAge
    }
}

/// HTTP dates (RFC 9110 section 5.6.7): the IMF-fixdate form and the two obsolete ones, read
/// strictly (a date in another shape, such as another zone than GMT, is no date), with names in
/// any case.
enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    static func parse(_ value: String) -> Date? {
        let text = value.trimmingCharacters(in: .whitespaces)
        // Sun, 06 Nov 1994 08:49:37 GMT
        if let match = text.wholeMatch(
            of: /([A-Za-z]{3}), (\d{2}) ([A-Za-z]{3}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) ([Gg][Mm][Tt])/)
        {
            return date(day: match.2, month: match.3, year: match.4, hour: match.5, minute: match.6, second: match.7)
        }
        // Sunday, 06-Nov-94 08:49:37 GMT
        if let match = text.wholeMatch(
            of: /([A-Za-z]{6,9}), (\d{2})-([A-Za-z]{3})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) ([Gg][Mm][Tt])/)
        {
            return date(day: match.2, month: match.3, year: match.4, hour: match.5, minute: match.6, second: match.7)
        }
        // Sun Nov  6 08:49:37 1994
        if let match = text.wholeMatch(of: /([A-Za-z]{3}) ([A-Za-z]{3}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})/) {
            return date(day: match.3, month: match.2, year: match.7, hour: match.4, minute: match.5, second: match.6)
        }
        return nil
    }

    private static func date(
        day: Substring, month: Substring, year: Substring, hour: Substring, minute: Substring, second: Substring
    ) -> Date? {
        guard let month = months.firstIndex(of: month.lowercased()),
            let day = Int(day.trimmingCharacters(in: .whitespaces)), var year = Int(year),
            let hour = Int(hour), let minute = Int(minute), let second = Int(second),
            (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "GMT")!
        if year < 100 {
            // A two-digit year more than 50 years ahead is the latest past year with those digits.
            let current = calendar.component(.year, from: Date())
            year += current - current % 100
            if year > current + 50 { year -= 100 }
        }
        return calendar.date(
            from: DateComponents(year: year, month: month + 1, day: day, hour: hour, minute: minute, second: second))
    }
}
