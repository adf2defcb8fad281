import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A caller suspended until a fetch answers.
///
/// A class that knows its own place, so that joining, leaving and being answered cost no table
/// lookups: ten thousand callers of one fetch each paid two dictionary insertions and two
/// removals to be found again.
///
/// `@unchecked Sendable` is safe here: `continuation` is set once, before the waiter is attached to a fetch
/// under the in-flight lock; `fetchID` and `position` are only read or written with that lock
/// held.
final class Waiter: @unchecked Sendable {
    let request: URLRequest
    /// Why its caller went to the network: its answer's outcome says so.
    let reason: Plan.FetchReason
    /// Set for a ``Prefetch``: it reads nothing, and answers its handle instead of a continuation.
    let prefetch: Prefetch?
    // Exclusivity is unchecked on the three below for the reason given on the class: each access
    // happens under the in-flight lock, or before the waiter is attached and visible to others.
    /// Resumed exactly once, by whoever detaches the waiter under the in-flight lock (the fetch's
    /// completion or the caller's cancellation), or at once when it is never attached.
    @exclusivity(unchecked) var continuation: UnsafeContinuation<(Data, URLResponse), any Error>?
    /// The fetch it is attached to, nil when attached to none.
    @exclusivity(unchecked) var fetchID: Int?
    /// Its place in that fetch's waiters.
    @exclusivity(unchecked) var position = 0
    /// How soon its fetch should go: the highest of its waiters' (``Fetch/priority``).
    @exclusivity(unchecked) var priority: FetchPriority

    init(request: URLRequest, reason: Plan.FetchReason, priority: FetchPriority, prefetch: Prefetch? = nil) {
        self.request = request
        self.reason = reason
        self.priority = priority
        self.prefetch = prefetch
    }

    /// Whether it is a screen's caller, which reads the answer, rather than a prefetch.
    var reads: Bool { prefetch == nil }

    func resume(with result: Result<(Data, URLResponse), any Error>) {
        if let continuation {
            continuation.resume(with: result)
        } else {
            prefetch?.ended(with: result)
        }
    }
}
