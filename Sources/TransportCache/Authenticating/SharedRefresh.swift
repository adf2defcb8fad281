/// One refresh that any number of requests wait for, cancelled when every one of them has left.
final class SharedRefresh: Sendable {
    private struct State: Sendable {
        var result: Result<Void, any Error>?
        var waiters: [Int: CheckedContinuation<Void, any Error>] = [:]
        var nextID = 0
        var task: Task<Void, Never>?
    }

    private let state = Locked(State())

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
        state.withLock { $0.task = task }
    }

    /// Returns when the refresh has succeeded, throws its error when it failed, and
    /// `CancellationError` at once when the calling task is cancelled; the refresh is cancelled
    /// when no one is left waiting for it.
    func wait() async throws {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let now = state.withLock { state -> (Result<Void, any Error>, Task<Void, Never>?)? in
                    if let result = state.result { return (result, nil) }
                    if Task.isCancelled {
                        return (.failure(CancellationError()), state.waiters.isEmpty ? state.task : nil)
                    }
                    state.waiters[id] = continuation
                    return nil
                }
                if let (result, abandoned) = now {
                    abandoned?.cancel()
                    continuation.resume(with: result)
                }
            }
        } onCancel: {
            let (waiter, abandoned) = state.withLock { state in
                let waiter = state.waiters.removeValue(forKey: id)
                return (waiter, waiter != nil && state.waiters.isEmpty ? state.task : nil)
            }
            waiter?.resume(throwing: CancellationError())
            abandoned?.cancel()
        }
    }
}
