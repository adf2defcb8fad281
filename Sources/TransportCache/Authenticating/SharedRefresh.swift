/// One refresh of an account's credential that any number of requests wait for.
///
/// Once started it runs to its end: it is never cancelled, neither when every waiter leaves nor
/// when the credential it refreshes is replaced. It runs the app's code (the authenticator's
/// refresh, often an `await` on `URLSession.data(for:)`), and on Linux cancelling a task inside
/// that await can deadlock the process (swift-corelibs-foundation 5412); and an authorization
/// server that rotates refresh tokens has usually received the request already, so the only
/// answer worth having is this refresh's own.
final class SharedRefresh: Sendable {
    private struct State: Sendable {
        var result: Result<Void, any Error>?
        var waiters: [Int: CheckedContinuation<Void, any Error>] = [:]
        var nextID = 0
        /// How many times ``releaseWaiters()`` let its waiters go.
        var releases = 0
    }

    private let state = Locked(State())

    /// Runs `body` as the refresh, in a task of its own that is never cancelled, then hands its
    /// result to every waiter.
    func start(_ body: @escaping @Sendable () async throws -> Void) {
        Task {
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
    }

    /// Tells the requests waiting now to ask again (they throw ``AskAgain``): the credential it
    /// refreshes was replaced or signed out, so its result is no longer theirs to wait for. The
    /// refresh itself goes on; a request arriving later waits for its end as usual.
    func releaseWaiters() {
        let waiters = state.withLock { state in
            state.releases += 1
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(throwing: AskAgain()) }
    }

    /// How many times ``releaseWaiters()`` has let its waiters go: read with the account's lock
    /// held, which ``releaseWaiters()``'s callers take first, and given to ``wait(releasedAfter:)``.
    var releases: Int { state.withLock { $0.releases } }

    /// Returns once the refresh has ended (throwing its error when it failed); throws
    /// `CancellationError` at once when the calling task is cancelled, and ``AskAgain`` when
    /// ``releaseWaiters()`` lets it go, or has let its waiters go since ``releases`` was
    /// `released` (a waiter that read the account just before it was ended or replaced). Leaving
    /// never cancels the refresh.
    func wait(releasedAfter released: Int) async throws {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let now = state.withLock { state -> Result<Void, any Error>? in
                    if let result = state.result { return result }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if state.releases != released { return .failure(AskAgain()) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let now { continuation.resume(with: now) }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(throwing: CancellationError())
        }
    }
}

/// Thrown to a request waiting for a refresh whose credential was replaced or signed out: it reads
/// the account's state again.
struct AskAgain: Error {}
