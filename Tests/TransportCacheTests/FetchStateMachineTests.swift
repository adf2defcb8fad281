import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

@testable import TransportCache

/// The fetch graph's decisions alone: each event given to the state machine, with what it reads of
/// the store and the policies scripted, and the one action it returns. No transport, store or
/// network: what the machine decides is seen before anything carries it out.
@Suite("The fetch graph's decisions, one event at a time")
final class FetchStateMachineTests {
    /// What the machine reads, as a test sets it, and what it asked for, counted.
    final class ScriptedFacts: FetchFacts {
        var stored: MemoryAnswer?
        var entryToConfirm: StoredResponse?
        var retryDelays: [Duration] = []
        var confirms = true
        var unmatched: [[Waiter]] = []
        private(set) var retries = 0
        private(set) var backgroundStarts = 0
        private(set) var committed: [FetchedAnswer] = []

        func storedAnswer(for plan: FetchPlan, reads: Bool, at now: ContinuousClock.Instant) -> MemoryAnswer? {
            stored
        }
        var startsInsideRefresh: Bool { false }
        func backgroundRevalidationStarted() { backgroundStarts += 1 }
        func entryToConfirm(for fetch: Fetch) -> StoredResponse? { entryToConfirm }
        func retryDelay(
            of fetch: Fetch, after result: Result<(Data, URLResponse), any Error>, at date: Date
        ) -> Duration? {
            retryDelays.isEmpty ? nil : retryDelays.removeFirst()
        }
        func retried() { retries += 1 }
        func commitNotModified(
            _ notModified: HTTPURLResponse, of entry: StoredResponse, for fetch: Fetch, at reading: ClockReading,
            in machine: inout FetchStateMachine
        ) -> (data: Data, response: URLResponse, storage: CacheOutcome.Storage)? {
            confirms ? (entry.data, entry.response, .stored(changedBytes: false)) : nil
        }
        func commitAndAnswer(
            _ fetched: FetchedAnswer, of fetch: Fetch, to callers: CallerAnswers, at reading: ClockReading,
            in machine: inout FetchStateMachine
        ) -> [[Waiter]] {
            committed.append(fetched)
            defer { unmatched = [] }
            return unmatched
        }
    }

    static let url = URL(string: "https://api.example.com/items")!
    static let key = CacheKey(method: "GET", url: url.absoluteString, identity: [String?]())
    let reading = ClockReading(now: .now, date: Date())
    var machine = FetchStateMachine(revalidations: 1)
    let facts = ScriptedFacts()

    static func plan(reason: Plan.FetchReason = .noEntry) -> FetchPlan {
        FetchPlan(
            request: URLRequest(url: url), key: key, fields: nil, reason: reason, acceptance: .transportRules,
            isObserved: nil, settings: FreshnessPolicy.Settings(maximumAge: nil, staleWindow: nil))
    }

    static func waiter() -> Waiter {
        Waiter(request: URLRequest(url: url), reason: .noEntry, priority: .normal)
    }

    static func answer(status: Int) -> Result<(Data, URLResponse), any Error> {
        .success(
            (Data("body".utf8), HTTPURLResponse(url: url, statusCode: status, httpVersion: nil, headerFields: [:])!))
    }

    static func entry() -> StoredResponse {
        StoredResponse(
            key: key, data: Data("stored".utf8),
            response: HTTPURLResponse(url: url, statusCode: 200, httpVersion: nil, headerFields: ["ETag": "\"v1\""])!,
            selector: VariantSelector(fields: []), request: URLRequest(url: url), cost: 6, storedAt: .now,
            lifetime: EntryLifetime(), entityTag: "\"v1\"", lastModified: nil)
    }

    /// Starts a fetch for `waiter`, its time read: the arrival without the time asks for it first.
    func start(_ waiter: Waiter?) -> Launch {
        let plan = Self.plan(reason: waiter == nil ? .backgroundRevalidation : .noEntry)
        guard case .needsClock = machine.arrive(plan, waiter: waiter) else {
            Issue.record("an arrival that cannot join decides only with the time")
            return Launch(
                id: 0, request: plan.request, reason: plan.reason, isConditional: false, key: plan.key,
                prepares: true, stage: 0, priority: .normal)
        }
        guard case .launch(let launch) = machine.arrive(plan, waiter: waiter, at: reading, facts: facts) else {
            Issue.record("nothing stored, nothing in flight: the arrival starts a fetch")
            return Launch(
                id: 0, request: plan.request, reason: plan.reason, isConditional: false, key: plan.key,
                prepares: true, stage: 0, priority: .normal)
        }
        return launch
    }

