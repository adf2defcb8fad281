import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CachedTransport {
    /// Completes fetch `fetchID` with `result`, on whatever thread the loader has it: the answer
    /// read through the header override (``Committer/prepared(_:)``, its one application), then
    /// one step under the in-flight lock, then its action.
    /// - Parameter refused: the answer refuses the request's credential (see ``Credentials``),
    ///   as the app's authenticator judged with no lock held.
    nonisolated func complete(
        _ fetchID: Int, with result: Result<(Data, URLResponse), any Error>, interval: TransportEvents.FetchInterval,
        refused: Bool = false
    ) {
        let duration = reporter.fetchEnded(interval, with: result)
        let result = result.map { data, response in (data, committer.prepared(response)) }
        let reading = planner.policy.clock.reading
        perform(
            inFlight.withLock { machine in
                machine.attemptEnded(
                    fetchID, with: result, duration: duration, refused: refused, at: reading, facts: self)
            })
    }
}

extension CachedTransport: FetchFacts {
    nonisolated func storedAnswer(for plan: FetchPlan, reads: Bool, at now: ContinuousClock.Instant) -> MemoryAnswer? {
        planner.storedAnswer(for: plan, reads: reads, at: now)
    }

    nonisolated var startsInsideRefresh: Bool { preparation != nil && RequestPreparation.isInsideRefresh }

    nonisolated func backgroundRevalidationStarted() { store.record { $0.backgroundRevalidations += 1 } }

    /// The stored entry with validators, when ``Configuration/Freshness/usesConditionalRequests``
    /// is on; never for a query `POST` (`If-None-Match` on a `POST` asks something else).
    nonisolated func entryToConfirm(for fetch: Fetch) -> StoredResponse? {
        guard usesConditionalRequests, fetch.key.method != "POST",
            let entry = store.peek(fetch.key, selectedBy: fetch.request.allHTTPHeaderFields), entry.hasValidators
        else { return nil }
        store.record { $0.conditionalRequests += 1 }
        return entry
    }

    /// As ``Configuration/Network/retryPolicy`` says, for `GET` and `HEAD` only: a query `POST`
    /// shares the fetch path, not the retries.
    nonisolated func retryDelay(
        of fetch: Fetch, after result: Result<(Data, URLResponse), any Error>, at date: Date
    ) -> Duration? {
        guard let retryPolicy, fetch.key.method != "POST" else { return nil }
        return retryPolicy.delay(after: result, attempt: fetch.attempt, now: date, random: .random(in: 0...1))
    }

    nonisolated func retried() { store.record { $0.retries += 1 } }

    /// The entry updated by ``Committer/commitNotModified(_:confirming:for:at:in:)``.
    nonisolated func commitNotModified(
        _ notModified: HTTPURLResponse, of entry: StoredResponse, for fetch: Fetch, at reading: ClockReading,
        in machine: inout FetchStateMachine
    ) -> (data: Data, response: URLResponse, storage: CacheOutcome.Storage)? {
        committer.commitNotModified(notModified, confirming: entry, for: fetch, at: reading, in: &machine)
    }

    /// Stores a fetched answer (``Committer/commitFetched(_:response:for:at:in:)``) and answers
    /// the callers it serves; a failure answers each caller with the stored entry when
    /// ``Configuration/Freshness/staleIfError`` allows it, else with the error.
    nonisolated func commitAndAnswer(
        _ fetched: FetchedAnswer, of fetch: Fetch, to callers: CallerAnswers, at reading: ClockReading,
        in machine: inout FetchStateMachine
    ) -> [[Waiter]] {
        switch fetched {
        case .failed(let error):
            answerFailure(error, of: fetch, to: callers, at: reading.now)
            return []
        case .fetched(let data, let response):
            let storage = committer.commitFetched(data, response: response, for: fetch, at: reading, in: &machine)
            if fetch.isBackground, case .notStored(let reason) = storage, reason.refusesAnswer {
                store.record { $0.failedBackgroundRevalidations += 1 }
            }
            // A server error stored on its own explicit freshness is the origin's answer to give.
            if case .notStored = storage {
                answerStaleAfterServerError(response, of: fetch, to: callers, at: reading.now)
            }
            return answerCallers(data, response, storage, revalidated: false, of: fetch, to: callers)
        case .notModified(let data, let response, let storage):
            return answerCallers(data, response, storage, revalidated: true, of: fetch, to: callers)
        }
    }

