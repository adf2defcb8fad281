import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CachedTransport {
    /// Performs a ``FetchPlan``: joins the fetch in flight for its key when it may, takes an answer
    /// stored meanwhile, or starts a fetch. Runs on the caller's executor; it never hops onto the
    /// actor. A fetch it starts is sent from there only when that executor is the global one: a
    /// caller on an actor (the main actor, for an app's view model) hands the sending to another
    /// task, as URLSession's own `data(for:)` leaves the caller's actor, and the answer still
    /// resumes the caller on its actor with no hop between.
    nonisolated(nonsending) func fetch(_ plan: FetchPlan) async throws -> (Data, URLResponse) {
        let waiter = Waiter(request: plan.request, reason: plan.reason, priority: .current)
        // Read into a constant first: `#isolation != nil` as one expression crashes Swift 6.3.1's
        // debug code generation here.
        let callerIsolation = #isolation
        let callerHasActor = callerIsolation != nil
        return try await withTaskCancellationHandler {
            // Unsafe rather than checked: the checked kind allocates a guard object per caller, and
            // each waiter is resumed exactly once by construction (see `Waiter.continuation`).
            try await withUnsafeThrowingContinuation { continuation in
                // Set before the waiter is attached (under the lock below), so whoever detaches it
                // finds it.
                waiter.continuation = continuation
                let arrival = arriving { reading, machine -> Arrival in
                    // Checked under the lock that `cancelWaiter` takes: a cancellation either
                    // happened before (and is seen here) or finds the waiter registered.
                    if Task.isCancelled { return .cancelled }
                    return arrive(plan, waiter: waiter, at: reading, in: &machine)
                }
                switch arrival {
                case .joined(let watchers): for watcher in watchers { watcher.resume() }
                case .answered(let stored): continuation.resume(returning: (stored.data, stored.response))
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .launch(let launch):
                    if callerHasActor { launchOffCaller(launch) } else { self.launch(launch) }
                case .needsClock, .declined: preconditionFailure("a caller's arrival ends with the time read")
                }
            }
        } onCancel: {
            cancelWaiter(waiter)
        }
    }

    /// Starts `plan`, a background revalidation (see ``RequestPlanner/backgroundRevalidation(of:for:)``),
    /// with no caller waiting: it joins a fetch of the key in flight by the rule every plan follows,
    /// and then sends nothing. An entry under a pending optimistic update is revalidated once at
    /// most: the answer goes under the update and leaves the visible entry as stale as it was.
    nonisolated func revalidateInBackground(_ plan: FetchPlan) {
        let arrival = arriving { reading, machine -> Arrival in
            // Claimed once: the second arrival, with the time, has claimed it already.
            if reading == nil, !machine.optimistic.claimBackgroundRevalidation(of: plan.key) { return .declined }
            return arrive(plan, waiter: nil, at: reading, in: &machine)
        }
        switch arrival {
        case .launch(let launch): self.launch(launch)
        case .joined(let watchers): for watcher in watchers { watcher.resume() }
        case .answered, .cancelled, .declined, .needsClock: break
        }
    }

    /// Starts `plan` for a prefetch's `waiter`, which answers its ``Prefetch`` rather than a
    /// suspended caller: it joins a fetch in flight, finds the answer stored meanwhile, or starts a
    /// fetch, launched from here so that prefetches reach their host's queue in the order made.
    nonisolated func arrive(_ plan: FetchPlan, waiter: Waiter) {
        let arrival = arriving { arrive(plan, waiter: waiter, at: $0, in: &$1) }
        switch arrival {
        case .joined(let watchers): for watcher in watchers { watcher.resume() }
        case .answered: waiter.prefetch?.end(.alreadyStored)
        case .cancelled, .declined: waiter.prefetch?.end(.cancelled)
        case .launch(let launch): self.launch(launch)
        case .needsClock: preconditionFailure("a prefetch's arrival ends with the time read")
        }
    }

    /// Runs `body` on the fetches in flight under the in-flight lock, then, once the lock is
    /// released, starts the loads that a fetch's priority rising gave a free place in the queue
    /// (``FetchStateMachine/takePriorityRise()``): every event that can raise a fetch's priority
    /// (a caller joining, a load recorded, a prefetch's priority set) goes through here.
    @inline(__always)
    nonisolated func changingFetches<Result>(_ body: (inout FetchStateMachine) -> Result) -> Result {
        let (result, rose) = inFlight.withLock { machine in (body(&machine), machine.takePriorityRise()) }
        if rose { queue.startReady() }
        return result
    }

    /// Runs `arrive` on the fetches in flight (``changingFetches(_:)``) without the time, which a
    /// join does not need; when it needs it (``Arrival/needsClock``), reads the clock with the lock
    /// released, and runs it again with that reading: the app's clock is never read under the lock.
    /// The first run, and only it, gets nil: what `arrive` does once (a background revalidation's
    /// claim) it does on nil.
    @inline(__always)
    private nonisolated func arriving(_ arrive: (ClockReading?, inout FetchStateMachine) -> Arrival) -> Arrival {
        let arrival = changingFetches { arrive(nil, &$0) }
        guard case .needsClock = arrival else { return arrival }
        let reading = planner.policy.clock.reading
        return changingFetches { arrive(reading, &$0) }
    }

    /// What became of a plan arriving at the fetches in flight.
    private enum Arrival {
        /// It joined a fetch in flight (or, for a plan with no caller, found one); the tests
        /// watching the joins that it let through are to be resumed.
        case joined(WatchedCount.Watchers)
        /// A fetch of its key completed between its plan and now: it takes that stored answer.
        case answered(MemoryAnswer)
        /// Its caller was cancelled before it could join.
        case cancelled
        /// It started a fetch, to launch once the lock is released.
        case launch(Launch)
        /// It could not join, and takes a stored answer or starts a fetch only with the time:
        /// it arrives again once the clock is read (``arriving(_:)``).
        case needsClock
        /// A background revalidation the pending optimistic updates of its key have had already.
        case declined
    }

    /// The one rule for a plan arriving with `waiter` (nil for a background revalidation): join
    /// the fetch in flight its sharing allows, else take an answer stored meanwhile when it may,
    /// else start a fetch, both at `reading` (nil until the clock is read: then it ends with
    /// ``Arrival/needsClock``). Call with the in-flight lock held.
    private nonisolated func arrive(
        _ plan: FetchPlan, waiter: Waiter?, at reading: ClockReading?, in machine: inout FetchStateMachine
    ) -> Arrival {
        if let watchers = machine.join(waiter, key: plan.key, sharing: plan.sharing) { return .joined(watchers) }
        guard let reading else { return .needsClock }
        if plan.mayTakeStoredAnswer,
            let stored = planner.storedAnswer(for: plan, reads: waiter?.reads ?? true, at: reading.now)
        {
            return .answered(stored)
        }
        if waiter == nil { store.record { $0.backgroundRevalidations += 1 } }
        // A credential's refresh's own request: never prepared, and never waiting for a refresh.
        let started = machine.start(
            key: plan.key, request: plan.request, reason: plan.reason, isReload: plan.isReload,
            requestTime: reading.date, settings: plan.settings, starter: waiter,
            bypassesPreparation: preparation != nil && RequestPreparation.isInsideRefresh)
        return .launch(launchable(started, in: &machine))
    }

    /// A fetch to send, once the in-flight lock is released.
    struct Launch {
        let id: Int
        let request: URLRequest
        let reason: Plan.FetchReason
        /// Whether it asks the origin to confirm a stored entry.
        let isConditional: Bool
        let key: CacheKey
        /// Whether it goes out through ``RequestPreparation/outgoing(_:keyedFor:)``: every
        /// request but a credential refresh's own.
        let prepares: Bool
        /// The fetch's stage whose load this is (``Fetch/stage``).
        let stage: Int
        /// The fetch's priority when it was made: the queue's order (``FetchQueue``).
        let priority: FetchPriority
    }

    /// The launch of a fetch just started, with the request it sends (see ``outgoingRequest(for:)``).
    /// Call with the in-flight lock held.
    nonisolated func launchable(_ started: (id: Int, fetch: Fetch), in machine: inout FetchStateMachine) -> Launch {
        let (request, stage) = outgoingRequest(for: started.fetch, in: &machine)
        return Launch(
            id: started.id, request: request, reason: started.fetch.reason,
            isConditional: started.fetch.revalidating != nil, key: started.fetch.key,
            prepares: !started.fetch.bypassesPreparation, stage: stage, priority: started.fetch.priority)
    }

    /// The request `fetch` sends: its starter's, made conditional on the stored entry when there
    /// is one with validators and ``Configuration/Freshness/usesConditionalRequests`` is on. Call with the
    /// in-flight lock held.
    /// - Returns: the request, and the fetch's stage whose load sends it.
    private nonisolated func outgoingRequest(for fetch: Fetch, in machine: inout FetchStateMachine) -> (
        URLRequest, stage: Int
    ) {
        // A query `POST` is never conditional: `If-None-Match` on a `POST` asks something else.
        guard usesConditionalRequests, fetch.key.method != "POST",
            let entry = store.peek(fetch.key, selectedBy: fetch.request.allHTTPHeaderFields),
            entry.hasValidators
        else {
            return (fetch.request, machine.sending(fetch, revalidating: nil))
        }
        let stage = machine.sending(fetch, revalidating: entry)
        store.record { $0.conditionalRequests += 1 }
        return (ConditionalRequest.revalidating(fetch.request, against: entry), stage)
    }

    /// Sends a fetch's request and completes the fetch with the answer, on whatever thread the
    /// loader has it: no task is woken in between.
    nonisolated func launch(_ launch: Launch) {
        guard let url = launch.request.url else { return }
        let interval = reporter.fetchStarted(url, reason: launch.reason, conditional: launch.isConditional)
        if launch.prepares, let preparation, preparation.decoratesOutgoing {
            launchPrepared(launch, by: preparation, interval: interval)
        } else {
            send(launch.request, of: launch.id, stage: launch.stage, priority: launch.priority, interval: interval)
        }
    }

    /// Sends `request` for fetch `fetchID` at `priority` through the ``FetchQueue``; the queued
    /// load becomes the fetch's load, or part of `prepared`.
    nonisolated func send(
        _ request: URLRequest, of fetchID: Int, stage: Int, priority: FetchPriority,
        interval: TransportEvents.FetchInterval, within prepared: PreparedLoad? = nil
    ) {
        let load = queue.start(request, priority: priority) { result, sentAt in
            // Timed from when it left the queue: the duration reported is the network's.
            self.complete(
                fetchID, with: result, interval: interval.sent(at: sentAt), refused: self.refuses(result, to: request))
        }
        if let prepared {
            if prepared.started(load, at: priority) {
                // Its priority may have risen into a free place while its request was prepared.
                queue.startReady()
            } else {
                load.cancel()
            }
            return
        }
        let action = changingFetches { $0.loadStarted(load, for: fetchID, stage: stage, at: priority) }
        // Every caller left before the load was recorded (or it has completed: then this does nothing).
        if case .cancel = action { load.cancel() }
    }

    /// Sends a fetch's request from a task of its own, off the caller's actor: creating and
    /// resuming the data task is tens of microseconds of Foundation's work (more through the header
    /// override), which would otherwise run on that actor, the main thread for a view model. A
    /// fetch every caller left before the task ran is not sent.
    private nonisolated func launchOffCaller(_ launch: Launch) {
        Task.detached(priority: Task.currentPriority) {
            guard self.inFlight.withLock({ $0.fetches[launch.id] != nil }) else { return }
            self.launch(launch)
        }
    }

    /// Releases a cancelled caller at once; cancels the fetch when it was the last one waiting.
    nonisolated func cancelWaiter(_ waiter: Waiter) {
        var next: Launch?
        let now = planner.policy.clock.date
        let action = inFlight.withLock { machine in
            let action = machine.leave(waiter, requestTime: now)
            if case .resumeAndCancel(_, let queued?) = action { next = launchQueued(queued, in: &machine) }
            return action
        }
        switch action {
        case .none:
            break
        case .resume:
            waiter.resume(with: .failure(CancellationError()))
        case .resumeAndCancel(let load, _):
            waiter.resume(with: .failure(CancellationError()))
            load?.cancel()
        }
        if let next { launch(next) }
    }

    /// Returns once ``CacheStatistics/coalescedJoins`` has reached `count`: for tests, through
    /// TransportCacheTesting, when a caller joins in a task a test cannot start up to its join.
    package nonisolated func waitForJoins(_ count: Int) async {
        await withCheckedContinuation { continuation in
            if !inFlight.withLock({ $0.watchJoins(reaching: count, continuation) }) { continuation.resume() }
        }
    }

    /// What the transport still tracks on behalf of callers: fetches in flight, keys a request
    /// may join a fetch on, and suspended callers. All zero whenever no request is in progress;
    /// tests read it to prove that no caller or continuation is left behind.
    nonisolated var pendingWork: (fetches: Int, joinable: Int, waiters: Int) {
        inFlight.withLock { ($0.fetches.count, $0.joinable.count, $0.waiterCount) }
    }

    /// The keys with optimistic updates pending: none once every update has settled.
    nonisolated var pendingUpdateKeys: Int { inFlight.withLock { $0.optimistic.pendingKeys.count } }
}
