import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CachedTransport {
    /// Drops the stored entry `request` would be answered from.
    ///
    /// A fetch for the same key that is in flight still answers its callers, but does not write
    /// its (possibly stale) answer into the store, and later requests do not join it.
    public func invalidate(_ request: URLRequest) {
        guard let url = request.url,
            let key = CacheKey(
                method: request.httpMethod ?? "GET", url: url, headers: request.allHTTPHeaderFields,
                keyHeaders: keyHeaders)
        else { return }
        inFlight.withLock { state in
            state.detach { $0 == key }
            store.remove(key)
            broadcaster.publish(.invalidated(urls: [URL(string: key.url) ?? url], endpoint: nil))
        }
    }

    /// Drops every stored entry whose URL belongs to `endpoint`, for every method and identity.
    /// - Complexity: O(n) in the number of stored entries.
    public func invalidate(_ endpoint: Endpoint) {
        inFlight.withLock { state in
            state.detach { endpoint.matches(normalizedURL: $0.url) }
            let removed = store.removeAll { endpoint.matches(normalizedURL: $0.url) }
            broadcaster.publish(.invalidated(urls: Self.urls(of: removed.map(\.url)), endpoint: endpoint))
        }
    }

    /// Drops every stored entry.
    public func invalidateAll() {
        inFlight.withLock { state in
            state.detach { _ in true }
            store.removeAllCachedResponses()
            broadcaster.publish(.cleared)
        }
    }

    /// Invalidation after a successful unsafe request (RFC 9111 section 4.4): its URL, and the URLs
    /// in `Location` and `Content-Location` when they are on the same origin (another origin's
    /// entries are not the sender's to drop).
    func invalidateTargets(of url: URL, response: HTTPURLResponse) {
        var targets: Set<String> = []
        if let target = URLNormalization.normalized(url) { targets.insert(target) }
        for field in ["Location", "Content-Location"] {
            guard let value = response.value(forHTTPHeaderField: field),
                let location = URL(string: value, relativeTo: url),
                location.host?.lowercased() == url.host?.lowercased(),
                location.scheme?.lowercased() == url.scheme?.lowercased(),
                location.port == url.port,
                let normalized = URLNormalization.normalized(location.absoluteURL)
            else { continue }
            targets.insert(normalized)
        }
        let doomed = targets
        inFlight.withLock { state in
            state.detach { doomed.contains($0.url) }
            _ = store.removeAll { doomed.contains($0.url) }
            broadcaster.publish(.invalidated(urls: Self.urls(of: doomed), endpoint: nil))
        }
    }

    /// Distinct URLs of normalised URL strings, in a stable order.
    static func urls(of normalized: some Sequence<String>) -> [URL] {
        Set(normalized).sorted().compactMap { URL(string: $0) }
    }
}
