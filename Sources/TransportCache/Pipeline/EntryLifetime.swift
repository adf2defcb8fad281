/// How long a stored entry stays fresh, and what may be done with it once it is stale: what the
/// ``FreshnessPolicy`` gives an answer when it is stored.
struct EntryLifetime: Sendable {
    /// From the moment it is stored; nil keeps it fresh until it is invalidated or evicted. Zero
    /// or less: stale at once.
    var freshFor: Duration?
    /// How long past ``freshFor`` it still answers while it is revalidated in the background.
    var staleWindow: Duration?
    /// Its age when stored (RFC 9111 section 4.2.3), when the transport follows HTTP caching:
    /// answers from it then carry a generated `Age`.
    var initialAge: Duration?
    /// `no-cache` or `must-revalidate`: never answered stale, not even when the network fails.
    var mustRevalidate = false
}
