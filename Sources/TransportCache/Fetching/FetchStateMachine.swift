import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The fetches in flight and the callers waiting on them: events in, actions out.
///
/// Each method takes one event (a caller arrives, a load starts, an attempt ends, a wait ends, a
/// caller leaves, an account signs out, keys are invalidated or updated), decides every move of
/// the fetches it touches, and returns one ``FetchAction``: what its caller must do once it has
/// released the in-flight lock that guards the machine (``CachedTransport/perform(_:launchingOffCaller:)``).
/// What it reads beyond the fetches (a stored answer, the entry a fetch confirms, the retry
/// policy) and the store's work an answer does come through ``FetchFacts``, the library's own code;
/// it never resumes, loads, cancels or calls the app's code itself.
///
/// Kept behind one lock rather than on the actor: a caller joins or leaves from its own executor,
/// and the answer resumes it straight onto that executor. Through the actor, each of ten thousand
/// coalesced callers hopped on twice, one at a time.
struct FetchStateMachine: Sendable {
    /// Fetches in flight by identifier.
    private(set) var fetches: [Int: Fetch] = [:]
    /// The fetch a new request for a key may join: the newest.
    private(set) var joinable: [CacheKey: Int] = [:]
    /// The refreshes' fetch waiting to be sent behind a refresh's fetch in flight, by key (see
    /// ``Fetch/next``): refreshes arriving meanwhile join it, even when the fetch it waits behind
    /// was detached by an invalidation or an update.
    private var queuedRefreshes: [CacheKey: Int] = [:]
    /// Callers attached to a fetch (each knows which: ``Waiter/fetchID``).
    private(set) var waiterCount = 0
    /// Requests that joined a fetch in flight, for ``CacheStatistics/coalescedJoins``: counted
    /// here, under the lock a join holds anyway.
    private(set) var joins = WatchedCount()
    var coalescedJoins: Int { joins.value }
    /// The optimistic updates pending, by key: behind the same lock as the fetches, since every
    /// change to them goes with a change to what is in flight or stored.
    var optimistic = OptimisticLayers()
    private var lastIdentifier = 0
    /// See ``takePriorityRise()``.
    private var priorityRose = false
    /// The revalidations' permits (``Configuration/StayingCurrent/maximumConcurrentRevalidations``):
    /// the fetch graph's, though a revalidation waits for one before it arrives.
    var revalidationPermits: RevalidationPermits
    /// The endpoints streams watch, polled by ``Poller``.
    var polls = PolledEndpoints()

    init(revalidations: Int) {
        revalidationPermits = RevalidationPermits(revalidations)
    }

    // MARK: - Decisions

    /// A plan arrives with `waiter` (nil for a background revalidation), after its first step
    /// (``arrive(_:sharing:waiter:cancelled:)``) ended with ``FetchAction/needsClock`` and the
    /// clock was read (`reading`): it joins the fetch in flight its sharing allows, as the first
    /// step does, since one may have started meanwhile; else takes an answer stored meanwhile
    /// when it may; else starts a fetch. A cancelled caller joins nothing.
    mutating func arrive(
        _ plan: FetchPlan, waiter: Waiter?, cancelled: Bool = false, at reading: ClockReading,
        facts: some FetchFacts
    ) -> FetchAction {
        if let waiter, cancelled { return .end([waiter], because: .cancelled, cancelling: [], then: []) }
        if let watchers = join(waiter, key: plan.key, sharing: plan.sharing) { return .joined(watchers) }
        if plan.mayTakeStoredAnswer,
            let stored = facts.storedAnswer(for: plan, reads: waiter?.reads ?? true, at: reading.now)
        {
            return .takeStored(stored, by: waiter)
        }
        if waiter == nil { facts.backgroundRevalidationStarted() }
        let fetch = start(
            key: plan.key, request: plan.request, reason: plan.reason, isReload: plan.isReload,
            requestTime: reading.date, settings: plan.settings, starter: waiter,
            bypassesPreparation: facts.startsInsideRefresh)
        return .launch(launchable(fetch, facts: facts))
    }

