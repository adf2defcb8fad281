import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Whether a stored entry may answer a request: the one freshness rule of a transport, chosen
/// once from its configuration and asked by every path.
///
/// Two sets of rules:
/// - **configured** (the default): an entry is fresh for the configured maximum age of its URL
///   (for ever without one), then answers within its stale-while-revalidate window;
/// - **HTTP caching** (``CachedTransport/Configuration/Freshness/conformsToHTTPCaching``), for requests
///   with the `useProtocolCachePolicy` policy: RFC 9111's freshness from the response's own
///   headers, capped by the configured maximum age, and the request's `max-age`, `min-fresh` and
///   `max-stale`.
struct FreshnessPolicy: Sendable {
    let followsHTTPCaching: Bool
    let maximumAge: Duration?
    let maximumAges: [EndpointSetting<Duration>]
    let staleWindow: Duration?
    let staleWindows: [EndpointSetting<Duration>]
    let clock: CacheClock
    /// Whether any entry can ever go stale: when not, a lookup does not read the clock.
    let entriesExpire: Bool

    init(_ configuration: CachedTransport.Configuration) {
        followsHTTPCaching = configuration.freshness.conformsToHTTPCaching
        maximumAge = configuration.freshness.maximumAge
        maximumAges = configuration.freshness.maximumAges
        staleWindow = configuration.freshness.staleWhileRevalidate
        staleWindows = configuration.freshness.staleWhileRevalidateWindows
        clock = configuration.clock
        entriesExpire = followsHTTPCaching || maximumAge != nil || !maximumAges.isEmpty
    }

    // MARK: - When an answer is stored

    /// The configured maximum age and stale-while-revalidate window of one URL.
    struct Settings: Sendable {
        let maximumAge: Duration?
        let staleWindow: Duration?
    }

    /// The settings of `url`: its endpoint's (``CachedTransport/Configuration/Freshness/maximumAges``,
    /// ``CachedTransport/Configuration/Freshness/staleWhileRevalidateWindows``), else the general
    /// ones. Read when a fetch is planned or an answer written, with no lock held: an endpoint
    /// made from a predicate asks the app's code.
    func settings(for url: URL?) -> Settings {
        guard let url, !maximumAges.isEmpty || !staleWindows.isEmpty else {
            return Settings(maximumAge: maximumAge, staleWindow: staleWindow)
        }
        return Settings(
            maximumAge: maximumAges.value(for: url) ?? maximumAge,
            staleWindow: staleWindows.value(for: url) ?? staleWindow)
    }

    /// How long `response`, fetched by a request sent at `requestTime` for a URL whose settings
    /// are `settings`, stays fresh once stored, received at `responseTime`.
    func lifetime(of response: URLResponse, settings: Settings, requestTime: Date, responseTime: Date)
        -> EntryLifetime
    {
        guard followsHTTPCaching, let http = response as? HTTPURLResponse else {
            return EntryLifetime(freshFor: settings.maximumAge, staleWindow: settings.staleWindow)
        }
        return httpLifetime(
            of: http, requestTime: requestTime, responseTime: responseTime, maximumAge: settings.maximumAge,
            staleWindow: settings.staleWindow)
    }

