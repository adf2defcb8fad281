import Foundation

/// A change of what a ``CachedTransport`` holds, delivered by ``CachedTransport/changes()``.
///
/// URLs are in the transport's normal form: scheme and host lowercased, the default port and the
/// fragment dropped.
public enum CacheChange: Sendable, Hashable {
    /// A store changed the bytes held for `url`: a first store, or a refresh or reload that brought
    /// different bytes. A refresh that brings the same bytes is not a change.
    case updated(URL)
    /// Entries were dropped. `urls` names the URLs dropped (for an explicit request or an unsafe
    /// request, its URLs whether or not something was stored); `endpoint` is set when the
    /// invalidation was by ``Endpoint``.
    case invalidated(urls: [URL], endpoint: Endpoint?)
    /// Every entry was dropped.
    case cleared

    /// The part of this change that concerns `endpoint`, or nil when none does.
    func filtered(by endpoint: Endpoint) -> CacheChange? {
        switch self {
        case .updated(let url):
            return endpoint.matches(url) ? self : nil
        case .invalidated(let urls, let by):
            let matching = urls.filter(endpoint.matches)
            return matching.isEmpty ? nil : .invalidated(urls: matching, endpoint: by)
        case .cleared:
            return self
        }
    }
}