    /// The first step of an arrival for `key`, which needs no clock, and of the plan only its key
    /// and `sharing`, so that a background revalidation's plan is made only once nothing in
    /// flight takes it: a cancelled caller leaves; a background revalidation of a key under
    /// pending optimistic updates is claimed, once, here (see
    /// ``OptimisticLayers/claimBackgroundRevalidation(of:)``); the fetch in flight `sharing`
    /// allows is joined; else the arrival needs the clock (``FetchAction/needsClock``), and goes
    /// on with its plan (``arrive(_:waiter:cancelled:at:facts:)``).
    mutating func arrive(_ key: CacheKey, sharing: FetchPlan.Sharing, waiter: Waiter?, cancelled: Bool) -> FetchAction {
        if let waiter, cancelled { return .end([waiter], because: .cancelled, cancelling: [], then: []) }
        if waiter == nil, !optimistic.claimBackgroundRevalidation(of: key) { return .none }
        if let watchers = join(waiter, key: key, sharing: sharing) { return .joined(watchers) }
        return .needsClock
    }

    /// Attaches `waiter` to the fetch in flight for `key` when `sharing` lets it share that one.
    /// A plan with no caller (a background revalidation) joins by the same rule, attaching nothing.
    /// - Returns: nil when it did not join; when it did, the tests watching ``coalescedJoins`` whose
    ///   number it reached, to resume once the lock is released (none while no test watches).
    private mutating func join(_ waiter: Waiter?, key: CacheKey, sharing: FetchPlan.Sharing) -> WatchedCount.Watchers? {
        if sharing == .sentAfterCall { return waiter.flatMap { waitForNextRefresh($0, key: key) } }
        guard let fetchID = joinable[key], let fetch = fetches[fetchID], sharing == .any || fetch.isReload else {
            return nil
        }
        guard let waiter else { return [] }
        attach(waiter, to: fetch, id: fetchID)
        return joins.count()
    }

    /// The launch of `fetch`, about to be sent: conditional on the stored entry that
    /// ``FetchFacts/entryToConfirm(for:)`` names, unless it may not ask about one (`mayConfirm`).
    /// Each send is a stage of its own (``Fetch/stage``).
    private mutating func launchable(_ fetch: Fetch, mayConfirm: Bool = true, facts: some FetchFacts) -> Launch {
        let entry = mayConfirm ? facts.entryToConfirm(for: fetch) : nil
        fetch.revalidating = entry
        let stage = fetch.nextStage()
        return Launch(
            id: fetch.id,
            request: entry.map { ConditionalRequest.revalidating(fetch.request, against: $0) } ?? fetch.request,
            reason: fetch.reason, isConditional: entry != nil, key: fetch.key, prepares: !fetch.bypassesPreparation,
            stage: stage, priority: fetch.priority)
    }

