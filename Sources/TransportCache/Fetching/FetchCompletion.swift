import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a fetch's completion leaves to do once the in-flight lock is released.
///
/// The completion is a step: under the lock it reads the answer, changes the store and the
/// fetches in flight, and returns one of these, which ``CachedTransport/carryOut(_:of:)`` then does
/// with no lock held: it starts every task, resumes every caller and calls the app's code. A new
/// way for a fetch to end is one more case here and one more step in
/// ``CachedTransport/completionStep(of:with:duration:refused:at:in:)``.
enum CompletionAction {
    /// Nothing: every caller left before the answer.
    case none
    /// The answer is one the ``RetryPolicy`` tries again: wait `delay`, then send attempt
    /// `attempt` of fetch `fetchID`. The wait becomes the load of the fetch's stage `stage`.
    case retry(fetchID: Int, attempt: Int, stage: Int, delay: Duration)
    /// The answer (`refusal`) refused the credential `request` carried (`stamp`): wait for a
    /// later one of its account (the account's one shared refresh), then send fetch `fetchID`
    /// again; `again` when it was refused after an earlier wait. The wait becomes the load of the
    /// fetch's stage `stage`.
    case reauthenticate(
        fetchID: Int, stage: Int, request: URLRequest, stamp: CredentialStamp, again: Bool,
        refusal: Result<(Data, URLResponse), any Error>)
    /// Send the fetch again: a `304` confirmed an entry that is no longer stored.
    case resend(CachedTransport.Launch)
    /// Publish the changes the answer made, resume the callers, then launch `then` (fetches of
    /// their own for callers the answer's `Vary` does not serve, and the refreshes that waited
    /// behind this fetch).
    case answer(CallerAnswers, then: [CachedTransport.Launch])
}

