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
    nonisolated(nonsending) func fetch(_ plan: consuming FetchPlan) async throws -> (Data, URLResponse) {
        let waiter = Waiter(request: plan.request, reason: plan.reason, priority: .current)
        // Read into a constant first: `#isolation != nil` as one expression crashes Swift 6.3.1's
        // debug code generation here.
        let callerIsolation = #isolation
        let callerHasActor = callerIsolation != nil
        // Handed to the arrival, and let go of there: a caller that joins a fetch frees its plan
        // before it suspends, not on the way out once answered, when ten thousand such callers
        // run at once.
        var unarrived = Optional(plan)
        return try await withTaskCancellationHandler {
            // Unsafe rather than checked: the checked kind allocates a guard object per caller, and
            // each waiter is resumed exactly once by construction (see `Waiter.continuation`).
            try await withUnsafeThrowingContinuation { continuation in
                // Set before the waiter is attached (under the lock below), so whoever detaches it
                // finds it.
                waiter.continuation = continuation
                arrive(unarrived.take()!, waiter: waiter, launchingOffCaller: callerHasActor)
            }
        } onCancel: {
            cancelWaiter(waiter)
        }
    }

    /// Starts the background revalidation of the entry that `answer` gave `request` from within
    /// its stale-while-revalidate window, with no caller waiting: it joins a fetch of the key in
    /// flight by the rule every plan follows, and then sends nothing. An entry under a pending
    /// optimistic update is revalidated once at most: the answer goes under the update and leaves
    /// the visible entry as stale as it was.
    ///
    /// Its plan (``RequestPlanner/backgroundRevalidation(of:for:)``: the request's fields, its
    /// URL's settings, which may ask the app's predicate) is made only when nothing in flight took
    /// it, between the arrival's two steps, with no lock held: an answer given while its entry's
    /// revalidation is in flight makes none, which cost such an answer 1,100 of its 5,250
    /// instructions. Kept out of line: inlined, it made ``answered(_:to:headers:)`` too large to be
    /// inlined into the hit, which then paid a call, a retain and a release.
    @inline(never)
    nonisolated func revalidateInBackground(_ answer: MemoryAnswer, of request: URLRequest) {
        let (key, sharing) = planner.backgroundRevalidationArrival(of: answer)
        perform(
            arriving {
                $0.arrive(key, sharing: sharing, waiter: nil, cancelled: false)
            } preparing: {
                planner.backgroundRevalidation(of: answer, for: request)
            } then: { plan, reading, machine in
                machine.arrive(plan, waiter: nil, at: reading, facts: self)
            })
    }

    /// Starts `plan` for `waiter`, a suspended caller or a prefetch's (which answers its
    /// ``Prefetch``): it joins a fetch in flight, finds the answer stored meanwhile, or starts a
    /// fetch, launched from here (so that prefetches reach their host's queue in the order made)
    /// unless `launchingOffCaller`.
    ///
    /// Out of line and synchronous: inlined into ``fetch(_:)``'s continuation closure, the actions'
    /// values made that async frame 960 bytes, and a suspended caller's frames then spanned four of
    /// the task allocator's slabs, each a `malloc` of a kilobyte per caller.
    @inline(never)
    nonisolated func arrive(_ plan: FetchPlan, waiter: Waiter, launchingOffCaller: Bool = false) {
        // A caller's cancellation is checked under the lock that `cancelWaiter` takes: it either
        // happened before (and is seen here) or finds the waiter registered. A prefetch is
        // cancelled through its handle, not its task.
        func cancelled() -> Bool { waiter.reads && Task.isCancelled }
        perform(
            arriving {
                $0.arrive(plan.key, sharing: plan.sharing, waiter: waiter, cancelled: cancelled())
            } preparing: {
                plan
            } then: { plan, reading, machine in
                machine.arrive(plan, waiter: waiter, cancelled: cancelled(), at: reading, facts: self)
            }, launchingOffCaller: launchingOffCaller)
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

    /// Runs an arrival's first step, `first`, on the fetches in flight (``changingFetches(_:)``)
    /// without the time or the whole plan, which a join needs neither of; when it needs them
    /// (``FetchAction/needsClock``), makes the plan (`preparing`) and reads the clock with the
    /// lock released, and runs the second step, `then`, with both: neither the app's clock nor
    /// a plan's reading of the app's settings ever runs under the lock. What an arrival does once
    /// (a background revalidation's claim) its first step does.
    @inline(__always)
    private nonisolated func arriving<Prepared>(
        _ first: (inout FetchStateMachine) -> FetchAction,
        preparing prepare: () -> Prepared,
        then: (Prepared, ClockReading, inout FetchStateMachine) -> FetchAction
    ) -> FetchAction {
        let arrival = changingFetches { first(&$0) }
        // Consumed, not matched in place: matching an action in place copies it.
        switch consume arrival {
        case .needsClock:
            let prepared = prepare()
            let reading = planner.policy.clock.reading
            return changingFetches { then(prepared, reading, &$0) }
        case let decided:
            return decided
        }
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
        // Every caller left before the load was recorded (or it has completed: then this does nothing).
        perform(changingFetches { $0.loadStarted(load, for: fetchID, stage: stage, at: priority) })
    }

    /// Sends a fetch's request from a task of its own, off the caller's actor: creating and
    /// resuming the data task is tens of microseconds of Foundation's work (more through the header
    /// override), which would otherwise run on that actor, the main thread for a view model. A
    /// fetch every caller left before the task ran is not sent.
    nonisolated func launchOffCaller(_ launch: Launch) {
        Task.detached(priority: Task.currentPriority) {
            guard self.inFlight.withLock({ $0.isWaitedFor(launch.id) }) else { return }
            self.launch(launch)
        }
    }

    /// Releases a cancelled caller at once; cancels the fetch when it was the last one waiting.
    nonisolated func cancelWaiter(_ waiter: Waiter) {
        let now = planner.policy.clock.date
        perform(inFlight.withLock { $0.leave(waiter, requestTime: now, facts: self) })
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