    /// Fetch `fetchID`'s attempt ended with `result`, which took `duration`; `refused` when the
    /// app's authenticator judged it a refusal of the credential it carried. In this order:
    /// - gone (every caller left): nothing;
    /// - refused, and it may wait for a later credential (``maximumReauthentications``): it waits
    ///   for its account's refresh, then is sent again;
    /// - an answer the ``RetryPolicy`` tries again: it waits, then is sent again;
    /// - a `304` confirming an entry that is gone while callers wait: sent again without
    ///   conditions, so no caller ever gets the empty body of a `304`;
    /// - otherwise it completes: the answer is stored and answers every caller it serves; callers
    ///   its `Vary` does not serve get fetches of their own, and the refreshes that waited behind
    ///   it are sent (conditional on what it stored).
    mutating func attemptEnded(
        _ fetchID: Int, with result: Result<(Data, URLResponse), any Error>, duration: Duration, refused: Bool,
        at reading: ClockReading, facts: some FetchFacts
    ) -> FetchAction {
        guard let fetch = fetches[fetchID] else { return .none }
        let url = fetch.request.url
        // A refresh's own request, or one that carried the app's own credential, never waits.
        if refused, !fetch.bypassesPreparation, let sent = fetch.sent, let stamp = sent.stamp,
            fetch.reauthentications < Self.maximumReauthentications
        {
            fetch.reauthentications += 1
            let wait = FetchWait.credential(
                request: sent.request, stamp: stamp, again: fetch.reauthentications > 1, refusal: result)
            return .wait(wait, fetchID: fetchID, stage: fetch.nextStage(), url: url)
        }
        if let delay = facts.retryDelay(of: fetch, after: result, at: reading.date) {
            fetch.attempt += 1
            return .wait(
                .retry(attempt: fetch.attempt, delay: delay), fetchID: fetchID, stage: fetch.nextStage(), url: url)
        }
        let fetched: FetchedAnswer
        switch result {
        case .failure(let error):
            fetched = .failed(error)
        case .success(let (data, response)):
            guard let entry = fetch.revalidating, let notModified = response as? HTTPURLResponse,
                notModified.statusCode == 304
            else {
                fetched = .fetched(data, response)
                break
            }
            fetch.revalidating = nil
            if let confirmed = facts.commitNotModified(notModified, of: entry, for: fetch, at: reading, in: &self) {
                fetched = .notModified(confirmed.data, confirmed.response, confirmed.storage)
            } else if fetch.hasWaiters {
                fetch.requestTime = reading.date
                return .resend(launchable(fetch, mayConfirm: false, facts: facts))
            } else {
                // Without callers (a background revalidation of an entry dropped meanwhile) the
                // 304 is taken as it is: not stored, and counted as a failed revalidation.
                fetched = .fetched(data, response)
            }
        }
        guard let completed = complete(fetchID, requestTime: reading.date) else { return .none }
        let callers = CallerAnswers(completed.waiters, of: fetch, duration: duration)
        var launches: [Launch] = []
        for group in facts.commitAndAnswer(fetched, of: fetch, to: callers, at: reading, in: &self) {
            launches.append(launchable(restart(group, from: fetch, requestTime: reading.date), facts: facts))
        }
        // Made once the answer is stored: the refreshes' fetch is conditional on what it stored.
        if let next = completed.next { launches.append(launchable(next, facts: facts)) }
        return .answer(callers, then: launches)
    }

    /// Fetch `fetchID`'s wait for a later credential ended with `end`: renewed, it is sent again
    /// (``waitEnded(_:at:retrying:facts:)``); otherwise its attempt ends with the refusal, or with
    /// the refresh's error, as any attempt ends but for waiting for a credential again
    /// (``attemptEnded(_:with:duration:refused:at:facts:)``: the retry policy and a stale answer
    /// after an error apply).
    mutating func credentialWaitEnded(
        _ fetchID: Int, _ end: CredentialWaitEnd, at reading: ClockReading, facts: some FetchFacts
    ) -> FetchAction {
        switch end {
        case .renewed:
            return waitEnded(fetchID, at: reading.date, retrying: false, facts: facts)
        case .unchanged(let refusal):
            return attemptEnded(fetchID, with: refusal, duration: .zero, refused: false, at: reading, facts: facts)
        case .failed(let error):
            return attemptEnded(
                fetchID, with: .failure(error), duration: .zero, refused: false, at: reading, facts: facts)
        }
    }

    /// Fetch `fetchID`'s wait before its next attempt ended (see ``FetchWait``): it is sent again
    /// from `requestTime`, conditional on what is stored then, unless every caller left meanwhile.
    /// - Parameter retrying: the wait was a retry's (counted in the statistics when it sends).
    mutating func waitEnded(
        _ fetchID: Int, at requestTime: Date, retrying: Bool, facts: some FetchFacts
    ) -> FetchAction {
        guard let fetch = fetches[fetchID] else { return .none }
        fetch.requestTime = requestTime
        if retrying { facts.retried() }
        return .launch(launchable(fetch, facts: facts))
    }

