import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A request fetched ahead of the screen that will show it (``CachedTransport/prefetch(_:priority:)``):
/// cancel it when the row scrolls away, raise its priority when the row comes into view.
///
/// A prefetch is one caller of its fetch, like a screen's: when a screen asks for the same
/// request meanwhile, it joins the fetch, which then goes at the screen's priority; cancelling the
/// prefetch cancels the fetch only when no other caller waits on it. Dropping the handle does not
/// cancel it.
public final class Prefetch: Sendable {
    /// How a prefetch ended.
    public enum Outcome: Sendable, CustomStringConvertible {
        /// A fresh answer was already stored: nothing was sent, and the entry was left as it was.
        case alreadyStored
        /// Its fetch (its own, or one it joined) answered; the answer is stored when it may be.
        case loaded
        /// It was cancelled before its answer arrived.
        case cancelled
        /// Its fetch failed with this error.
        case failed(any Error)

        /// A short phrase: "loaded", "cancelled" …
        public var description: String {
            switch self {
            case .alreadyStored: "already stored"
            case .loaded: "loaded"
            case .cancelled: "cancelled"
            case .failed(let error): "failed: \(error)"
            }
        }
    }

    /// The request prefetched, as the app gave it.
    public let request: URLRequest

    private struct State {
        var priority: FetchPriority
        var outcome: Outcome?
        var watchers: [CheckedContinuation<Outcome, Never>] = []
        /// Its caller in the transport's fetches, until it ends.
        var waiter: Waiter?
        var transport: CachedTransport?
    }

    private let state: Locked<State>

    init(request: URLRequest, priority: FetchPriority, outcome: Outcome? = nil) {
        self.request = request
        state = Locked(State(priority: priority, outcome: outcome))
    }

    /// How soon its fetch goes, while it waits for room on its host and while it runs (see
    /// ``FetchPriority``). Setting it after the prefetch ended does nothing: it keeps the priority
    /// it ended with.
    public var priority: FetchPriority {
        get { state.withLock { $0.priority } }
        set {
            guard
                let (waiter, transport) = state.withLock({ state -> (Waiter, CachedTransport)? in
                    guard state.outcome == nil, let waiter = state.waiter, let transport = state.transport else {
                        return nil
                    }
                    state.priority = newValue
                    return (waiter, transport)
                })
            else { return }
            transport.reprioritize(waiter, to: newValue)
        }
    }

    /// Cancels the prefetch. Its fetch is cancelled too (never sent, when it still waits for its
    /// host) unless another caller waits on it. Cancelling twice, or after the prefetch ended, does
    /// nothing.
    public func cancel() {
        guard
            let (waiter, transport) = state.withLock({ state -> (Waiter, CachedTransport)? in
                guard state.outcome == nil, let waiter = state.waiter, let transport = state.transport else {
                    return nil
                }
                return (waiter, transport)
            })
        else { return }
        transport.cancelWaiter(waiter)
    }

    /// How it ended, once it has: waits for its end.
    public var outcome: Outcome {
        get async {
            await withCheckedContinuation { continuation in
                let outcome = state.withLock { state -> Outcome? in
                    if state.outcome == nil { state.watchers.append(continuation) }
                    return state.outcome
                }
                if let outcome { continuation.resume(returning: outcome) }
            }
        }
    }

    /// Whether it has ended.
    public var isFinished: Bool { state.withLock { $0.outcome != nil } }

    /// Its caller `waiter` arrives at `transport`'s fetches.
    func attach(_ waiter: Waiter, to transport: CachedTransport) {
        state.withLock { state in
            state.waiter = waiter
            state.transport = transport
        }
    }

    /// Its fetch answered `result` (or it left).
    func ended(with result: Result<(Data, URLResponse), any Error>) {
        switch result {
        case .success: end(.loaded)
        case .failure(let error as URLError) where error.code == .cancelled: end(.cancelled)
        case .failure(is CancellationError): end(.cancelled)
        case .failure(let error): end(.failed(error))
        }
    }

    func end(_ outcome: Outcome) {
        // The waiter and the transport are let go of once the lock is released: the transport's
        // last reference may be this one, and its end takes the in-flight lock.
        let (watchers, _, _) = state.withLock {
            state -> ([CheckedContinuation<Outcome, Never>], Waiter?, CachedTransport?) in
            guard state.outcome == nil else { return ([], nil, nil) }
            state.outcome = outcome
            defer { (state.watchers, state.waiter, state.transport) = ([], nil, nil) }
            return (state.watchers, state.waiter, state.transport)
        }
        for watcher in watchers { watcher.resume(returning: outcome) }
    }
}

/// Why ``CachedTransport/prefetch(_:priority:)`` sent nothing.
public enum PrefetchError: Error, Hashable, CustomStringConvertible {
    /// The transport never stores the answer to such a request, so fetching it ahead would only
    /// load the origin: another method than `GET`, `HEAD` or a query `POST`, another scheme than
    /// http(s), or a request with its own conditions, `Range` or `Cache-Control: no-store`.
    case neverStored(CacheOutcome.PassThroughReason)
    /// The request's cache policy forbids loading: `returnCacheDataDontLoad`, or `only-if-cached`
    /// when following HTTP caching.
    case cacheOnly

    /// Why nothing was sent, in a sentence.
    public var description: String {
        switch self {
        case .neverStored(let reason): "prefetch refused: its answer is never stored (\(reason))"
        case .cacheOnly: "prefetch refused: the request may not load"
        }
    }
}
