import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CachedTransport {
    /// Drops what is stored for `request`'s key (every `Vary` variant of it), and announces it
    /// (``CacheChange/invalidated(urls:endpoint:)``); a key that holds nothing announces nothing.
    ///
    /// The request is keyed as ``data(for:)`` keys it (the keyed adapters, the account of the
    /// current credential), so the plain request a screen holds finds its entry. A fetch for the
    /// same key that is in flight still answers its callers, but does not write its (possibly
    /// stale) answer into the store, and later requests do not join it. A request that cannot be
    /// keyed (an adapter throws, another scheme) drops nothing. Runs on the caller's thread,
    /// without waiting for the actor.
    public nonisolated func invalidate(_ request: URLRequest) {
        guard let keyed = try? keyed(request), let key = planner.storedKey(of: keyed.request, account: keyed.account)
        else { return }
        committer.invalidate(.keys([key]))
    }

    /// Drops every stored entry whose URL belongs to `endpoint`, for every method and identity,
    /// and announces the URLs dropped, with `endpoint`; an endpoint that matches nothing stored
    /// announces nothing. Runs on the caller's thread, without waiting for the actor.
    ///
    /// The transport keeps its keys by host and path, so an exact URL, a host or a path prefix
    /// finds its entries without looking at the others. A hit on another task waits at most for
    /// a few removals (about 50 µs of them), never for the whole invalidation.
    /// - Complexity: O(k) in the entries dropped for an exact URL, a host or a path prefix (plus
    ///   O(h) in the hosts held for a prefix on every host); O(n) in the stored entries for a
    ///   predicate, asked without holding the lock a hit takes.
    public nonisolated func invalidate(_ endpoint: Endpoint) {
        committer.invalidate(.endpoint(endpoint), endpoint: endpoint)
    }

    /// Drops every stored entry whose request was given `tag` (``data(for:tags:)``), across URLs,
    /// methods and identities, and announces the URLs dropped. A fetch of such an entry in flight
    /// still answers its callers but does not store. A tag that names nothing changes nothing and
    /// announces nothing. Runs on the caller's thread, without waiting for the actor.
    /// - Returns: how many entries were dropped.
    /// - Complexity: O(k) in the entries the tag names, whatever else is stored.
    @discardableResult
    public nonisolated func invalidate(tag: String) -> Int {
        committer.invalidate(.tag(tag)).keys.count
    }

    /// Drops every stored entry, and announces ``CacheChange/cleared`` (nothing when the store was
    /// empty). Fetches in flight still answer their callers but store nothing. Runs on the
    /// caller's thread, without waiting for the actor.
    ///
    /// The entries are taken out at once and released after the transport's locks, when there are
    /// many on a queue that frees them a slice at a time, so neither the caller nor a hit on
    /// another task waits for the memory to be freed; memory comes back over about two seconds
    /// per 100,000 entries.
    /// - Complexity: O(f) in the fetches in flight, whatever is stored.
    public nonisolated func invalidateAll() {
        committer.remove(.everything)
    }

    /// Invalidation after a successful unsafe request (RFC 9111 section 4.4): its URL, and the URLs
    /// in `Location` and `Content-Location` when they are on the same origin (another origin's
    /// entries are not the sender's to drop). Announces the URLs it dropped.
    nonisolated func invalidateTargets(of url: URL, response: HTTPURLResponse) {
        var targets: Set<String> = []
        if let target = URLNormalization.normalized(url) { targets.insert(target) }
        for field in ["location", "content-location"] {
            guard let value = response.headerValue(field),
                let location = URL(string: value, relativeTo: url),
                location.host?.lowercased() == url.host?.lowercased(),
                location.scheme?.lowercased() == url.scheme?.lowercased(),
                location.port == url.port,
                let normalized = URLNormalization.normalized(location.absoluteURL)
            else { continue }
            targets.insert(normalized)
        }
        committer.invalidate(.urls(targets), sparingPendingUpdates: true)
    }

    /// Gives memory back when the system is short of it, as `NSCache` and `URLCache` do.
    ///
    /// - ``MemoryPressure/warning`` drops every decoded value (the bytes stay, and the next
    ///   ``value(_:for:decoder:)`` decodes again) and then the least recently used entries until
    ///   the store holds at most half of ``Configuration/Storage/memoryCapacity``.
    /// - ``MemoryPressure/critical`` empties the store.
    ///
    /// What is dropped is announced like an invalidation, so that screens watching those URLs
    /// reload: ``CacheChange/invalidated(urls:endpoint:)`` naming the removed URLs (with no
    /// endpoint) after a warning, ``CacheChange/cleared`` after a critical trim. A trim that
    /// removes no entry announces nothing. Removed entries count as
    /// ``CacheStatistics/evictions``, dropped values as ``CacheStatistics/decodedEvictions``.
    ///
    /// Fetches in flight are not touched: their callers get their answers, and a fetch that ends
    /// after the trim stores its answer as usual, since a trim is about memory, not freshness,
    /// and that answer is what a screen is about to show. Decodes under way likewise finish for
    /// their callers.
    ///
    /// On Apple platforms the transport calls this itself on the system's memory pressure events
    /// (``Configuration/Storage/respondsToMemoryPressure``); elsewhere, or to free memory at other moments
    /// (a tab closed, the app sent to the background), call it yourself. It runs on the caller's
    /// thread without waiting for the actor.
    ///
    /// What a trim drops is freed after the transport's locks: what a warning drops a slice at a
    /// time on a queue shared by every transport; at a critical level, what it drops and what
    /// earlier invalidations left there to free, in one go.
    ///
    /// - Complexity: O(n) in the number of stored entries, a few at a time under the lock a hit
    ///   takes; a critical trim takes the entries out at once.
    public nonisolated func trim(for pressure: MemoryPressure) {
        committer.remove(.pressure(pressure))
    }
}