    /// The refreshes' rule: a refresh shares no fetch sent before it was made. While a refresh's
    /// fetch is in flight, it waits for the fetch sent when that one ends, which every refresh
    /// arriving meanwhile shares (the first of them starts it). Otherwise it starts a fetch now.
    /// - Returns: nil when it must start a fetch now; see ``join(_:key:sharing:)``.
    private mutating func waitForNextRefresh(_ waiter: Waiter, key: CacheKey) -> WatchedCount.Watchers? {
        if let nextID = queuedRefreshes[key], let next = fetches[nextID] {
            attach(waiter, to: next, id: nextID)
            return joins.count()
        }
        guard let fetchID = joinable[key], let fetch = fetches[fetchID], fetch.reason == .refresh else { return nil }
        lastIdentifier += 1
        let next = Fetch(
            id: lastIdentifier, key: key, request: waiter.request, reason: .refresh, isReload: true,
            requestTime: fetch.requestTime, settings: fetch.settings, starter: waiter)
        next.queuedBehind = fetch.id
        fetch.next = next
        fetches[next.id] = next
        queuedRefreshes[key] = next.id
        attach(waiter, to: next, id: next.id)
        return []
    }

    /// Registers `continuation` to be resumed once ``coalescedJoins`` reaches `count`.
    /// - Returns: false when it has already: resume it at once.
    mutating func watchJoins(reaching count: Int, _ continuation: CheckedContinuation<Void, Never>) -> Bool {
        joins.watch(until: { $0 >= count }, continuation)
    }

    /// Starts a fetch of `request` for `key`, with `starter` as its first waiter or, for a
    /// background revalidation, none. Later requests for the key join it; an older fetch of the
    /// key still answers its callers but no longer stores its (older) answer.
    /// - Parameter isJoinable: false for a fetch of one representation among several (see
    ///   ``restart(_:from:requestTime:)``): it neither supersedes the key's fetch nor is joined.
    /// - Returns: the fetch, to launch.
    /// - Parameter bypassesPreparation: it is a credential refresh's own (``Fetch/bypassesPreparation``).
    private mutating func start(
        key: CacheKey, request: URLRequest, reason: Plan.FetchReason, isReload: Bool, requestTime: Date,
        settings: FreshnessPolicy.Settings, starter: Waiter?, isJoinable: Bool = true,
        bypassesPreparation: Bool = false
    ) -> Fetch {
        lastIdentifier += 1
        let fetchID = lastIdentifier
        let fetch = Fetch(
            id: fetchID, key: key, request: request, reason: reason, isReload: isReload, requestTime: requestTime,
            settings: settings, starter: starter)
        fetch.bypassesPreparation = bypassesPreparation
        if let starter { attach(starter, to: fetch, id: fetchID) }
        fetches[fetchID] = fetch
        if isJoinable { makeJoinable(fetch) }
        return fetch
    }

    /// Makes `fetch` the one later requests for its key join; the fetch they joined so far still
    /// answers its callers but no longer stores its (older) answer.
    private mutating func makeJoinable(_ fetch: Fetch) {
        if let older = joinable[fetch.key], older != fetch.id {
            fetches[older]?.supersededBecause = .supersededInFlight
        }
        joinable[fetch.key] = fetch.id
    }

    /// The refreshes waiting behind `fetch` (which has ended or been abandoned), if any: their
    /// fetch is sent now, from `requestTime`, and later requests for the key join it.
    /// - Returns: the fetch to launch.
    private mutating func sendNext(after fetch: Fetch, requestTime: Date) -> Fetch? {
        guard let next = fetch.next, fetches[next.id] != nil else { return nil }
        fetch.next = nil
        next.queuedBehind = nil
        queuedRefreshes[next.key] = nil
        next.requestTime = requestTime
        // Numbered when sent: newer than whatever was written while it waited.
        lastIdentifier += 1
        next.order = lastIdentifier
        makeJoinable(next)
        return next
    }

    /// Whether fetch `fetchID` is still in flight: some caller waits for it, or it runs in the
    /// background. A launch of one that is not sends nothing.
    func isWaitedFor(_ fetchID: Int) -> Bool { fetches[fetchID] != nil }

    /// The keys of the fetches in flight. - Complexity: O(f) in the fetches in flight.
    var keysInFlight: Set<CacheKey> { Set(fetches.values.map(\.key)) }

    /// The ``Fetch/order`` of the newest fetch sent: fetches sent from now on have larger ones.
    var newestFetchOrder: Int { lastIdentifier }