    @Test("a second caller joins the fetch the first started; a cancelled one joins nothing")
    func joinsOrStarts() {
        let first = Self.waiter()
        let launch = start(first)
        #expect(!launch.isConditional && launch.stage == 1)
        guard case .joined = machine.arrive(Self.plan(), waiter: Self.waiter()) else {
            Issue.record("a fetch of the key is in flight: the second caller joins it")
            return
        }
        let cancelled = Self.waiter()
        guard
            case .end(let ended, .cancelled, let loads, let launches) =
                machine.arrive(Self.plan(), waiter: cancelled, cancelled: true)
        else {
            Issue.record("a cancelled caller ends at once")
            return
        }
        #expect(ended.map(ObjectIdentifier.init) == [ObjectIdentifier(cancelled)])
        #expect(loads.isEmpty && launches.isEmpty)
        #expect(machine.fetches.count == 1 && machine.waiterCount == 2 && machine.coalescedJoins == 1)
    }

    @Test("a caller arriving as a fetch's answer is stored takes it rather than starting another")
    func takesWhatWasStoredMeanwhile() {
        let entry = Self.entry()
        facts.stored = MemoryAnswer(
            entry: entry, response: entry.response, reason: .fresh, isObserved: false)
        let waiter = Self.waiter()
        guard case .takeStored(_, let by) = machine.arrive(Self.plan(), waiter: waiter, at: reading, facts: facts)
        else {
            Issue.record("an answer stored meanwhile answers the arrival")
            return
        }
        #expect(by === waiter)
        #expect(machine.fetches.isEmpty && machine.waiterCount == 0)
    }

    @Test("the last caller leaving cancels the load; a load recorded after that is cancelled")
    func lastCallerLeaves() {
        let waiter = Self.waiter()
        let launch = start(waiter)
        let load = InertLoad()
        guard case .none = machine.loadStarted(load, for: launch.id, stage: launch.stage) else {
            Issue.record("a load of a fetch waited for is kept")
            return
        }
        guard
            case .end(let ended, .cancelled, let loads, _) = machine.leave(
                waiter, requestTime: reading.date, facts: facts)
        else {
            Issue.record("a caller leaving ends at once")
            return
        }
        #expect(ended.count == 1 && loads.count == 1 && loads.first as? InertLoad === load)
        #expect(machine.fetches.isEmpty && machine.joinable.isEmpty && machine.waiterCount == 0)
        guard case .cancel = machine.loadStarted(InertLoad(), for: launch.id, stage: launch.stage) else {
            Issue.record("a load of a fetch nobody waits for is cancelled")
            return
        }
        guard case .none = machine.leave(waiter, requestTime: reading.date, facts: facts) else {
            Issue.record("a caller that left already is left alone")
            return
        }
    }

    @Test("an answer the retry policy tries again waits, then is sent again and counted, then completes")
    func retriesBeforeCompleting() {
        let launch = start(Self.waiter())
        facts.retryDelays = [.seconds(2)]
        guard
            case .wait(.retry(let attempt, let delay), let fetchID, let stage, let url) = machine.attemptEnded(
                launch.id, with: Self.answer(status: 503), duration: .zero, refused: false, at: reading, facts: facts)
        else {
            Issue.record("a retryable answer waits")
            return
        }
        #expect(attempt == 2 && delay == .seconds(2) && fetchID == launch.id && stage == launch.stage + 1)
        #expect(url == Self.url && facts.committed.isEmpty)
        guard case .launch(let again) = machine.waitEnded(launch.id, at: reading.date, retrying: true, facts: facts)
        else {
            Issue.record("the wait's end sends the fetch again")
            return
        }
        #expect(again.id == launch.id && again.stage == stage + 1 && facts.retries == 1)
        guard
            case .answer(_, let launches) = machine.attemptEnded(
                launch.id, with: Self.answer(status: 200), duration: .zero, refused: false, at: reading, facts: facts)
        else {
            Issue.record("a final answer completes the fetch")
            return
        }
        #expect(launches.isEmpty && facts.committed.count == 1)
        guard case .fetched(_, let response) = facts.committed.last else {
            Issue.record("the final answer is committed as fetched")
            return
        }
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(machine.fetches.isEmpty && machine.waiterCount == 0)
    }

    @Test("a 304 for an entry gone is sent again without conditions while callers wait, and taken as it is without")
    func notModifiedForAnEntryGone() {
        facts.entryToConfirm = Self.entry()
        let launch = start(Self.waiter())
        #expect(launch.isConditional)
        #expect(launch.request.value(forHTTPHeaderField: "If-None-Match") == "\"v1\"")
        facts.confirms = false
        guard
            case .resend(let resent) = machine.attemptEnded(
                launch.id, with: Self.answer(status: 304), duration: .zero, refused: false, at: reading, facts: facts)
        else {
            Issue.record("a caller never gets the empty body of a 304")
            return
        }
        #expect(!resent.isConditional && resent.request.value(forHTTPHeaderField: "If-None-Match") == nil)
        #expect(resent.stage == launch.stage + 1 && facts.committed.isEmpty)

        var background = FetchStateMachine(revalidations: 1)
        swap(&machine, &background)
        let revalidation = start(nil)
        #expect(revalidation.isConditional && facts.backgroundStarts == 1)
        guard
            case .answer = machine.attemptEnded(
                revalidation.id, with: Self.answer(status: 304), duration: .zero, refused: false, at: reading,
                facts: facts)
        else {
            Issue.record("without callers the 304 is the answer")
            return
        }
        guard case .fetched(_, let response) = facts.committed.last else {
            Issue.record("the 304 is committed as fetched, which stores nothing")
            return
        }
        #expect((response as? HTTPURLResponse)?.statusCode == 304)
    }

