import Foundation

/// A set of URLs: one exact URL, a path prefix, a host, or any predicate.
///
/// Endpoints select entries to invalidate and the URLs a per-endpoint setting applies to.
///
/// ```swift
/// transport.invalidate(.pathPrefix("/articles"))
/// configuration.maximumAges = [(.host("static.example.com"), .seconds(3600))]
/// ```
public struct Endpoint: Sendable {
    private enum Kind: Sendable {
        case url(String)
        case pathPrefix(String, host: String?)
        case host(String)
        case predicate(@Sendable (URL) -> Bool)
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
    public static func matching(_ predicate: @escaping @Sendable (URL) -> Bool) -> Endpoint {
        Endpoint(kind: .predicate(predicate))
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
            return predicate(url)
        }
    }

    /// Whether the normalised URL string of a stored key belongs to this endpoint.
    func matches(normalizedURL: String) -> Bool {
        if case .url(let expected) = kind { return normalizedURL == expected }
        guard let url = URL(string: normalizedURL) else { return false }
        return matches(url)
    }
}
