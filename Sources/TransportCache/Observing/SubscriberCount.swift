/// How many `changes()` streams (``CachedTransport/changes(for:)`` and `values` streams
/// included) are registered, told by their registry each time it changes, for a test to wait on
/// with ``wait(until:)`` (TransportCacheTesting offers it to tests).
///
/// Costs one lock per registration and per unregistration; nothing on a request's path.
package final class SubscriberCount: Sendable {
    private struct State {
        var count = 0
        var waiters: [(reached: @Sendable (Int) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Locked(State())

    package init() {}

    /// The registry's new count.
    package func update(_ count: Int) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.count = count
            guard !state.waiters.isEmpty else { return [] }
            let ready = state.waiters.filter { $0.reached(count) }.map(\.continuation)
            state.waiters.removeAll { $0.reached(count) }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// Returns once the count satisfies `reached`, at once when it does already. It waits as long
    /// as it takes.
    package func wait(until reached: @escaping @Sendable (Int) -> Bool) async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                if reached(state.count) { return true }
                state.waiters.append((reached, continuation))
                return false
            }
            if now { continuation.resume() }
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
