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
    /// The `max-age` written into rewritten responses, for whatever caches them next: on Apple
    /// platforms, the `URLCache` of a session that installs ``CacheOverrideURLProtocol``. It is
    /// only a header: how long a ``CachedTransport``'s own entries stay fresh is
    /// ``CachedTransport/Configuration/Freshness/maximumAge``.
    ///
    /// Default: one hour.
    public var writtenMaxAge: Duration

    /// The URLs the override applies to; empty, the default, means every http(s) URL.
    public var endpoints: [Endpoint]

    /// The clock an `Expires` is compared with. A ``CachedTransport`` sets it to its
    /// ``CachedTransport/Configuration/clock``.
    ///
    /// Default: ``CacheClock/continuous``.
    public var clock: CacheClock = .continuous

    /// - Parameters:
    ///   - writtenMaxAge: the `max-age` written into rewritten responses (``writtenMaxAge``).
    ///   - endpoints: the URLs it applies to; empty means every http(s) URL.
    public init(writtenMaxAge: Duration = .seconds(3600), endpoints: [Endpoint] = []) {
        self.writtenMaxAge = writtenMaxAge
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
        if let rewritten = response as? TransportHTTPURLResponse, rewritten.isFresh { return response }
        guard let url = response.url else { return response }
        let headers = HeaderFields(of: response)
        guard needsRewrite(headers) else { return response }
        var fields = HeaderFields()
        var originals: [(name: String, lowercasedName: String, value: String)] = []
        for (lowercasedName, field) in headers.byLowercasedName {
            switch lowercasedName {
            case "cache-control", "pragma", "expires":
                originals.append(
                    ("X-Original-" + Self.canonical(field.name), "x-original-" + lowercasedName, field.value))
            case "vary" where HeaderList.contains("*", in: field.value):
                originals.append(("X-Original-Vary", "x-original-vary", field.value))
            default:
                fields.set(field.value, name: field.name, lowercasedName: lowercasedName)
            }
        }
        for original in originals {
            fields.set(original.value, name: original.name, lowercasedName: original.lowercasedName)
        }
        let seconds = max(0, Int(writtenMaxAge.components.seconds))
        fields.set("max-age=\(seconds)", name: "Cache-Control", lowercasedName: "cache-control")
        return HTTPResponseBuilder.response(
            url: url, statusCode: response.statusCode, headerFields: fields, isFresh: seconds > 0, outcome: nil)
    }

    static func canonical(_ name: String) -> String {
        switch name.lowercased() {
        case "cache-control": "Cache-Control"
        case "pragma": "Pragma"
        case "expires": "Expires"
        default: name
        }
    }

    /// True when a response with `headers` would not be reused as it is.
    func needsRewrite(_ headers: HeaderFields) -> Bool {
        let cacheControl = CacheControl(headers["cache-control"])
        if cacheControl.noCache || cacheControl.noStore || cacheControl.mustRevalidate || cacheControl.isPrivate
            || cacheControl.maxAge == .value(0)
        {
            return true
        }
        if let pragma = headers["pragma"], HeaderList.contains("no-cache", in: pragma) { return true }
        if let vary = headers["vary"], HeaderList.contains("*", in: vary) { return true }
        let hasPositiveMaxAge = (cacheControl.maxAge?.seconds ?? 0) > 0
        if let expires = headers["expires"] {
            let now = clock.date
            guard let date = HTTPDate.parse(expires, now: now) else { return true }
            return date <= now && !hasPositiveMaxAge
        }
        return !hasPositiveMaxAge
    }
}
