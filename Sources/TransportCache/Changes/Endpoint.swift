import Foundation

/// A set of URLs: one exact URL, a path prefix, a host, or any predicate.
///
/// Endpoints select entries to invalidate and the URLs a per-endpoint setting applies to.
///
/// Two endpoints are equal when they are made the same way with equal values; an endpoint made
/// from a predicate equals only itself and its copies, since closures cannot be compared.
///
/// ```swift
/// transport.invalidate(.pathPrefix("/articles"))
/// configuration.freshness.maximumAges = [EndpointSetting(.host("static.example.com"), .seconds(3600))]
/// ```
public struct Endpoint: Sendable, Hashable {
    private enum Kind: Sendable, Hashable {
        case url(String)
        case pathPrefix(String, host: String?)
        case host(String)
        case predicate(Predicate)
    }

    /// A predicate, compared by identity.
    private final class Predicate: Sendable, Hashable {
        let matches: @Sendable (URL) -> Bool

        init(_ matches: @escaping @Sendable (URL) -> Bool) {
            self.matches = matches
        }

        static func == (left: Predicate, right: Predicate) -> Bool { left === right }

        func hash(into hasher: inout Hasher) {
            hasher.combine(ObjectIdentifier(self))
        }
    }

    private let kind: Kind

    /// Exactly this URL, query included (scheme and host compare without case, the default port
    /// and the fragment are ignored).
    public static func url(_ url: URL) -> Endpoint {
        Endpoint(kind: .url(URLNormalization.normalized(url) ?? url.absoluteString))
    }

    /// Every URL whose path is `prefix` or lies below it, segment by segment: `/items` matches
    /// `/items`, `/items/7` and `/items?page=2`, not `/itemsets`. When `host` is given, only on that
    /// host.
    public static func pathPrefix(_ prefix: String, host: String? = nil) -> Endpoint {
        Endpoint(kind: .pathPrefix(prefix, host: host?.lowercased()))
    }

    /// Every URL on `host` (compared without case).
    public static func host(_ host: String) -> Endpoint {
        Endpoint(kind: .host(host.lowercased()))
    }

    /// Every URL for which `predicate` returns true.
    ///
    /// The transport asks `predicate` with none of its own locks held: an invalidation asks it
    /// about every key held or in flight before it takes any, and a per-endpoint setting is read
    /// when a request is planned.
    public static func matching(_ predicate: @escaping @Sendable (URL) -> Bool) -> Endpoint {
        Endpoint(kind: .predicate(Predicate(predicate)))
    }

    /// Whether `url` belongs to this endpoint.
    public func matches(_ url: URL) -> Bool {
        switch kind {
        case .url(let expected):
            return URLNormalization.normalized(url) == expected
        case .pathPrefix(let prefix, let host):
            if let host, url.host?.lowercased() != host { return false }
            let path = url.path.isEmpty ? "/" : url.path
            guard path.hasPrefix(prefix) else { return false }
            return path.count == prefix.count || prefix.hasSuffix("/")
                || path.dropFirst(prefix.count).hasPrefix("/")
        case .host(let host):
            return url.host?.lowercased() == host
        case .predicate(let predicate):
            #if DEBUG
            assert(!LockRank.isHoldingAny, "an endpoint's predicate is asked with none of the transport's locks held")
            #endif
            return predicate.matches(url)
        }
    }

    /// How an index finds the URLs of an endpoint.
    enum Selection {
        /// The normalised URL string.
        case url(String)
        /// A path prefix, on one host (lowercased) or on every host.
        case pathPrefix(String, host: String?)
        /// A lowercased host.
        case host(String)
        /// A predicate, asked about every URL.
        case predicate
    }

    var selection: Selection {
        switch kind {
        case .url(let url): .url(url)
        case .pathPrefix(let prefix, let host): .pathPrefix(prefix, host: host)
        case .host(let host): .host(host)
        case .predicate: .predicate
        }
    }

    /// The one URL this endpoint is, when it was made with ``url(_:)``.
    var exactURL: URL? {
        if case .url(let normalized) = kind { return URL(string: normalized) }
        return nil
    }

    /// Whether the normalised URL string of a stored key belongs to this endpoint.
    func matches(normalizedURL: String) -> Bool {
        if case .url(let expected) = kind { return normalizedURL == expected }
        guard let url = URL(string: normalizedURL) else { return false }
        return matches(url)
    }
}