    /// Answers each caller of a failed fetch: with the stored entry, marked stale, when
    /// ``Configuration/Freshness/staleIfError`` allows it, else with the error.
    private nonisolated func answerFailure(
        _ error: any Error, of fetch: Fetch, to callers: CallerAnswers, at now: ContinuousClock.Instant
    ) {
        if fetch.isBackground { store.record { $0.failedBackgroundRevalidations += 1 } }
        for position in callers.positions {
            guard let waiter = callers.waiter(at: position) else { continue }
            let attempt = CacheOutcome(
                source: .network(waiter.reason), joinedFetch: !fetch.wasStarted(by: waiter),
                networkDuration: callers.duration)
            // A revalidation asked the origin, not the store: its failure is its answer.
            if waiter.reason != .revalidation,
                let stale = planner.answerAfterFailure(
                    of: fetch.key, fields: waiter.request.allHTTPHeaderFields, error: error, outcome: attempt, at: now)
            {
                callers.answer(position, with: .success(stale))
            } else {
                callers.answer(position, source: { .network($0) }, storage: nil, make: { .failure(error.carrying($0)) })
            }
        }
    }

    /// Answers each caller that the stored entry may answer instead of `response`, a server error
    /// (``RequestPlanner/answerAfterServerError(of:fields:response:outcome:at:)``), with that entry;
    /// the others get `response`.
    private nonisolated func answerStaleAfterServerError(
        _ response: URLResponse, of fetch: Fetch, to callers: CallerAnswers, at now: ContinuousClock.Instant
    ) {
        for position in callers.positions {
            guard let waiter = callers.waiter(at: position), waiter.reason != .revalidation else { continue }
            let attempt = CacheOutcome(
                source: .network(waiter.reason), joinedFetch: !fetch.wasStarted(by: waiter),
                networkDuration: callers.duration)
            if let stale = planner.answerAfterServerError(
                of: fetch.key, fields: waiter.request.allHTTPHeaderFields, response: response, outcome: attempt,
                at: now)
            {
                callers.answer(position, with: .success(stale))
            }
        }
    }

    /// Answers each caller whose request the answer's `Vary` serves with `data` and `response`.
    /// - Returns: the others, in groups of one set of values each, which need representations of
    ///   their own.
    private nonisolated func answerCallers(
        _ data: Data, _ response: URLResponse, _ storage: CacheOutcome.Storage, revalidated: Bool, of fetch: Fetch,
        to callers: CallerAnswers
    ) -> [[Waiter]] {
        let vary = Vary.names(of: response)
        let starterFields = vary.isEmpty ? nil : fetch.request.allHTTPHeaderFields
        let source: (Plan.FetchReason) -> CacheOutcome.Source = revalidated ? { .revalidated($0) } : { .network($0) }
        var unmatched: [Waiter] = []
        for position in callers.positions {
            guard let waiter = callers.waiter(at: position), !callers.isAnswered(position) else { continue }
            guard
                vary.isEmpty || fetch.wasStarted(by: waiter)
                    || Vary.answer(
                        varyingOn: vary, fetchedWith: starterFields, matches: waiter.request.allHTTPHeaderFields)
            else {
                unmatched.append(waiter)
                continue
            }
            callers.answer(position, source: source, storage: storage) { outcome in
                // The first outcome takes the fetched response itself when it can carry one: a
                // copy costs Foundation a canonicalisation of every field. Never a 304's: its
                // response may be the stored entry's.
                if !revalidated, let fetched = response as? TransportHTTPURLResponse, fetched.settle(outcome) {
                    return .success((data, fetched))
                }
                return .success((data, HTTPResponseBuilder.answer(response, outcome: outcome)))
            }
        }
        // Coalesced on the key, but the answer cannot serve these callers' requests.
        return Vary.groups(unmatched, varyingOn: vary, fields: { $0.request.allHTTPHeaderFields })
    }