    /// The load of fetch `fetchID` for its stage `stage` (``Fetch/stage``: a network load, or a
    /// wait before the next one) has started; it was started after the lock was released. A load
    /// of a stage the fetch has left has ended already (its end moved the fetch on): it is not
    /// recorded over the current one.
    /// - Parameter priority: the fetch's priority when the load started: the load is told when
    ///   it moved since.
    /// - Returns: ``FetchAction/cancel(_:)`` when every caller left before the load was recorded.
    mutating func loadStarted(
        _ load: any NetworkLoad, for fetchID: Int, stage: Int, at priority: FetchPriority? = nil
    ) -> FetchAction {
        guard let fetch = fetches[fetchID] else { return .cancel(load) }
        if fetch.stage == stage {
            fetch.load = load
            if let priority, fetch.priority != priority {
                load.prioritize(fetch.priority)
                if fetch.priority > priority { priorityRose = true }
            }
        }
        return .none
    }

    /// `waiter`'s caller now asks for `priority` (a ``Prefetch`` whose priority the app set): its
    /// fetch's priority follows.
    /// - Returns: false when it waits on no fetch (answered, or left).
    mutating func reprioritize(_ waiter: Waiter, to priority: FetchPriority) -> Bool {
        guard let fetchID = waiter.fetchID, let fetch = fetches[fetchID] else { return false }
        let before = fetch.priority
        fetch.reprioritize(waiter, to: priority)
        if fetch.priority > before, fetch.load != nil { priorityRose = true }
        return true
    }

    /// Whether a fetch's priority rose since the last call, while it had a load: its load, waiting
    /// in the ``FetchQueue``, may now take a free place, which ``FetchQueue/startReady()`` starts
    /// once the in-flight lock is released.
    mutating func takePriorityRise() -> Bool {
        defer { priorityRose = false }
        return priorityRose
    }

    // MARK: - A fetch's attempts

    /// Fetch `fetchID`'s request went out as `outgoing` (``RequestPreparation/outgoing(_:keyedFor:)``).
    /// - Returns: false when the fetch is gone (every caller left): send nothing.
    mutating func sent(_ outgoing: Outgoing, for fetchID: Int) -> Bool {
        guard let fetch = fetches[fetchID] else { return false }
        fetch.sent = outgoing
        return true
    }

    /// How often a fetch waits for a later credential after a refusal: a resend refused again
    /// right after a refresh may start one more, within the refresh limit (an authorization
    /// server may have revoked what the first brought), before its callers get the refusal.
    static let maximumReauthentications = 2

    /// Fetch `fetchID` has its answer: it is removed, with its waiters.
    /// - Returns: its waiters in the order they joined (with holes where one left), and the fetch
    ///   of the refreshes that waited behind it, now sent from `requestTime`; nil when every caller
    ///   had left and the answer is to be dropped.
    private mutating func complete(_ fetchID: Int, requestTime: Date) -> (waiters: [Waiter?], next: Fetch?)? {
        guard let fetch = fetches.removeValue(forKey: fetchID) else { return nil }
        if joinable[fetch.key] == fetchID { joinable[fetch.key] = nil }
        let waiters = fetch.takeWaiters()
        for case let waiter? in waiters {
            waiter.fetchID = nil
            waiterCount -= 1
        }
        return (waiters, sendNext(after: fetch, requestTime: requestTime))
    }

    /// `group` was detached from a fetch whose answer does not match their requests (which
    /// match each other): they get a fetch of their own, started by the first of them, which
    /// stores its representation beside the others and is joined by no later request.
    /// - Returns: the fetch to launch.
    private mutating func restart(_ group: [Waiter], from fetch: Fetch, requestTime: Date) -> Fetch {
        let started = start(
            key: fetch.key, request: group[0].request, reason: group[0].reason, isReload: fetch.isReload,
            requestTime: requestTime, settings: fetch.settings, starter: group[0], isJoinable: false)
        for waiter in group.dropFirst() { attach(waiter, to: started, id: started.id) }
        return started
    }

