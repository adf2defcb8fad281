import TransportCache

extension CachedTransport {
    /// Returns once exactly `count` streams of `changes()` are registered, those
    /// of `changes(for:)` and `values(_:for:decoder:)`
    /// included: a stream whose consumer stopped has then let go of the transport. At once when
    /// that many are registered now; otherwise as long as it takes.
    ///
    /// ```swift
    /// consumer.cancel()
    /// await transport.waitForChangeSubscribers(0)
    /// ```
    public nonisolated func waitForChangeSubscribers(_ count: Int) async {
        await waitForSubscribers(count)
    }
}

extension CachedTransport {
    /// Returns once `statistics.coalescedJoins` has reached `count`: requests that joined a fetch
    /// already in flight. At once when it has already; otherwise as long as it takes.
    ///
    /// For callers a test cannot start up to their join with ``startCalls(_:_:)``: those that run
    /// in a task of their own, such as the revalidations `revalidateAll()` starts.
    ///
    /// ```swift
    /// let revalidation = Task { await transport.revalidateAll() }
    /// await transport.waitForCoalescedJoins(1)
    /// origin.openGate()
    /// ```
    public nonisolated func waitForCoalescedJoins(_ count: Int) async {
        await waitForJoins(count)
    }
}