    /// The wait before fetch `fetchID`'s next attempt: it then sends the fetch's request again
    /// (conditional on what is stored then), unless every caller left meanwhile, which cancels
    /// the wait (the wait is the fetch's load: ``FetchAction/wait(_:fetchID:stage:url:)``). Call
    /// with no lock held.
    nonisolated func waitThenRetry(_ fetchID: Int, after delay: Duration) -> any NetworkLoad {
        let clock = planner.policy.clock
        return TaskLoad(
            task: Task {
                do { try await clock.sleep(for: delay) } catch { return }
                let now = clock.date
                perform(inFlight.withLock { $0.waitEnded(fetchID, at: now, retrying: true, facts: self) })
            })
    }
}

/// The answers of one completion's callers, in the order they joined.
///
/// Callers of one fetch nearly always share one answer, held once rather than once per caller:
/// ten thousand copies of one answer cost as much to release as to resume them. Answers differ
/// only by outcome, and outcomes of one completion only by why the caller fetched and whether it
/// joined: an answer made for those two is found again rather than made anew.
///
/// A class, so that its callers are held once: carried in a ``FetchAction`` and bound out of
/// it, a value's array was held twice, and letting go of each caller before resuming it copied
/// all ten thousand, then released each on the completing thread when the action ended.
///
/// Exclusivity is unchecked on its arrays: one thread makes the answers, under the in-flight
/// lock, and resumes the callers once it is released; no other thread ever sees the object.
final class CallerAnswers {
    /// The callers, with a hole where one left.
    @exclusivity(unchecked) private var waiters: [Waiter?]
    /// For each caller, the index of its answer in `results`; -1 while it has none.
    @exclusivity(unchecked) private var answers: [Int]
    @exclusivity(unchecked) private var results: [Result<(Data, URLResponse), any Error>] = []
    @exclusivity(unchecked) private var made: [(reason: Plan.FetchReason, joined: Bool, index: Int)] = []
    private let fetch: Fetch
    /// How long the fetch's last attempt took.
    let duration: Duration

    init(_ waiters: [Waiter?], of fetch: Fetch, duration: Duration) {
        self.waiters = waiters
        answers = Array(repeating: -1, count: waiters.count)
        self.fetch = fetch
        self.duration = duration
    }

    var positions: Range<Int> { waiters.indices }

    func waiter(at position: Int) -> Waiter? { waiters[position] }

    /// Whether the caller at `position` has its answer already.
    func isAnswered(_ position: Int) -> Bool { answers[position] >= 0 }

    /// Gives the caller at `position` an answer of its own.
    func answer(_ position: Int, with result: Result<(Data, URLResponse), any Error>) {
        results.append(result)
        answers[position] = results.count - 1
    }

    /// Gives the caller at `position` the answer made by `make` from the outcome with `source`
    /// and `storage`, made the first time its reason and joining come up.
    func answer(
        _ position: Int, source: (Plan.FetchReason) -> CacheOutcome.Source, storage: CacheOutcome.Storage?,
        make: (CacheOutcome) -> Result<(Data, URLResponse), any Error>
    ) {
        guard let waiter = waiters[position] else { return }
        let joined = !fetch.wasStarted(by: waiter)
        if let found = made.last(where: { $0.reason == waiter.reason && $0.joined == joined }) {
            answers[position] = found.index
            return
        }
        answer(
            position,
            with: make(
                CacheOutcome(
                    source: source(waiter.reason), joinedFetch: joined, storage: storage, networkDuration: duration)))
        made.append((waiter.reason, joined, results.count - 1))
    }

    /// Resumes every answered caller, in the order they joined.
    func resumeAll() {
        for position in waiters.indices {
            guard let waiter = waiters[position], answers[position] >= 0 else { continue }
            // Let go of it first: the caller, once resumed, then frees it on its own thread.
            waiters[position] = nil
            waiter.resume(with: results[answers[position]])
        }
    }
}