    /// `waiter`'s caller was cancelled: it ends at once; a fetch it leaves without callers is
    /// abandoned (its load cancelled), and the refreshes waiting behind it are sent from
    /// `requestTime`. A waiter no longer attached (answered already) is left alone.
    mutating func leave(_ waiter: Waiter, requestTime: Date, facts: some FetchFacts) -> FetchAction {
        guard let fetchID = waiter.fetchID, let fetch = fetches[fetchID], fetch.remove(waiter) else { return .none }
        waiter.fetchID = nil
        waiterCount -= 1
        // A background revalidation runs on without callers: it brings the entry up to date.
        guard !fetch.hasWaiters, !fetch.isBackground else {
            return .end([waiter], because: .cancelled, cancelling: [], then: [])
        }
        fetches[fetchID] = nil
        if joinable[fetch.key] == fetchID { joinable[fetch.key] = nil }
        if let behind = fetch.queuedBehind {
            fetches[behind]?.next = nil
            queuedRefreshes[fetch.key] = nil
        }
        let next = sendNext(after: fetch, requestTime: requestTime).map { launchable($0, facts: facts) }
        return .end(
            [waiter], because: .cancelled, cancelling: fetch.load.map { [$0] } ?? [], then: next.map { [$0] } ?? [])
    }

    /// Stops the fetches in flight for the matching keys from storing their answers and from
    /// being joined, for `reason` (an invalidation, or an answer the app wrote). Their callers
    /// still get their answers.
    /// A fetch waiting to be sent behind another is not touched: it is sent after the event.
    /// - Complexity: O(f) in the fetches in flight.
    mutating func detach(
        where matches: (CacheKey) -> Bool, because reason: CacheOutcome.NotStoredReason = .invalidatedInFlight
    ) {
        for fetch in fetches.values where fetch.queuedBehind == nil && matches(fetch.key) {
            fetch.supersededBecause = reason
        }
        for key in joinable.keys where matches(key) { joinable[key] = nil }
    }

    /// Takes out the fetches of the keys `matches` selects (a signed-out account's), those waiting
    /// to be sent included, with their callers: none of them will store or answer.
    /// - Returns: the callers, to fail as signed out, and the loads, to cancel, once the lock is
    ///   released.
    /// - Complexity: O(f) in the fetches in flight.
    mutating func abandon(where matches: (CacheKey) -> Bool) -> FetchAction {
        var waiters: [Waiter] = []
        var loads: [any NetworkLoad] = []
        for (fetchID, fetch) in fetches where matches(fetch.key) {
            fetches[fetchID] = nil
            if joinable[fetch.key] == fetchID { joinable[fetch.key] = nil }
            if queuedRefreshes[fetch.key] == fetchID { queuedRefreshes[fetch.key] = nil }
            for case let waiter? in fetch.takeWaiters() {
                waiter.fetchID = nil
                waiterCount -= 1
                waiters.append(waiter)
            }
            if let load = fetch.load { loads.append(load) }
        }
        return waiters.isEmpty && loads.isEmpty
            ? .none : .end(waiters, because: .signedOut, cancelling: loads, then: [])
    }

    /// An optimistic update of `keys` began: the fetches of them in flight put their answers under
    /// it (see ``Fetch/goesUnderUpdate``) and are no longer joined.
    /// - Complexity: O(f) in the fetches in flight.
    mutating func placeUnderUpdate(_ keys: Set<CacheKey>) {
        for fetch in fetches.values where fetch.queuedBehind == nil && keys.contains(fetch.key) {
            fetch.goesUnderUpdate = true
        }
        for key in keys { joinable[key] = nil }
    }

    /// The last optimistic update of `key` has ended on an answer as new as a fetch sent in
    /// `order` (see ``OptimisticLayers``): the fetches of the key in flight sent before it store
    /// nothing; those sent after store as usual.
    /// - Complexity: O(f) in the fetches in flight.
    mutating func updatesEnded(for key: CacheKey, on order: Int) {
        for fetch in fetches.values where fetch.key == key && fetch.queuedBehind == nil {
            if fetch.order <= order {
                if fetch.supersededBecause == nil { fetch.supersededBecause = .supersededInFlight }
            } else {
                fetch.goesUnderUpdate = false
            }
        }
    }

