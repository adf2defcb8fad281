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