/// What a fetch brought, once a `304` has been taken.
enum FetchedAnswer {
    case failed(any Error)
    /// A response of its own, still to be stored.
    case fetched(Data, URLResponse)
    /// A `304` that confirmed the stored entry: its body, the merged response, and what became of
    /// the entry.
    case notModified(Data, URLResponse, CacheOutcome.Storage)
}

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
        let action = inFlight.withLock { machine in
            completionStep(
                of: fetchID, with: result, duration: duration, refused: refused, at: reading, in: &machine)
        }
        carryOut(action, of: interval.url)
    }

    /// Completes fetch `fetchID` with `error`, which arose before its request was sent.
    nonisolated func fail(_ fetchID: Int, with error: any Error, url: URL) {
        settle(fetchID, with: .failure(error), url: url)
    }

    /// Completes fetch `fetchID` with `result`, reported and read already: an error that arose
    /// before its request was sent, or a refusal that stays its answer.
    nonisolated func settle(_ fetchID: Int, with result: Result<(Data, URLResponse), any Error>, url: URL) {
        let reading = planner.policy.clock.reading
        let action = inFlight.withLock { machine in
            completionStep(of: fetchID, with: result, duration: .zero, at: reading, in: &machine)
        }
        carryOut(action, of: url)
    }

    /// Carries out a completion's action, with no lock held. Changes are published before any
    /// caller is resumed: a caller that subscribes once its answer is in hears only later changes,
    /// never the one this answer made.
    private nonisolated func carryOut(_ action: CompletionAction, of url: URL) {
        switch action {
        case .none:
            break
        case .retry(let fetchID, let attempt, let stage, let delay):
            reporter.retrying(url, attempt: attempt, delay: delay)
            install(waitThenRetry(fetchID, after: delay), for: fetchID, stage: stage)
        case .reauthenticate(let fetchID, let stage, let request, let stamp, let again, let refusal):
            install(
                reauthenticateThenResend(fetchID, refused: request, stamp: stamp, again: again, refusal: refusal),
                for: fetchID, stage: stage)
        case .resend(let launch):
            committer.publishQueuedChanges()
            self.launch(launch)
        case .answer(var callers, let launches):
            committer.publishQueuedChanges()
            callers.resumeAll()
            for launch in launches { self.launch(launch) }
        }
    }

    /// Makes `wait` the load of fetch `fetchID`'s stage `stage` (see
    /// ``FetchStateMachine/loadStarted(_:for:stage:)``), or cancels it when every caller left meanwhile.
    private nonisolated func install(_ wait: any NetworkLoad, for fetchID: Int, stage: Int) {
        if case .cancel = changingFetches({ $0.loadStarted(wait, for: fetchID, stage: stage) }) { wait.cancel() }
    }

    /// The completion's step: retry, or take a `304`, then store the answer and answer each caller.
    /// `result` is the answer as the transport reads it (``Committer/prepared(_:)``), received at
    /// `reading`, the clock read before the lock. Call with the in-flight lock held.
    nonisolated func completionStep(
        of fetchID: Int, with result: Result<(Data, URLResponse), any Error>, duration: Duration,
        refused: Bool = false, at reading: ClockReading, in machine: inout FetchStateMachine
    ) -> CompletionAction {
        guard let fetch = machine.fetches[fetchID] else { return .none }  // Every caller left.
        if refused, let (request, stamp, stage, again) = reauthentication(of: fetch, in: &machine) {
            return .reauthenticate(
                fetchID: fetchID, stage: stage, request: request, stamp: stamp, again: again, refusal: result)
        }
        if let delay = retryDelay(of: fetch, after: result, at: reading.date) {
            let (attempt, stage) = machine.attemptFailedToRetry(fetch)
            return .retry(fetchID: fetchID, attempt: attempt, stage: stage, delay: delay)
        }
        guard let fetched = takeNotModified(result, for: fetch, at: reading, in: &machine) else {
            // The entry it asked about is gone: sent again without conditions.
            _ = machine.sendsAgain(fetchID, requestTime: reading.date)
            let stage = machine.sending(fetch, revalidating: nil)
            return .resend(
                Launch(
                    id: fetchID, request: fetch.request, reason: fetch.reason, isConditional: false, key: fetch.key,
                    prepares: !fetch.bypassesPreparation, stage: stage, priority: fetch.priority))
        }
        guard let completed = machine.complete(fetchID, requestTime: reading.date) else { return .none }
        var callers = CallerAnswers(completed.waiters, of: fetch, duration: duration)
        var launches: [Launch]
        switch fetched {
        case .failed(let error):
            answerFailure(error, of: fetch, to: &callers, at: reading.now)
            launches = []
        case .fetched(let data, let response):
            let storage = committer.commitFetched(data, response: response, for: fetch, at: reading, in: &machine)
            if fetch.isBackground, case .notStored(let reason) = storage, reason.refusesAnswer {
                store.record { $0.failedBackgroundRevalidations += 1 }
            }
            // A server error stored on its own explicit freshness is the origin's answer to give.
            if case .notStored = storage {
                answerStaleAfterServerError(response, of: fetch, to: &callers, at: reading.now)
            }
            launches = answerCallers(
                data, response, storage, revalidated: false, of: fetch, to: &callers, at: reading.date, in: &machine)
        case .notModified(let data, let response, let storage):
            launches = answerCallers(
                data, response, storage, revalidated: true, of: fetch, to: &callers, at: reading.date, in: &machine)
        }
        // Made once the answer is stored: the refreshes' fetch is conditional on what it stored.
        if let next = completed.next { launches.append(launchQueued(next, in: &machine)) }
        return .answer(callers, then: launches)
    }

    /// `result` with a `304` to a conditional fetch taken: the stored entry it confirms, updated
    /// (``Committer/commitNotModified(_:confirming:for:)``). Nil when that entry is gone
    /// (invalidated, evicted or replaced while the request was in flight) and callers wait: the
    /// fetch is then sent again without conditions, so no caller ever gets the empty body of a 304.
    private nonisolated func takeNotModified(
        _ result: Result<(Data, URLResponse), any Error>, for fetch: Fetch, at reading: ClockReading,
        in machine: inout FetchStateMachine
    ) -> FetchedAnswer? {
        let data: Data
        let fetched: URLResponse
        switch result {
        case .failure(let error): return .failed(error)
        case .success(let answer): (data, fetched) = answer
        }
        guard let validated = fetch.revalidating, let notModified = fetched as? HTTPURLResponse,
            notModified.statusCode == 304
        else { return .fetched(data, fetched) }
        machine.notModifiedTaken(by: fetch)
        if let confirmed = committer.commitNotModified(
            notModified, confirming: validated, for: fetch, at: reading, in: &machine)
        {
            return .notModified(confirmed.data, confirmed.response, confirmed.storage)
        }
        // Without callers (a background revalidation of an entry dropped meanwhile) the 304 is
        // taken as it is: not stored, and counted as a failed revalidation.
        return fetch.hasWaiters ? nil : .fetched(data, fetched)
    }

    /// Answers each caller of a failed fetch: with the stored entry, marked stale, when
    /// ``Configuration/Freshness/staleIfError`` allows it, else with the error.
    private nonisolated func answerFailure(
        _ error: any Error, of fetch: Fetch, to callers: inout CallerAnswers, at now: ContinuousClock.Instant
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
        _ response: URLResponse, of fetch: Fetch, to callers: inout CallerAnswers, at now: ContinuousClock.Instant
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

    /// Answers each caller whose request the answer's `Vary` serves with `data` and `response`;
    /// the others are detached into fetches of their own, one for each set of values.
    /// - Returns: those fetches, to launch.
    private nonisolated func answerCallers(
        _ data: Data, _ response: URLResponse, _ storage: CacheOutcome.Storage, revalidated: Bool, of fetch: Fetch,
        to callers: inout CallerAnswers, at date: Date, in machine: inout FetchStateMachine
    ) -> [Launch] {
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
        // Coalesced on the key, but the answer cannot serve these callers' requests: they need
        // representations of their own.
        return Vary.groups(unmatched, varyingOn: vary, fields: { $0.request.allHTTPHeaderFields }).map { group in
            launchable(machine.restart(group, from: fetch, requestTime: date), in: &machine)
        }
    }

    /// The launch of the refreshes' fetch that waited behind another (see ``FetchStateMachine``),
    /// now sent. Call with the in-flight lock held.
    nonisolated func launchQueued(_ next: (id: Int, fetch: Fetch), in machine: inout FetchStateMachine) -> Launch {
        launchable(next, in: &machine)
    }

    /// How long `fetch` waits before its next attempt after its current one ended with `result`,
    /// as ``Configuration/Network/retryPolicy`` says; nil when the result is final. Call with the
    /// in-flight lock held.
    private nonisolated func retryDelay(
        of fetch: Fetch, after result: Result<(Data, URLResponse), any Error>, at date: Date
    ) -> Duration? {
        // `GET` and `HEAD` only: a query `POST` shares the fetch path, not the retries.
        guard let retryPolicy, fetch.key.method != "POST" else { return nil }
        return retryPolicy.delay(
            after: result, attempt: fetch.attempt, now: date, random: .random(in: 0...1))
    }

    /// The wait before fetch `fetchID`'s next attempt: it then sends the fetch's request again
    /// (conditional on what is stored then), unless every caller left meanwhile, which cancels
    /// the wait (see ``install(_:for:stage:)``). Call with no lock held.
    private nonisolated func waitThenRetry(_ fetchID: Int, after delay: Duration) -> any NetworkLoad {
        let clock = planner.policy.clock
        return TaskLoad(
            task: Task {
                do { try await clock.sleep(for: delay) } catch { return }
                let now = clock.date
                let next = inFlight.withLock { machine -> Launch? in
                    guard let again = machine.sendsAgain(fetchID, requestTime: now) else { return nil }
                    store.record { $0.retries += 1 }
                    return launchable(again, in: &machine)
                }
                if let next { launch(next) }
            })
    }
}