    private mutating func attach(_ waiter: Waiter, to fetch: Fetch, id fetchID: Int) {
        let before = fetch.priority
        fetch.add(waiter)
        if fetch.priority > before, fetch.load != nil { priorityRose = true }
        waiter.fetchID = fetchID
        waiterCount += 1
    }
}

/// One origin fetch and the callers waiting for it.
///
/// A class, so that adding the ten-thousandth waiter mutates its table in place instead of
/// copying a struct that holds it (which made joins quadratic).
///
/// Its state is the state machine's: every field is written only by ``FetchStateMachine`` (in this
/// file), in answer to an event.
///
/// `@unchecked Sendable` is safe here: a fetch is only reached through ``FetchStateMachine``, and so
/// only read or written while the transport's in-flight lock is held.
final class Fetch: @unchecked Sendable {
    /// Its identifier in ``FetchStateMachine``.
    let id: Int
    /// Its place among the fetches sent: one sent later has a larger one (``FetchStateMachine``
    /// numbers a fetch when it is sent, a refreshes' fetch waiting behind another included).
    fileprivate(set) var order: Int
    let key: CacheKey
    /// The request that started it, as every call keys it (``RequestPreparation/keyed(_:)``);
    /// what goes out is made from it for each attempt.
    let request: URLRequest
    /// Why it was started: its starter's reason, ``CacheOutcome/FetchReason/backgroundRevalidation``
    /// for a background revalidation.
    let reason: Plan.FetchReason
    /// Started to reload (see ``FetchPlan/Sharing/reloads``): reload requests may share it.
    let isReload: Bool
    /// Its URL's maximum age and stale window (``FetchPlan/settings``).
    let settings: FreshnessPolicy.Settings
    /// The caller that started it, which gets its answer whatever the answer's `Vary` says; nil
    /// for a background revalidation.
    private let starter: Waiter?
    /// Started by a stale-window answer, with no caller of its own: it runs to its end even when
    /// every caller that joined it leaves, and its failure reaches nobody but the callers that
    /// joined.
    var isBackground: Bool { starter == nil }
    /// The stored entry this fetch asked the origin to confirm (`If-None-Match` /
    /// `If-Modified-Since`), when it was sent conditionally.
    fileprivate(set) var revalidating: StoredResponse?
    /// Set while it is in flight when the key is invalidated, the app writes an answer for it, a
    /// newer fetch of it starts, or an optimistic update ends on a newer answer: its answer still
    /// reaches its callers but is not written into the store.
    fileprivate(set) var supersededBecause: CacheOutcome.NotStoredReason?
    /// Set when an optimistic update of the key began while this one was in flight: while updates
    /// are pending, its answer goes under them (what they roll back to), never over the
    /// provisional answer (see ``OptimisticLayers``).
    fileprivate(set) var goesUnderUpdate = false
    /// The fetch that the refreshes arriving while this one (a refresh's) is in flight wait for:
    /// sent when this one ends.
    fileprivate(set) var next: Fetch?
    /// Set on a ``next`` fetch until it is sent: the identifier of the fetch it waits behind.
    fileprivate(set) var queuedBehind: Int?
    /// The origin fetch, once started, or the wait before its next attempt; cancelled when the
    /// last caller leaves.
    fileprivate(set) var load: (any NetworkLoad)?
    /// Which of its loads is current: each send and each wait (before a retry, for a credential)
    /// is a stage of its own, so that a load started after the lock was released is recorded only
    /// while its stage is current.
    fileprivate(set) var stage = 0
    /// When its current attempt was sent: the request time of HTTP's age calculation.
    fileprivate(set) var requestTime: Date
    /// What its last attempt sent, and which credential that carried; nil until one went out
    /// through ``RequestPreparation/outgoing(_:keyedFor:)``.
    fileprivate(set) var sent: Outgoing?
    /// Started by a credential's refresh (see ``Credentials``): its requests, retries and resends
    /// included, go past the adapters and the authenticator, and a refusal is its answer.
    fileprivate(set) var bypassesPreparation = false
    /// How often a refusal of its credential has made it wait for a later one and resend
    /// (``FetchStateMachine/maximumReauthentications`` at most).
    fileprivate(set) var reauthentications = 0
    /// Its attempts so far, from 1 (see ``RetryPolicy``).
    fileprivate(set) var attempt = 1
    /// Its waiters' priorities, counted by priority.
    private var priorities = PriorityTally()
    /// How many of its waiters read its answer (screens' callers, not prefetches).
    private(set) var readers = 0
    /// Whether a caller that reads the answer waited for it when it ended (see ``readers``).
    private var wasRead = false
    /// Whether a screen's caller waits for its answer, or did when it ended. Otherwise it was
    /// fetched for prefetches only (or in the background): ``ResponseStore/write(_:for:replacing:unread:)``
    /// then keeps it on probation when its key held nothing or only an answer not read yet.
    var hasReader: Bool { readers > 0 || wasRead }

