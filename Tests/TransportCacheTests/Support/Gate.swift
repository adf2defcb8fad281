@testable import TransportCache

/// Holds whoever waits until it opens; counts those that left because their task was cancelled.
final class Gate: Sendable {
    private struct State {
        var isOpen = false
        var waiting: [Int: CheckedContinuation<Void, any Error>] = [:]
        var next = 0
        var cancelled = 0
        var arrivals = WatchedCount()
        var cancellations = WatchedCount()
    }

    private let state = Locked(State())

    var cancelled: Int { state.withLock { $0.cancelled } }

    func open() {
        let waiting = state.withLock { state in
            state.isOpen = true
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for continuation in waiting { continuation.resume() }
    }

    /// Returns once `count` callers have arrived at the gate, held or let through.
    func waitForArrivals(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let watching = state.withLock { $0.arrivals.watch(until: { $0 >= count }, continuation) }
            if !watching { continuation.resume() }
        }
    }

    /// Returns once `count` waiters have left because their task was cancelled.
    func waitForCancellations(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let watching = state.withLock { $0.cancellations.watch(until: { $0 >= count }, continuation) }
            if !watching { continuation.resume() }
        }
    }

    func wait() async throws {
        let id = state.withLock { state in
            defer { state.next += 1 }
            return state.next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (pass, arrived) = state.withLock { state in
                    let arrived = state.arrivals.count()
                    if state.isOpen { return (true, arrived) }
                    state.waiting[id] = continuation
                    return (false, arrived)
                }
                for waiter in arrived { waiter.resume() }
                if pass { continuation.resume() }
            }
        } onCancel: {
            let continuation = state.withLock { state in
                let continuation = state.waiting.removeValue(forKey: id)
                var watchers: WatchedCount.Watchers = []
                if continuation != nil {
                    state.cancelled += 1
                    watchers = state.cancellations.count()
                }
                return (continuation, watchers)
            }
            continuation.0?.resume(throwing: CancellationError())
            for watcher in continuation.1 { watcher.resume() }
        }
    }
}
