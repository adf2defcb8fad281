import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One origin fetch and the callers waiting for it.
///
/// A class, so that adding the ten-thousandth waiter mutates its table in place instead of
/// copying a struct that holds it (which made joins quadratic).
///
/// `@unchecked Sendable` is safe here: a fetch is only reached through ``FetchStateMachine``, and so
/// only read or written while the transport's in-flight lock is held.
final class Fetch: @unchecked Sendable {
    /// Its identifier in ``FetchStateMachine``.
    let id: Int
    /// Its place among the fetches sent: one sent later has a larger one (``FetchStateMachine``
    /// numbers a fetch when it is sent, a refreshes' fetch waiting behind another included).
    var order: Int
    let key: CacheKey
    /// The request that started it, as every call keys it (``RequestPreparation/keyed(_:)``);
    /// what goes out is made from it for each attempt.
    let request: URLRequest
    /// Why it was started: its starter's reason, ``CacheOutcome/FetchReason/backgroundRevalidation``
    /// for a background revalidation.
    let reason: Plan.FetchReason
    /// Started to reload (see ``FetchPlan/Sharing/reloads``): reload requests may share it.
    let isReload: Bool
    /// The caller that started it, which gets its answer whatever the answer's `Vary` says; nil
    /// for a background revalidation.
    private let starter: Waiter?
    /// Started by a stale-window answer, with no caller of its own: it runs to its end even when
    /// every caller that joined it leaves, and its failure reaches nobody but the callers that
    /// joined.
    var isBackground: Bool { starter == nil }
    /// The stored entry this fetch asked the origin to confirm (`If-None-Match` /
    /// `If-Modified-Since`), when it was sent conditionally.
    var revalidating: StoredResponse?
    /// Set while it is in flight when the key is invalidated, the app writes an answer for it, a
    /// newer fetch of it starts, or an optimistic update ends on a newer answer: its answer still
    /// reaches its callers but is not written into the store.
    var supersededBecause: CacheOutcome.NotStoredReason?
    /// Set when an optimistic update of the key began while this one was in flight: while updates
    /// are pending, its answer goes under them (what they roll back to), never over the
    /// provisional answer (see ``OptimisticLayers``).
    var goesUnderUpdate = false
    /// The fetch that the refreshes arriving while this one (a refresh's) is in flight wait for:
    /// sent when this one ends.
    var next: Fetch?
    /// Set on a ``next`` fetch until it is sent: the identifier of the fetch it waits behind.
    var queuedBehind: Int?
    /// The origin fetch, once started, or the wait before its next attempt; cancelled when the
    /// last caller leaves.
    var load: (any NetworkLoad)?
    /// When its current attempt was sent: the request time of HTTP's age calculation.
    var requestTime: Date
    /// What its last attempt sent, and which credential that carried; nil until one went out
    /// through ``RequestPreparation/outgoing(_:keyedFor:)``.
    var sent: Outgoing?
    /// Started by a credential's refresh (see ``Credentials``): its requests, retries and resends
    /// included, go past the adapters and the authenticator, and a refusal is its answer.
    var bypassesPreparation = false
    /// Whether a refusal of its credential has already refreshed and resent it: once per fetch.
    var hasReauthenticated = false
    /// Its attempts so far, from 1 (see ``RetryPolicy``).
    var attempt = 1

    /// Waiters in the order they joined, with a hole where one left. Callers are resumed in that
    /// order: the Swift runtime removes a finished child from its task group by walking a list,
    /// so resuming ten thousand callers in hash order made the callers' own task group quadratic.
    ///
    /// Exclusivity is unchecked on these two because the in-flight lock, held for every access,
    /// already makes each access exclusive; the runtime's check would add a thread-local lookup
    /// to each of ten thousand joins.
    @exclusivity(unchecked) private var ordered: [Waiter?] = []
    @exclusivity(unchecked) private var attached = 0

    init(
        id: Int, key: CacheKey, request: URLRequest, reason: Plan.FetchReason, isReload: Bool, requestTime: Date,
        starter: Waiter?
    ) {
        self.id = id
        order = id
        self.key = key
        self.request = request
        self.reason = reason
        self.isReload = isReload
        self.requestTime = requestTime
        self.starter = starter
    }

    /// Whether `waiter` is the caller that started this fetch.
    func wasStarted(by waiter: Waiter) -> Bool {
        starter === waiter
    }

    func add(_ waiter: Waiter) {
        waiter.position = ordered.count
        ordered.append(waiter)
        attached += 1
    }

    /// Detaches `waiter`. - Returns: whether it was attached here. - Complexity: O(1).
    func remove(_ waiter: Waiter) -> Bool {
        let position = waiter.position
        guard position < ordered.count, ordered[position] === waiter else { return false }
        ordered[position] = nil
        attached -= 1
        return true
    }

    var hasWaiters: Bool { attached > 0 }

    /// Detaches every waiter. - Returns: them in the order they joined, with holes where one
    /// left: the table itself, handed over without a copy.
    func takeWaiters() -> [Waiter?] {
        defer {
            ordered = []
            attached = 0
        }
        return ordered
    }
}

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
    // Exclusivity is unchecked on the three below for the reason given on the class: each access
    // happens under the in-flight lock, or before the waiter is attached and visible to others.
    /// Resumed exactly once, by whoever detaches the waiter under the in-flight lock (the fetch's
    /// completion or the caller's cancellation), or at once when it is never attached.
    @exclusivity(unchecked) var continuation: UnsafeContinuation<(Data, URLResponse), any Error>?
    /// The fetch it is attached to, nil when attached to none.
    @exclusivity(unchecked) var fetchID: Int?
    /// Its place in that fetch's waiters.
    @exclusivity(unchecked) var position = 0

    init(request: URLRequest, reason: Plan.FetchReason) {
        self.request = request
        self.reason = reason
    }

    func resume(with result: Result<(Data, URLResponse), any Error>) {
        continuation?.resume(with: result)
    }
}
