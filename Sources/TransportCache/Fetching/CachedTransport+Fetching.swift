import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CachedTransport {
    /// Performs a ``FetchPlan``: joins the fetch in flight for its key when it may, takes an answer
    /// stored meanwhile, or starts a fetch. Runs on the caller's executor; it never hops onto the
    /// actor.
    nonisolated(nonsending) func fetch(_ plan: FetchPlan) async throws -> (Data, URLResponse) {
        let waiter = Waiter(request: plan.request, reason: plan.reason)
        return try await withTaskCancellationHandler {
            // Unsafe rather than checked: the checked kind allocates a guard object per caller, and
            // each waiter is resumed exactly once by construction (see `Waiter.continuation`).
            try await withUnsafeThrowingContinuation { continuation in
                enum Step { case joined, answered((Data, URLResponse)), cancelled, launch(Launch) }
                // Set before the waiter is attached (under the lock below), so whoever detaches it
                // finds it.
                waiter.continuation = continuation
                let step = inFlight.withLock { machine -> Step in
                    // Checked under the lock that `cancelWaiter` takes: a cancellation either
                    // happened before (and is seen here) or finds the waiter registered.
                    if Task.isCancelled { return .cancelled }
                    if machine.join(waiter, key: plan.key, sharing: plan.sharing) { return .joined }
                    // A fetch of the key may have completed between the plan and now.
                    if plan.mayTakeStoredAnswer, let stored = planner.storedAnswer(for: plan) {
                        return .answered((stored.data, stored.response))
                    }
                    store.record { $0.networkFetches += 1 }
                    let started = machine.start(
                        key: plan.key, request: plan.request, reason: plan.reason, isReload: plan.isReload,
                        requestTime: planner.policy.clock.date, starter: waiter)
                    return .launch(launchable(started))
                }
                switch step {
                case .joined: break
                case .answered(let answer): continuation.resume(returning: answer)
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .launch(let launch): self.launch(launch)
                }
            }
        } onCancel: {
            cancelWaiter(waiter)
        }
    }

    /// Starts one background revalidation of the entry a stale-window answer to `request` came
    /// from, unless a fetch of its key is already in flight (which will bring the entry up to date
    /// itself).
    nonisolated func revalidateInBackground(_ answer: MemoryAnswer, of request: URLRequest) {
        let started = inFlight.withLock { machine -> Launch? in
            guard machine.joinable[answer.entry.key] == nil else { return nil }
            store.record {
                $0.networkFetches += 1
                $0.backgroundRevalidations += 1
            }
            let started = machine.start(
                key: answer.entry.key, request: request, reason: .expired, isReload: true,
                requestTime: planner.policy.clock.date, starter: nil)
            return launchable(started)
        }
        if let started { launch(started) }
    }

    /// A fetch to send, once the in-flight lock is released.
    struct Launch {
        let id: Int
        let request: URLRequest
        let reason: Plan.FetchReason
        /// Whether it asks the origin to confirm a stored entry.
        let isConditional: Bool
    }

    /// The launch of a fetch just started, with the request it sends (see ``outgoingRequest(for:)``).
    /// Call with the in-flight lock held.
    private nonisolated func launchable(_ started: (id: Int, fetch: Fetch)) -> Launch {
        let request = outgoingRequest(for: started.fetch)
        return Launch(
            id: started.id, request: request, reason: started.fetch.reason,
            isConditional: started.fetch.revalidating != nil)
    }

    /// The request `fetch` sends: its starter's, made conditional on the stored entry when there
    /// is one with validators and ``Configuration/usesConditionalRequests`` is on. Call with the
    /// in-flight lock held.
    private nonisolated func outgoingRequest(for fetch: Fetch) -> URLRequest {
        // A query `POST` is never conditional: `If-None-Match` on a `POST` asks something else.
        guard usesConditionalRequests, fetch.key.method != "POST",
            let entry = store.peek(fetch.key, selectedBy: fetch.request.allHTTPHeaderFields),
            entry.hasValidators
        else {
            fetch.revalidating = nil
            return fetch.request
        }
        fetch.revalidating = entry
        store.record { $0.conditionalRequests += 1 }
        return ConditionalRequest.revalidating(fetch.request, against: entry)
    }

    /// Sends a fetch's request and completes the fetch with the answer, on whatever thread the
    /// loader has it: no task is woken in between.
    private nonisolated func launch(_ launch: Launch) {
        let fetchID = launch.id
        guard let url = launch.request.url else { return }
        let interval = reporter.fetchStarted(url, reason: launch.reason, conditional: launch.isConditional)
        let load = loader.start(launch.request) { result in
            self.complete(fetchID, with: result, interval: interval)
        }
        let action = inFlight.withLock { $0.loadStarted(load, for: fetchID) }
        // Every caller left before the load was recorded (or it has completed: then this does nothing).
        if case .cancel = action { load.cancel() }
    }

    /// Takes a fetch's answer, or schedules its next attempt when the answer is one the
    /// ``Configuration/retryPolicy`` tries again. Otherwise the committer stores it, each waiting caller whose request it
    /// matches gets it, the others are sent on to a fetch of their own. Once the in-flight lock is
    /// released, changes are published, then callers resumed (in the order they joined) and loads
    /// started.
    ///
    /// A `304` to a conditional fetch answers with the stored body (status 200); when that entry
    /// is gone (invalidated, evicted or replaced while the request was in flight) the fetch is
    /// sent again without conditions, so no caller ever gets the empty body of a 304.
    private nonisolated func complete(
        _ fetchID: Int, with result: Result<(Data, URLResponse), any Error>, interval: TransportEvents.FetchInterval
    ) {
        let duration = reporter.fetchEnded(interval, with: result)
        // The waiters, and for each the index of its answer in `results` (-1: not answered here).
        // Callers of one fetch nearly always share one answer, held once rather than once per
        // caller: ten thousand copies of one answer cost as much to release as to resume them.
        // Answers differ only by outcome, and outcomes of one completion only by why the caller
        // fetched and whether it joined: `made` finds the answer already made for those two.
        var waiters: [Waiter?] = []
        var answers: [Int] = []
        var results: [Result<(Data, URLResponse), any Error>] = []
        var made: [(reason: Plan.FetchReason, joined: Bool, index: Int)] = []
        var launches: [Launch] = []
        var retry: (attempt: Int, delay: Duration)?
        inFlight.withLock { machine in
            guard let fetch = machine.fetches[fetchID] else { return }  // Every caller left.
            if let delay = retryDelay(of: fetch, after: result) {
                fetch.attempt += 1
                retry = (fetch.attempt, delay)
                fetch.load = waitThenRetry(fetchID, after: delay)
                return
            }
            var result = result
            var revalidated: CacheOutcome.Storage?
            if case .success(let (_, fetched)) = result, let validated = fetch.revalidating,
                let notModified = fetched as? HTTPURLResponse, notModified.statusCode == 304
            {
                fetch.revalidating = nil
                if let confirmed = committer.commitNotModified(notModified, confirming: validated, for: fetch) {
                    result = .success((confirmed.data, confirmed.response))
                    revalidated = confirmed.storage
                } else if fetch.hasWaiters {
                    // Without callers (a background revalidation of an entry dropped meanwhile)
                    // the 304 is taken as it is: not stored, and counted as a failed revalidation.
                    launches.append(
                        Launch(id: fetchID, request: fetch.request, reason: fetch.reason, isConditional: false))
                    return
                }
            }
            guard let completed = machine.complete(fetchID) else { return }
            waiters = completed.waiters
            answers = Array(repeating: -1, count: waiters.count)
            /// The index in `results` of `waiter`'s answer, made by `make` from the outcome with
            /// `source` and `storage` the first time its reason and joining come up.
            func answer(
                for waiter: Waiter, _ source: (Plan.FetchReason) -> CacheOutcome.Source,
                _ storage: CacheOutcome.Storage?, _ make: (CacheOutcome) -> Result<(Data, URLResponse), any Error>
            ) -> Int {
                let joined = !fetch.wasStarted(by: waiter)
                if let found = made.last(where: { $0.reason == waiter.reason && $0.joined == joined }) {
                    return found.index
                }
                results.append(
                    make(
                        CacheOutcome(
                            source: source(waiter.reason), joinedFetch: joined, storage: storage,
                            networkDuration: duration)))
                made.append((waiter.reason, joined, results.count - 1))
                return results.count - 1
            }
            switch result {
            case .failure(let error):
                if fetch.isBackground { store.record { $0.failedBackgroundRevalidations += 1 } }
                for (position, waiter) in waiters.enumerated() {
                    guard let waiter else { continue }
                    let attempt = CacheOutcome(
                        source: .network(waiter.reason), joinedFetch: !fetch.wasStarted(by: waiter),
                        networkDuration: duration)
                    // A revalidation asked the origin, not the store: its failure is its answer.
                    if waiter.reason != .revalidation,
                        let stale = planner.answerAfterFailure(
                            of: fetch.key, fields: waiter.request.allHTTPHeaderFields, error: error, outcome: attempt)
                    {
                        results.append(.success(stale))
                        answers[position] = results.count - 1
                    } else {
                        answers[position] = answer(for: waiter, { .network($0) }, nil) { .failure(error.carrying($0)) }
                    }
                }
            case .success(let (data, fetched)):
                let response: URLResponse
                let storage: CacheOutcome.Storage
                if let revalidated {
                    response = fetched
                    storage = revalidated
                } else {
                    response = committer.prepared(fetched)
                    storage = committer.commitFetched(data, response: response, for: fetch)
                    if fetch.isBackground, case .notStored(let reason) = storage, reason.refusesAnswer {
                        store.record { $0.failedBackgroundRevalidations += 1 }
                    }
                }
                let vary = Vary.names(of: response)
                let starterFields = vary.isEmpty ? nil : fetch.request.allHTTPHeaderFields
                var unmatched: [Waiter] = []
                for (position, waiter) in waiters.enumerated() {
                    guard let waiter else { continue }
                    if vary.isEmpty || fetch.wasStarted(by: waiter)
                        || Vary.answer(
                            varyingOn: vary, fetchedWith: starterFields, matches: waiter.request.allHTTPHeaderFields)
                    {
                        let source: (Plan.FetchReason) -> CacheOutcome.Source =
                            revalidated == nil ? { .network($0) } : { .revalidated($0) }
                        answers[position] = answer(for: waiter, source, storage) { outcome in
                            // The first outcome takes the fetched response itself when it can
                            // carry one: a copy costs Foundation a canonicalisation of every field.
                            // Never a 304's: its response may be the stored entry's.
                            if revalidated == nil, let fetched = response as? TransportHTTPURLResponse,
                                fetched.settle(outcome)
                            {
                                return .success((data, fetched))
                            }
                            return .success((data, HTTPResponseBuilder.answer(response, outcome: outcome)))
                        }
                    } else {
                        unmatched.append(waiter)
                    }
                }
                // Coalesced on the key, but the answer cannot serve these callers' requests: they
                // need representations of their own, one fetch for each set of values.
                for group in Vary.groups(unmatched, varyingOn: vary, fields: { $0.request.allHTTPHeaderFields }) {
                    store.record { $0.networkFetches += 1 }
                    let started = machine.restart(group, from: fetch, requestTime: planner.policy.clock.date)
                    launches.append(launchable(started))
                }
            }
        }
        if let retry {
            reporter.retrying(interval.url, attempt: retry.attempt, delay: retry.delay)
            return
        }
        // Published before any caller is resumed: a caller that subscribes once its answer is in
        // hears only later changes, never the one this answer made.
        committer.publishQueuedChanges()
        for position in waiters.indices {
            guard let waiter = waiters[position], answers[position] >= 0 else { continue }
            // Let go of it first: the caller, once resumed, then frees it on its own thread.
            waiters[position] = nil
            waiter.resume(with: results[answers[position]])
        }
        for launch in launches { self.launch(launch) }
    }

    /// How long `fetch` waits before its next attempt after its current one ended with `result`,
    /// as ``Configuration/retryPolicy`` says; nil when the result is final. Call with the
    /// in-flight lock held.
    private nonisolated func retryDelay(
        of fetch: Fetch, after result: Result<(Data, URLResponse), any Error>
    ) -> Duration? {
        // `GET` and `HEAD` only: a query `POST` shares the fetch path, not the retries.
        guard let retryPolicy, fetch.key.method != "POST" else { return nil }
        return retryPolicy.delay(
            after: result, attempt: fetch.attempt, now: planner.policy.clock.date, random: .random(in: 0...1))
    }

    /// The wait before fetch `fetchID`'s next attempt: it then sends the fetch's request again
    /// (conditional on what is stored then), unless every caller left meanwhile, which cancels
    /// the wait. Call with the in-flight lock held: the wait is the fetch's load before the wait
    /// can end.
    private nonisolated func waitThenRetry(_ fetchID: Int, after delay: Duration) -> any NetworkLoad {
        let clock = planner.policy.clock
        return TaskLoad(
            task: Task {
                do { try await clock.sleep(for: delay) } catch { return }
                let next = inFlight.withLock { machine -> Launch? in
                    guard let fetch = machine.fetches[fetchID] else { return nil }
                    fetch.requestTime = clock.date
                    store.record { $0.retries += 1 }
                    return launchable((fetchID, fetch))
                }
                if let next { launch(next) }
            })
    }

    /// Releases a cancelled caller at once; cancels the fetch when it was the last one waiting.
    private nonisolated func cancelWaiter(_ waiter: Waiter) {
        switch inFlight.withLock({ $0.leave(waiter) }) {
        case .none:
            break
        case .resume:
            waiter.resume(with: .failure(CancellationError()))
        case .resumeAndCancel(let load):
            waiter.resume(with: .failure(CancellationError()))
            load?.cancel()
        }
    }

    /// What the transport still tracks on behalf of callers: fetches in flight, keys a request
    /// may join a fetch on, and suspended callers. All zero whenever no request is in progress;
    /// tests read it to prove that no caller or continuation is left behind.
    nonisolated var pendingWork: (fetches: Int, joinable: Int, waiters: Int) {
        inFlight.withLock { ($0.fetches.count, $0.joinable.count, $0.waiterCount) }
    }
}
