/// Counters of what a ``CachedTransport`` did since it was made.
///
/// Read them with ``CachedTransport/statistics``: each read is a consistent snapshot.
public struct CacheStatistics: Sendable, Hashable {
    /// Calls of `data(for:)`, `data(from:)`, `refresh(_:)` and `value(_:for:decoder:)`, whatever
    /// their outcome.
    public var requests = 0
    /// Requests answered from memory without touching the network.
    public var memoryHits = 0
    /// Requests sent to the origin (one per coalesced group, one per pass-through request).
    public var networkFetches = 0
    /// Requests that joined a fetch already in flight instead of starting their own.
    public var coalescedJoins = 0
    /// Responses written into the store.
    public var stores = 0
    /// Responses returned to their callers but not stored because they exceed the largest entry
    /// the configuration allows.
    public var rejectedTooLarge = 0
    /// Entries pushed out, least recently used first, to keep the byte budget.
    public var evictions = 0
    /// Entries dropped by invalidation (explicit, by endpoint, all, or by an unsafe request).
    public var invalidations = 0
    /// Answers served from a stored entry because the fetch failed with a connectivity error
    /// (see ``CachedTransport/Configuration/staleIfError``).
    public var staleAnswers = 0
    /// Bodies decoded by ``CachedTransport/value(_:for:decoder:)`` and
    /// ``CachedTransport/values(_:for:decoder:)``, successfully or not: at most one per stored
    /// entry, type and decoder, however many callers asked.
    public var decodes = 0
    /// Values handed out already decoded, without decoding again.
    public var decodedHits = 0
    /// Bytes the store holds: bodies, decoded values (see ``CachedTransport/value(_:for:decoder:)``)
    /// and a per-entry overhead, never above the memory capacity.
    public var bytesHeld = 0
    /// Entries the store holds.
    public var entries = 0
    /// Streams from ``CachedTransport/changes()`` and ``CachedTransport/changes(for:)`` still
    /// registered.
    public var subscribers = 0

    /// Counters that are all zero.
    public init() {}
}