    /// The lifetime HTTP gives `response` as a private cache computes it (RFC 9111 section 4.2):
    /// the freshness lifetime from `max-age`, then `Expires` against `Date`, then a heuristic of
    /// a tenth of the time since `Last-Modified` for statuses that allow one; less the response's
    /// corrected initial age. `s-maxage` is for shared caches and ignored. The response's own
    /// `stale-while-revalidate` takes precedence over the configured window.
    private func httpLifetime(
        of response: HTTPURLResponse, requestTime: Date, responseTime: Date, maximumAge: Duration?,
        staleWindow: Duration?
    ) -> EntryLifetime {
        let cacheControl = CacheControl(response.headerValue("cache-control"))
        // `Pragma` counts only where `Cache-Control` is absent (RFC 9111 section 5.4).
        let pragmaNoCache =
            response.headerValue("cache-control") == nil
            && response.headerValue("pragma").map { HeaderList.contains("no-cache", in: $0) } == true
        let parse = { (value: String) in HTTPDate.parse(value, now: responseTime) }
        let date = response.headerValue("date").flatMap(parse) ?? responseTime
        var lifetime: TimeInterval
        if cacheControl.noCache || pragmaNoCache {
            lifetime = 0
        } else if let maxAge = cacheControl.maxAge {
            lifetime = TimeInterval(maxAge.seconds ?? 0)
        } else if let expires = response.headerValue("expires") {
            lifetime = parse(expires).map { max(0, $0.timeIntervalSince(date)) } ?? 0
        } else if Self.heuristicStatuses.contains(response.statusCode) || cacheControl.isPublic,
            let lastModified = response.headerValue("last-modified").flatMap(parse)
        {
            lifetime = max(0, date.timeIntervalSince(lastModified)) / 10
        } else {
            lifetime = 0
        }
        if let maximumAge { lifetime = min(lifetime, Double(maximumAge.components.seconds)) }

        let apparentAge = max(0, responseTime.timeIntervalSince(date))
        let responseDelay = max(0, responseTime.timeIntervalSince(requestTime))
        let initialAge = max(apparentAge, (Self.age(of: response) ?? 0) + responseDelay)

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
    /// integer (RFC 9111 section 5.1). A member with parameters (`7200;foo=bar`) counts by its
    /// integer: reading it older never lets an entry answer where ignoring it would not.
    static func age(of response: HTTPURLResponse) -> TimeInterval? {
        guard let value = response.headerValue("age"), var first = HeaderList.elements(value).first else {
            return nil
        }
        if let semicolon = first.firstIndex(of: ";") { first = HeaderList.trimmed(first[..<semicolon]) }
        guard ASCII.isDigits(first) else { return nil }
        return TimeInterval(first) ?? TimeInterval(Int32.max)
    }

    /// Whether a cache following HTTP may store `response`, of a final status, whatever the
    /// configured storable statuses say (RFC 9111 section 3): it states its own freshness
    /// (`max-age` or `Expires`), says `public`, or has a status HTTP lets a cache reuse with
    /// heuristic freshness. With `must-understand`, only a status in ``understoodStatuses``.
    static func httpAllowsStoring(_ response: HTTPURLResponse, cacheControl: CacheControl) -> Bool {
        guard (200..<600).contains(response.statusCode) else { return false }
        if cacheControl.mustUnderstand { return understoodStatuses.contains(response.statusCode) }
        return cacheControl.maxAge != nil || response.headerValue("expires") != nil || cacheControl.isPublic
            || understoodStatuses.contains(response.statusCode)
    }

    /// The statuses whose caching rules the transport implements: the heuristically cacheable
    /// ones but `206`, whose part of a resource is never stored. For these, `must-understand`
    /// lets a response be stored in spite of its `no-store`.
    static let understoodStatuses = heuristicStatuses.subtracting([206])

    // MARK: - When a request asks

    /// What a stored entry is worth to one request.
    enum Verdict: Sendable, Equatable {
        /// Fresh: answer with it.
        case fresh
        /// Stale, but what the request accepts (its `max-stale`, or a policy that takes any age):
        /// answer with it.
        case staleAccepted
        /// Stale within its stale-while-revalidate window: answer with it at once, and revalidate
        /// it in the background.
        case staleWhileRevalidate
        /// Not usable without asking the origin.
        case stale
    }

    /// How a request weighs stored entries.
    enum Acceptance: Sendable {
        /// The transport's rules for its default policy.
        case transportRules
        /// RFC 9111 with the request's own `Cache-Control` (HTTP caching, `useProtocolCachePolicy`).
        case httpRules(CacheControl?)
        /// Any age (`returnCacheDataDontLoad`; `returnCacheDataElseLoad` when following HTTP).
        case anyAge
    }

    /// The time a lookup judges entries at (``verdict(for:acceptance:at:)``), read before the
    /// lookup takes the store's lock: as the time since ``origin``, a `Duration`, which a hit
    /// copies for nothing, rather than an instant, a resilient type whose every copy goes
    /// through the runtime. Nil when no entry can go stale (``entriesExpire`` is false): the clock
    /// is then not read at all.
    var lookupTime: Duration? { entriesExpire ? lookupTime(at: clock.now) : nil }

    /// The time at `now` (``lookupTime``'s measure), or nil when no entry can go stale.
    func lookupTime(at now: ContinuousClock.Instant) -> Duration? {
        guard entriesExpire else { return nil }
        return now - Self.origin
    }

    /// What ``lookupTime`` counts from.
    private static let origin = ContinuousClock.now

    /// What `entry` is worth at `time` (``lookupTime``) to a request that weighs entries as
    /// `acceptance` says: fresh whenever `time` is nil, since no entry can go stale.
    @inline(__always)
    func verdict(for entry: StoredResponse, acceptance: Acceptance, at time: Duration?) -> Verdict {
        guard let time else { return .fresh }
        return verdict(for: entry, at: Self.origin + time, acceptance: acceptance)
    }

    /// The age an answer from `entry` declares at `time` (``lookupTime``; RFC 9111 section 5.1),
    /// when it keeps one.
    @inline(__always)
    func age(of entry: StoredResponse, at time: Duration?) -> Duration? {
        guard let time, entry.initialAge != nil else { return nil }
        return age(of: entry, atTime: time)
    }

    @inline(never)
    private func age(of entry: StoredResponse, atTime time: Duration) -> Duration? {
        entry.currentAge(at: Self.origin + time)
    }

    /// The wall-clock time `entry` was stored.
    func receivedDate(of entry: StoredResponse) -> Date {
        let elapsed = (clock.now - entry.storedAt).components
        return clock.date.addingTimeInterval(-(Double(elapsed.seconds) + Double(elapsed.attoseconds) * 1e-18))
    }

    private func verdict(for entry: StoredResponse, at now: ContinuousClock.Instant, acceptance: Acceptance)
        -> Verdict
    {
        switch acceptance {
        case .anyAge:
            return isExpired(entry, at: now) ? .staleAccepted : .fresh
        case .transportRules:
            guard isExpired(entry, at: now) else { return .fresh }
            return isWithinStaleWindow(entry, at: now) ? .staleWhileRevalidate : .stale
        case .httpRules(let request):
            // Only with `only-if-cached` does a request's own `no-cache` reach here (otherwise it
            // reloads): no stored answer may serve it unvalidated.
            if request?.noCache == true { return .stale }
            let age = entry.currentAge(at: now) ?? .zero
            if let maxAge = request?.maxAge {
                guard let seconds = maxAge.seconds, age <= .seconds(seconds) else { return .stale }
            }
            if let minFresh = request?.minFresh, let expiresAt = entry.expiresAt {
                guard let seconds = minFresh.seconds, expiresAt - now >= .seconds(seconds) else { return .stale }
            }
            guard let expiresAt = entry.expiresAt, now >= expiresAt else { return .fresh }
            if entry.mustRevalidate { return .stale }
            if request?.acceptsAnyStaleness == true { return .staleAccepted }
            if let maxStale = request?.maxStale?.seconds, now - expiresAt <= .seconds(maxStale) {
                return .staleAccepted
            }
            return isWithinStaleWindow(entry, at: now) ? .staleWhileRevalidate : .stale
        }
    }

    /// Whether `entry` may answer in place of a fetch that failed, when `configured`
    /// (``CachedTransport/Configuration/Freshness/staleIfError``) or, following HTTP, within the response's
    /// own `stale-if-error` window past its freshness (RFC 5861 section 4). Never a `no-cache` or
    /// `must-revalidate` entry, nor, following HTTP, one whose `proxy-revalidate` or `s-maxage`
    /// forbids a shared cache to serve it stale.
    func mayAnswerAfterFailure(
        _ entry: StoredResponse, whenConfigured configured: Bool, at now: ContinuousClock.Instant
    ) -> Bool {
        guard !entry.mustRevalidate else { return false }
        guard followsHTTPCaching, let http = entry.response as? HTTPURLResponse else { return configured }
        let cacheControl = CacheControl(http.headerValue("cache-control"))
        if cacheControl.forbidsStaleInSharedCaches { return false }
        if configured { return true }
        guard let window = cacheControl.staleIfError?.seconds else { return false }
        guard let expiresAt = entry.expiresAt else { return true }
        return now - expiresAt <= .seconds(window)
    }

    private func isExpired(_ entry: StoredResponse, at now: ContinuousClock.Instant) -> Bool {
        guard let expiresAt = entry.expiresAt else { return false }
        return now >= expiresAt
    }

    private func isWithinStaleWindow(_ entry: StoredResponse, at now: ContinuousClock.Instant) -> Bool {
        guard let staleUntil = entry.staleUntil else { return false }
        return now < staleUntil
    }
}