    /// How soon it should go: the highest priority of its waiters; ``FetchPriority/low`` with
    /// none (a background revalidation).
    var priority: FetchPriority { priorities.highest ?? .low }

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
        settings: FreshnessPolicy.Settings, starter: Waiter?
    ) {
        self.id = id
        self.settings = settings
        order = id
        self.key = key
        self.request = request
        self.reason = reason
        self.isReload = isReload
        self.requestTime = requestTime
        self.starter = starter
    }

    /// Moves to the next stage, whose load is not started yet. - Returns: that stage.
    fileprivate func nextStage() -> Int {
        stage += 1
        load = nil
        return stage
    }

    /// Whether `waiter` is the caller that started this fetch.
    func wasStarted(by waiter: Waiter) -> Bool {
        starter === waiter
    }

    func add(_ waiter: Waiter) {
        let before = priority
        waiter.position = ordered.count
        ordered.append(waiter)
        attached += 1
        priorities.add(waiter.priority)
        if waiter.reads { readers += 1 }
        passOnPriority(from: before)
    }

    /// Detaches `waiter`. - Returns: whether it was attached here. - Complexity: O(1).
    func remove(_ waiter: Waiter) -> Bool {
        let position = waiter.position
        guard position < ordered.count, ordered[position] === waiter else { return false }
        let before = priority
        ordered[position] = nil
        attached -= 1
        priorities.remove(waiter.priority)
        if waiter.reads { readers -= 1 }
        passOnPriority(from: before)
        return true
    }

    /// `waiter`, attached here, now asks for `priority`.
    fileprivate func reprioritize(_ waiter: Waiter, to priority: FetchPriority) {
        let before = self.priority
        priorities.remove(waiter.priority)
        waiter.priority = priority
        priorities.add(priority)
        passOnPriority(from: before)
    }

    /// Tells its load (waiting in the ``FetchQueue`` or running) when its priority moved from
    /// `before`. The queue's lock is a leaf: this starts, cancels and resumes nothing.
    private func passOnPriority(from before: FetchPriority) {
        let now = priority
        if now != before { load?.prioritize(now) }
    }

    var hasWaiters: Bool { attached > 0 }

    /// Detaches every waiter. - Returns: them in the order they joined, with holes where one
    /// left: the table itself, handed over without a copy.
    func takeWaiters() -> [Waiter?] {
        defer {
            ordered = []
            attached = 0
            priorities = PriorityTally()
            readers = 0
        }
        wasRead = readers > 0
        return ordered
    }
}

/// How many waiters of a fetch ask for each priority: its priority is the highest counted, found
/// in constant time as waiters join and leave.
struct PriorityTally {
    private var counts = (0, 0, 0, 0, 0)

    var highest: FetchPriority? {
        if counts.4 > 0 { return .veryHigh }
        if counts.3 > 0 { return .high }
        if counts.2 > 0 { return .normal }
        if counts.1 > 0 { return .low }
        if counts.0 > 0 { return .veryLow }
        return nil
    }

    mutating func add(_ priority: FetchPriority) { change(priority, by: 1) }

    mutating func remove(_ priority: FetchPriority) { change(priority, by: -1) }

    private mutating func change(_ priority: FetchPriority, by amount: Int) {
        switch priority {
        case .veryLow: counts.0 += amount
        case .low: counts.1 += amount
        case .normal: counts.2 += amount
        case .high: counts.3 += amount
        case .veryHigh: counts.4 += amount
        }
    }
}
