import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The fetches in flight and the callers waiting on them: events in, actions out.
///
/// Each method takes one event (a caller arrives, a load starts, a fetch answers, a caller
/// leaves, keys are invalidated) and returns what its caller must do once it has released the
/// in-flight lock that guards the machine: resume a caller, start or cancel a load. It never
/// resumes, loads or cancels anything itself.
///
/// Kept behind one lock rather than on the actor: a caller joins or leaves from its own executor,
/// and the answer resumes it straight onto that executor. Through the actor, each of ten thousand
/// coalesced callers hopped on twice, one at a time.
struct FetchStateMachine: Sendable {
    /// Fetches in flight by identifier.
    private(set) var fetches: [Int: Fetch] = [:]
    /// The fetch a new request for a key may join: the newest.
    private(set) var joinable: [CacheKey: Int] = [:]
    /// Callers attached to a fetch (each knows which: ``Waiter/fetchID``).
    private(set) var waiterCount = 0
    /// Requests that joined a fetch in flight, for ``CacheStatistics/coalescedJoins``: counted
    /// here, under the lock a join holds anyway.
    private(set) var coalescedJoins = 0
    private var lastIdentifier = 0

    /// Attaches `waiter` to the fetch in flight for `key`, when `sharing` lets it share that one.
    /// - Returns: whether it joined.
    mutating func join(_ waiter: Waiter, key: CacheKey, sharing: FetchPlan.Sharing) -> Bool {
        guard sharing != .none, let fetchID = joinable[key], let fetch = fetches[fetchID],
            sharing == .any || fetch.isReload
        else { return false }
        attach(waiter, to: fetch, id: fetchID)
        coalescedJoins += 1
        return true
    }

    /// Starts a fetch of `request` for `key`, with `starter` as its first waiter or, for a
    /// background revalidation, none. Later requests for the key join it; an older fetch of the
    /// key still answers its callers but no longer stores its (older) answer.
    /// - Parameter isJoinable: false for a fetch of one representation among several (see
    ///   ``restart(_:from:requestTime:)``): it neither supersedes the key's fetch nor is joined.
    /// - Returns: the fetch and its identifier; the caller starts its load (``loadStarted(_:for:)``).
    mutating func start(
        key: CacheKey, request: URLRequest, reason: Plan.FetchReason, isReload: Bool, requestTime: Date,
        starter: Waiter?, isJoinable: Bool = true
    ) -> (id: Int, fetch: Fetch) {
        lastIdentifier += 1
        let fetchID = lastIdentifier
        let fetch = Fetch(
            key: key, request: request, reason: reason, isReload: isReload, requestTime: requestTime,
            starter: starter)
        if let starter { attach(starter, to: fetch, id: fetchID) }
        if isJoinable {
            if let older = joinable[key] { fetches[older]?.supersededBecause = .supersededInFlight }
            joinable[key] = fetchID
        }
        fetches[fetchID] = fetch
        return (fetchID, fetch)
    }

    enum LoadAction {
        /// The load belongs to a fetch still waited for.
        case keep
        /// Every caller left before the load was recorded: cancel it.
        case cancel
    }

    /// The load of fetch `fetchID` has started.
    mutating func loadStarted(_ load: any NetworkLoad, for fetchID: Int) -> LoadAction {
        guard let fetch = fetches[fetchID] else { return .cancel }
        fetch.load = load
        return .keep
    }

    /// Fetch `fetchID` has its answer: it is removed, with its waiters.
    /// - Returns: the fetch and its waiters in the order they joined (with holes where one
    ///   left), or nil when every caller had left and the answer is to be dropped.
    mutating func complete(_ fetchID: Int) -> (fetch: Fetch, waiters: [Waiter?])? {
        guard let fetch = fetches.removeValue(forKey: fetchID) else { return nil }
        if joinable[fetch.key] == fetchID { joinable[fetch.key] = nil }
        let waiters = fetch.takeWaiters()
        for case let waiter? in waiters {
            waiter.fetchID = nil
            waiterCount -= 1
        }
        return (fetch, waiters)
    }

    /// `group` was detached from a fetch whose answer does not match their requests (which
    /// match each other): they get a fetch of their own, started by the first of them, which
    /// stores its representation beside the others and is joined by no later request.
    /// - Returns: the fetch to launch.
    mutating func restart(_ group: [Waiter], from fetch: Fetch, requestTime: Date) -> (id: Int, fetch: Fetch) {
        let started = start(
            key: fetch.key, request: group[0].request, reason: group[0].reason, isReload: fetch.isReload,
            requestTime: requestTime, starter: group[0], isJoinable: false)
        for waiter in group.dropFirst() { attach(waiter, to: started.fetch, id: started.id) }
        return started
    }

    enum LeaveAction {
        /// The waiter was not attached (already answered): nothing to do.
        case none
        /// Resume the waiter with `CancellationError`.
        case resume
        /// Resume the waiter, and cancel the load it was the last caller of.
        case resumeAndCancel((any NetworkLoad)?)
    }

    /// `waiter`'s caller was cancelled.
    mutating func leave(_ waiter: Waiter) -> LeaveAction {
        guard let fetchID = waiter.fetchID, let fetch = fetches[fetchID], fetch.remove(waiter) else { return .none }
        waiter.fetchID = nil
        waiterCount -= 1
        // A background revalidation runs on without callers: it brings the entry up to date.
        guard !fetch.hasWaiters, !fetch.isBackground else { return .resume }
        fetches[fetchID] = nil
        if joinable[fetch.key] == fetchID { joinable[fetch.key] = nil }
        return .resumeAndCancel(fetch.load)
    }

    /// Stops the fetches in flight for the matching keys from storing their answers and from
    /// being joined, for `reason` (an invalidation, or an answer the app wrote). Their callers
    /// still get their answers.
    /// - Complexity: O(f) in the fetches in flight.
    mutating func detach(
        where matches: (CacheKey) -> Bool, because reason: CacheOutcome.NotStoredReason = .invalidatedInFlight
    ) {
        for fetch in fetches.values where matches(fetch.key) { fetch.supersededBecause = reason }
        for key in joinable.keys where matches(key) { joinable[key] = nil }
    }

    private mutating func attach(_ waiter: Waiter, to fetch: Fetch, id fetchID: Int) {
        fetch.add(waiter)
        waiter.fetchID = fetchID
        waiterCount += 1
    }
}