/// The answers of one completion's callers, in the order they joined.
///
/// Callers of one fetch nearly always share one answer, held once rather than once per caller:
/// ten thousand copies of one answer cost as much to release as to resume them. Answers differ
/// only by outcome, and outcomes of one completion only by why the caller fetched and whether it
/// joined: an answer made for those two is found again rather than made anew.
struct CallerAnswers {
    /// The callers, with a hole where one left.
    private var waiters: [Waiter?]
    /// For each caller, the index of its answer in `results`; -1 while it has none.
    private var answers: [Int]
    private var results: [Result<(Data, URLResponse), any Error>] = []
    private var made: [(reason: Plan.FetchReason, joined: Bool, index: Int)] = []
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
    mutating func answer(_ position: Int, with result: Result<(Data, URLResponse), any Error>) {
        results.append(result)
        answers[position] = results.count - 1
    }

    /// Gives the caller at `position` the answer made by `make` from the outcome with `source`
    /// and `storage`, made the first time its reason and joining come up.
    mutating func answer(
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
    mutating func resumeAll() {
        for position in waiters.indices {
            guard let waiter = waiters[position], answers[position] >= 0 else { continue }
            // Let go of it first: the caller, once resumed, then frees it on its own thread.
            waiters[position] = nil
            waiter.resume(with: results[answers[position]])
        }
    }
}
