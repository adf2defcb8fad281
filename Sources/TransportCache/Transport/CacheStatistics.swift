/// Counters of what a ``CachedTransport`` did since it was made.
///
/// Read them with ``CachedTransport/statistics``: each read is a consistent snapshot.
public struct CacheStatistics: Sendable, Hashable {
    /// Calls of `data(for:)`, `data(from:)`, `refresh(_:)` and `value(_:for:decoder:)`, whatever
    /// their outcome.
    public var requests = 0
    /// Requests answered from memory without touching the network.
    public var memoryHits = 0
    /// Requests sent to the origin: one per coalesced group and per pass-through request, and one
    /// more for each retry, each resend after a refused credential and each request a credential's
    /// refresh makes through the transport. Counted as each is handed to the network, so a request
    /// that never goes out (its caller left while it waited for its turn, or it could not be
    /// authenticated) is not counted.
    public var networkFetches = 0
    /// Requests that joined a fetch already in flight instead of starting their own.
    public var coalescedJoins = 0
    /// Responses written into the store.
    public var stores = 0
    /// Responses returned to their callers but not stored because they exceed the largest entry
    /// the configuration allows.
    public var rejectedTooLarge = 0
    /// Entries pushed out, least recently used first, to keep the byte budget (for an answer
    /// stored or a decoded value kept) or to give memory back on a ``CachedTransport/trim(for:)``,
    /// and variants dropped to keep their URL within
    /// ``CachedTransport/Configuration/Storage/maximumVariants``.
    public var evictions = 0
    /// Entries dropped by invalidation (explicit, by endpoint, all, or by an unsafe request), and
    /// variants taken out on their own: a provisional answer a failed update takes back, or an
    /// entry a `304` says may no longer be stored.
    public var invalidations = 0
    /// Answers served from a stored entry because the fetch failed with a connectivity error
    /// (see ``CachedTransport/Configuration/Freshness/staleIfError``).
    public var staleAnswers = 0
    /// Conditional requests sent to revalidate a stored entry (`If-None-Match` /
    /// `If-Modified-Since`; see ``CachedTransport/Configuration/Freshness/usesConditionalRequests``).
    public var conditionalRequests = 0
    /// `304 Not Modified` answers taken: the stored body was kept, its headers updated and its
    /// age restarted, and the callers got it with status 200.
    public var notModified = 0
    /// Requests answered at once from an entry past its maximum age but within its
    /// stale-while-revalidate window (also counted in ``memoryHits``).
    public var staleWindowAnswers = 0
    /// Revalidations started in the background by a stale-window answer; at most one per key at
    /// a time.
    public var backgroundRevalidations = 0
    /// Background revalidations that failed (a network error, or a status that is not stored).
    /// The entry is kept and no caller sees the failure.
    public var failedBackgroundRevalidations = 0
    /// Entries the transport revalidated on its own: ``CachedTransport/revalidate(_:)``,
    /// ``CachedTransport/revalidateAll()``, ``CachedTransport/revalidateWatched()`` and polls
    /// (``CachedTransport/Configuration/StayingCurrent/refreshIntervals``), whether they started a fetch or
    /// shared one in flight.
    public var revalidations = 0
    /// Attempts made again after a failure, as the ``CachedTransport/Configuration/Network/retryPolicy``
    /// says: a shared fetch tried three times counts two, however many callers it has.
    public var retries = 0
    /// Requests that carried their own conditions or range (`If-None-Match`, `If-Modified-Since`,
    /// `If-Match`, `If-Unmodified-Since`, `If-Range`, `Range`) or `Cache-Control: no-store`, and
    /// so went to the origin as sent, past the store and coalescing.
    public var bypasses = 0
    /// Bodies decoded by ``CachedTransport/value(_:for:decoder:)`` and
    /// ``CachedTransport/values(_:for:decoder:)``, successfully or not: at most one per stored
    /// entry, type and decoder settings, however many callers asked.
    public var decodes = 0
    /// Values handed out already decoded, without decoding again.
    public var decodedHits = 0
    /// Decoded values dropped while their entry stayed: the entry's least recently used ones,
    /// beyond ``CachedTransport/Configuration/Storage/maximumDecodedValuesPerEntry``, and every one on a
    /// ``CachedTransport/trim(for:)``. A count that keeps growing means decoders with settings
    /// that cannot be compared are made per call (see ``ResponseDecoding``).
    public var decodedEvictions = 0
    /// Trims for memory pressure: ``CachedTransport/trim(for:)`` calls, including those the
    /// system's memory warnings make on Apple platforms.
    public var trims = 0
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
