/// Where a query stands with its value: ``CachedQuery/status``, and each page's of a
/// ``CachedPagedQuery``.
public enum QueryStatus: Sendable, Hashable {
    /// Nothing shown and nothing fetching: a query stopped before its first answer.
    case idle
    /// The first fetch is under way; nothing to show yet.
    case loading
    /// The last answer gave a value.
    case loaded
    /// The last answer failed: the query's error says why; its value keeps the last good one, if
    /// any.
    case failed
}
