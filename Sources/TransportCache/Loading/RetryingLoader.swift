import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A loader that tries a failed `GET` or `HEAD` again as its ``RetryPolicy`` says: the one place
/// retries are made. Every load the transport starts goes through it, so a shared fetch, which is
/// one load, has one sequence of attempts, and cancelling the load ends the sequence.
struct RetryingLoader: NetworkLoading {
    let inner: any NetworkLoading
    let policy: RetryPolicy
    let clock: CacheClock
    /// Told of each retry before its wait: the request, the attempt to come (from 2) and the wait.
    let willRetry: @Sendable (URLRequest, Int, Duration) -> Void

    func load(_ request: URLRequest) async throws -> (Data, URLResponse) {
        guard RetryPolicy.retries(method: request.httpMethod) else { return try await inner.load(request) }
        var attempt = 1
        while true {
            let result: Result<(Data, URLResponse), any Error>
            do {
                result = .success(try await inner.load(request))
            } catch {
                result = .failure(error)
            }
            try Task.checkCancellation()
            guard let delay = nextDelay(after: result, attempt: attempt) else { return try result.get() }
            attempt += 1
            willRetry(request, attempt, delay)
            try await clock.sleep(for: delay)
        }
    }

    func start(
        _ request: URLRequest, completion: @escaping @Sendable (Result<(Data, URLResponse), any Error>) -> Void
    ) -> any NetworkLoad {
        guard RetryPolicy.retries(method: request.httpMethod) else {
            return inner.start(request, completion: completion)
        }
        let load = RetryingLoad(request: request, loader: self, completion: completion)
        load.attempt()
        return load
    }

    /// The wait before the next attempt, or nil when `result` is final.
    fileprivate func nextDelay(after result: Result<(Data, URLResponse), any Error>, attempt: Int) -> Duration? {
        policy.delay(after: result, attempt: attempt, now: clock.date, random: Double.random(in: 0...1))
    }
}

/// The attempts of one load: the current one, or the wait before the next.
///
/// `@unchecked Sendable` is safe here: its mutable state is only read or written under `state`'s lock.
private final class RetryingLoad: NetworkLoad, @unchecked Sendable {
    private struct State {
        var attempt = 0
        var current: (any NetworkLoad)?
        var waiting: Task<Void, Never>?
        var isCancelled = false
    }

    private let request: URLRequest
    private let loader: RetryingLoader
    private let completion: @Sendable (Result<(Data, URLResponse), any Error>) -> Void
    private let state = Locked(State())

    init(
        request: URLRequest, loader: RetryingLoader,
        completion: @escaping @Sendable (Result<(Data, URLResponse), any Error>) -> Void
    ) {
        self.request = request
        self.loader = loader
        self.completion = completion
    }

    /// Starts the next attempt, unless the load was cancelled meanwhile.
    func attempt() {
        let started = state.withLock { state -> Bool in
            guard !state.isCancelled else { return false }
            state.attempt += 1
            state.waiting = nil
            return true
        }
        guard started else {
            completion(.failure(URLError(.cancelled)))
            return
        }
        let load = loader.inner.start(request) { result in self.ended(with: result) }
        let cancelled = state.withLock { state -> Bool in
            if !state.isCancelled { state.current = load }
            return state.isCancelled
        }
        if cancelled { load.cancel() }
    }

    private func ended(with result: Result<(Data, URLResponse), any Error>) {
        let (attempt, isCancelled) = state.withLock { state in
            state.current = nil
            return (state.attempt, state.isCancelled)
        }
        guard !isCancelled, let delay = loader.nextDelay(after: result, attempt: attempt) else {
            completion(result)
            return
        }
        loader.willRetry(request, attempt + 1, delay)
        let clock = loader.clock
        let waiting = Task {
            // Cancelled only by `cancel()`, which the next `attempt()` then reports.
            try? await clock.sleep(for: delay)
            self.attempt()
        }
        let cancelled = state.withLock { state -> Bool in
            if !state.isCancelled { state.waiting = waiting }
            return state.isCancelled
        }
        if cancelled { waiting.cancel() }
    }

    func cancel() {
        let (current, waiting) = state.withLock { state in
            state.isCancelled = true
            return (state.current, state.waiting)
        }
        current?.cancel()
        waiting?.cancel()
    }
}