    @Test("callers the answer's Vary does not serve get a fetch of their own, which later callers do not join")
    func varyRestart() {
        let starter = Self.waiter()
        let other = Self.waiter()
        let launch = start(starter)
        guard case .joined = machine.arrive(Self.plan(), waiter: other) else {
            Issue.record("the second caller joins the fetch in flight")
            return
        }
        facts.unmatched = [[other]]
        guard
            case .answer(_, let launches) = machine.attemptEnded(
                launch.id, with: Self.answer(status: 200), duration: .zero, refused: false, at: reading, facts: facts)
        else {
            Issue.record("the answer completes the fetch")
            return
        }
        #expect(launches.count == 1 && launches.first?.id != launch.id)
        #expect(machine.fetches.count == 1 && machine.waiterCount == 1 && machine.joinable.isEmpty)
        #expect(other.fetchID == launches.first?.id)
        // A caller arriving now joins none: the restarted fetch serves one representation only.
        guard case .needsClock = machine.arrive(Self.plan(), waiter: Self.waiter()) else {
            Issue.record("a fetch of one representation among several is joined by no later request")
            return
        }
    }

    @Test("a credential wait's end: renewed, the fetch is sent again; otherwise the refusal or the error ends it")
    func credentialWaitEnds() {
        let renewed = start(Self.waiter())
        guard case .launch(let again) = machine.credentialWaitEnded(renewed.id, .renewed, at: reading, facts: facts)
        else {
            Issue.record("a later credential sends the fetch again")
            return
        }
        #expect(again.id == renewed.id && again.stage == renewed.stage + 1 && facts.retries == 0)
        _ = machine.attemptEnded(
            renewed.id, with: Self.answer(status: 200), duration: .zero, refused: false, at: reading, facts: facts)

        let unchanged = start(Self.waiter())
        guard
            case .answer = machine.credentialWaitEnded(
                unchanged.id, .unchanged(Self.answer(status: 401)), at: reading, facts: facts)
        else {
            Issue.record("no later credential: the refusal ends the attempt")
            return
        }
        guard case .fetched(_, let refusal) = facts.committed.last else {
            Issue.record("the refusal is committed as fetched")
            return
        }
        #expect((refusal as? HTTPURLResponse)?.statusCode == 401)

        let failed = start(Self.waiter())
        guard
            case .answer = machine.credentialWaitEnded(
                failed.id, .failed(URLError(.userAuthenticationRequired)), at: reading, facts: facts)
        else {
            Issue.record("a failed refresh ends the attempt with its error")
            return
        }
        guard case .failed(let error as URLError) = facts.committed.last else {
            Issue.record("the refresh's error is committed as the failure")
            return
        }
        #expect(error.code == .userAuthenticationRequired)
        #expect(machine.fetches.isEmpty && machine.waiterCount == 0)
    }

    @Test("a sign-out abandons its fetches: every caller fails signed out and every load is cancelled")
    func abandonment() {
        let first = Self.waiter()
        let launch = start(first)
        let second = Self.waiter()
        _ = machine.arrive(Self.plan(), waiter: second)
        _ = machine.loadStarted(InertLoad(), for: launch.id, stage: launch.stage)
        guard case .end(let ended, .signedOut, let loads, let launches) = machine.abandon(where: { _ in true }) else {
            Issue.record("abandoned callers end signed out")
            return
        }
        #expect(Set(ended.map(ObjectIdentifier.init)) == [ObjectIdentifier(first), ObjectIdentifier(second)])
        #expect(loads.count == 1 && launches.isEmpty)
        #expect(machine.fetches.isEmpty && machine.joinable.isEmpty && machine.waiterCount == 0)
        guard case .none = machine.abandon(where: { _ in true }) else {
            Issue.record("nothing left to abandon")
            return
        }
    }
}

/// A load that does nothing: what the machine records and hands back to cancel.
private final class InertLoad: NetworkLoad, Sendable {
    func cancel() {}
}

extension FetchStateMachine {
    /// The first step of `plan`'s arrival, which needs no clock, as the transport takes it.
    fileprivate mutating func arrive(_ plan: FetchPlan, waiter: Waiter?, cancelled: Bool = false) -> FetchAction {
        arrive(plan.key, sharing: plan.sharing, waiter: waiter, cancelled: cancelled)
    }
}
