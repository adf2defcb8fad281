import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How long a stored entry stays fresh, and what may be done with it once it is stale.
struct EntryLifetime: Sendable {
    /// From the moment it is stored; nil keeps it fresh until it is invalidated or evicted. Zero
    /// or less: stale at once.
    var freshFor: Duration?
    /// How long past ``freshFor`` it still answers while it is revalidated in the background.
    var staleWindow: Duration?
    /// Its age when stored (RFC 9111 section 4.2.3), when the transport follows HTTP caching:
    /// answers from it then carry a generated `Age`.
    var initialAge: Duration?
    /// `no-cache` or `must-revalidate`: never answered stale, not even when the network fails.
    var mustRevalidate = false

    /// The lifetime the transport's own settings give: a maximum age and a stale window.
    static func configured(maximumAge: Duration?, staleWindow: Duration?) -> EntryLifetime {
        EntryLifetime(freshFor: maximumAge, staleWindow: staleWindow)
    }

    /// The lifetime HTTP gives `response` as a private cache computes it (RFC 9111 section 4.2):
    /// the freshness lifetime from `max-age`, then `Expires` against `Date`, then a heuristic of
    /// a tenth of the time since `Last-Modified` for statuses that allow one; less the response's
    /// corrected initial age. `s-maxage` is for shared caches and ignored.
    ///
    /// - Parameters:
    ///   - requestTime: when the request that brought `response` was sent.
    ///   - responseTime: when `response` arrived.
    ///   - maximumAge: an upper bound the app set, if any.
    ///   - staleWindow: the app's stale-while-revalidate window; the response's own
    ///     `stale-while-revalidate` directive takes precedence.
    static func http(
        of response: HTTPURLResponse,
        requestTime: Date,
        responseTime: Date,
        maximumAge: Duration?,
        staleWindow: Duration?
    ) -> EntryLifetime {
        let cacheControl = CacheControl(response.value(forHTTPHeaderField: "Cache-Control"))
        let pragmaNoCache =
            cacheControl == CacheControl()
            && response.value(forHTTPHeaderField: "Pragma")?.lowercased().contains("no-cache") == true
        let date = response.value(forHTTPHeaderField: "Date").flatMap(HTTPDate.parse) ?? responseTime
        var lifetime: TimeInterval
        if cacheControl.noCache || pragmaNoCache {
            lifetime = 0
        } else if let maxAge = cacheControl.maxAge {
            lifetime = TimeInterval(maxAge.seconds ?? 0)
        } else if let expires = response.value(forHTTPHeaderField: "Expires") {
            lifetime = HTTPDate.parse(expires).map { max(0, $0.timeIntervalSince(date)) } ?? 0
        } else if heuristicStatuses.contains(response.statusCode),
            let lastModified = response.value(forHTTPHeaderField: "Last-Modified").flatMap(HTTPDate.parse)
        {
            lifetime = max(0, date.timeIntervalSince(lastModified)) / 10
        } else {
            lifetime = 0
        }
        if let maximumAge { lifetime = min(lifetime, Double(maximumAge.components.seconds)) }

        let apparentAge = max(0, responseTime.timeIntervalSince(date))
        let responseDelay = max(0, responseTime.timeIntervalSince(requestTime))
        let ageValue = age(of: response) ?? 0
        let initialAge = max(apparentAge, ageValue + responseDelay)

        let mustRevalidate = cacheControl.noCache || cacheControl.mustRevalidate || pragmaNoCache
        let window: Duration? =
            if mustRevalidate {
                nil
            } else if let directive = cacheControl.staleWhileRevalidate?.seconds {
                .seconds(directive)
            } else {
                staleWindow
            }
        return EntryLifetime(
            freshFor: .milliseconds(Int64(((lifetime - initialAge) * 1000).rounded(.down))),
            staleWindow: window,
            initialAge: .milliseconds(Int64((initialAge * 1000).rounded(.down))),
            mustRevalidate: mustRevalidate
        )
    }

    /// Statuses whose responses may be given a heuristic freshness (RFC 9110 section 15.1).
    static let heuristicStatuses: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    /// The `Age` field's seconds: its first member, ignored when that is not a non-negative
    /// integer (RFC 9111 section 5.1).
    static func age(of response: HTTPURLResponse) -> TimeInterval? {
        guard let value = response.value(forHTTPHeaderField: "Age") else { return nil }
        let first = value.split(separator: ",").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        guard !first.isEmpty, first.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return TimeInterval(first) ?? TimeInterval(Int32.max)
    }

    /// True when `response` states its own freshness (`max-age` or `Expires`), which lets a
    /// cache store a status it would not store by default.
    static func hasExplicitFreshness(_ response: HTTPURLResponse) -> Bool {
        CacheControl(response.value(forHTTPHeaderField: "Cache-Control")).maxAge != nil
            || response.value(forHTTPHeaderField: "Expires") != nil
    }
}
