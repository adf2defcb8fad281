import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CachedTransport {
    /// Gives memory back when the system is short of it, as `NSCache` and `URLCache` do.
    ///
    /// - ``MemoryPressure/warning`` drops every decoded value (the bytes stay, and the next
    ///   ``value(_:for:decoder:)`` decodes again) and then the least recently used entries until
    ///   the store holds at most half of ``Configuration/memoryCapacity``.
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
    /// (``Configuration/respondsToMemoryPressure``); elsewhere, or to free memory at other moments
    /// (a tab closed, the app sent to the background), call it yourself. It runs on the caller's
    /// thread without waiting for the actor.
    ///
    /// - Complexity: O(n) in the number of stored entries.
    public nonisolated func trim(for pressure: MemoryPressure) {
        Self.trim(for: pressure, store: store, inFlight: inFlight, broadcaster: broadcaster)
    }

    /// The trim, on the parts of a transport it touches, so that the system's memory pressure
    /// handler can run it without keeping the transport alive.
    static func trim(
        for pressure: MemoryPressure,
        store: MemoryURLCache,
        inFlight: Locked<InFlight>,
        broadcaster: ChangeBroadcaster
    ) {
        // Under the in-flight lock, as every change to the store is made and announced, so that
        // the announcement takes its place among them in order.
        inFlight.withLock { _ in
            let removed = store.trim(for: pressure)
            guard !removed.isEmpty else { return }
            switch pressure {
            case .warning: broadcaster.publish(.invalidated(urls: urls(of: removed.map(\.url)), endpoint: nil))
            case .critical: broadcaster.publish(.cleared)
            }
        }
    }
}
