import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLResponse {
    /// True when a ``CachedTransport`` answered with a stored entry that is not fresh: because
    /// the network failed (``CachedTransport/Configuration/Freshness/staleIfError``), or from within the
    /// stale-while-revalidate window (``CachedTransport/Configuration/Freshness/staleWhileRevalidate``,
    /// see ``isRevalidatingAnswer``).
    public var isStaleAnswer: Bool {
        (self as? HTTPURLResponse)?.value(forHTTPHeaderField: CachedTransport.staleHeaderField) != nil
    }

    /// True when a ``CachedTransport`` answered from within the stale-while-revalidate window:
    /// the stored answer, past its maximum age, while a background revalidation brings the entry
    /// up to date. Watch ``CachedTransport/changes()`` (or use
    /// ``CachedTransport/values(_:for:decoder:)``) to get the new bytes when they differ.
    public var isRevalidatingAnswer: Bool {
        (self as? HTTPURLResponse)?.value(forHTTPHeaderField: CachedTransport.staleHeaderField)
            == CachedTransport.revalidatingStaleValue
    }
}
