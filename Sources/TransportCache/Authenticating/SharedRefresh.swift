/// One refresh that any number of requests wait for, cancelled when every one of them has left.
///
/// Once left by every waiter, or ended (``end()``), it is no longer live: a request arriving then
/// is not kept waiting for a refresh that is winding down, and is told to ask again.
final class SharedRefresh: Sendable {
    private struct State: Sendable {
        var result: Result<Void, any Error>?
        var waiters: [Int: CheckedContinuation<Void, any Error>] = [:]
        var nextID = 0
        var task: Task<Void, Never>?
        /// Every waiter left, or the credential it refreshes was replaced.
        var isOver = false
    }

    private let state = Locked(State())

    /// Whether a request may still wait for it: it has not finished, been left by every waiter or
    /// been ended.
    var isLive: Bool {
        state.withLock { $0.result == nil && !$0.isOver }
    }

    /// Runs `body` as the refresh, in a task of its own.
    func start(_ body: @escaping @Sendable () async throws -> Void) {
        let task = Task {
            let result: Result<Void, any Error>
            do {
                try await body()
                result = .success(())
            } catch {
                result = .failure(error)
            }
            let waiters = state.withLock { state in
                state.result = result
                defer { state.waiters = [:] }
                return Array(state.waiters.values)
            }
            for waiter in waiters { waiter.resume(with: result) }
        }
        let cancelled = state.withLock { state in
            state.task = task
            return state.isOver
        }
        if cancelled { task.cancel() }
    }

    /// Ends the refresh: the credential it refreshes was replaced. Its waiters get
    /// `CancellationError` without being cancelled themselves, which tells them to ask again.
    func end() {
        let (waiters, task) = state.withLock { state in
            state.isOver = true
            defer { state.waiters = [:] }
            return (Array(state.waiters.values), state.task)
        }
        task?.cancel()
        for waiter in waiters { waiter.resume(throwing: CancellationError()) }
    }

    /// Returns when the refresh has succeeded, throws its error when it failed, and
    /// `CancellationError` at once when the calling task is cancelled or the refresh is no longer
    /// live; the refresh is cancelled when no one is left waiting for it.
    func wait() async throws {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let now = state.withLock { state -> Result<Void, any Error>? in
                    if let result = state.result { return result }
                    // Over, or never waited: leaving abandons nothing, even when no one waits yet
                    // (its starter may be about to).
                    if state.isOver || Task.isCancelled { return .failure(CancellationError()) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let now { continuation.resume(with: now) }
            }
        } onCancel: {
            let (waiter, abandoned) = state.withLock {
                state -> (CheckedContinuation<Void, any Error>?, Task<Void, Never>?) in
                let waiter = state.waiters.removeValue(forKey: id)
                guard waiter != nil, state.waiters.isEmpty, state.result == nil else { return (waiter, nil) }
                state.isOver = true
                return (waiter, state.task)
            }
            waiter?.resume(throwing: CancellationError())
            abandoned?.cancel()
        }
    }
}
