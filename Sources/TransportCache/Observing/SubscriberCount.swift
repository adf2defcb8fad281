/// How many `changes()` streams (``CachedTransport/changes(for:)`` and `values` streams
/// included) are registered, told by their registry each time it changes, for a test to wait on
/// with ``wait(until:)`` (TransportCacheTesting offers it to tests).
///
/// Costs one lock per registration and per unregistration; nothing on a request's path.
package final class SubscriberCount: Sendable {
    private let state = Locked(WatchedCount(), rank: .leaf)

    package init() {}

    /// The registry's new count. - Returns: the waiters it lets through, to resume once the
    /// registry's lock is released.
    package func update(_ count: Int) -> [CheckedContinuation<Void, Never>] {
        state.withLock { $0.set(count) }
    }

    /// Returns once the count satisfies `reached`, at once when it does already. It waits as long
    /// as it takes.
    package func wait(until reached: @escaping @Sendable (Int) -> Bool) async {
        await withCheckedContinuation { continuation in
            if !state.withLock({ $0.watch(until: reached, continuation) }) { continuation.resume() }
        }
    }
}

extension CachedTransport {
    /// Returns once exactly `count` `changes()` streams (those of `changes(for:)` and `values`
    /// included) are registered: for tests, through TransportCacheTesting.
    package nonisolated func waitForSubscribers(_ count: Int) async {
        await broadcaster.subscriberCount.wait { $0 == count }
    }
}
