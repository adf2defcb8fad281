import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What an event of the fetch graph leaves to do once the in-flight lock is released.
///
/// The one type every move of a fetch that ``FetchStateMachine`` decides returns: a caller
/// arriving, a load recorded, an attempt ending, a wait ending, a caller leaving, a sign-out
/// abandoning its fetches. (Events that leave nothing to do return nothing or whether they took:
/// a request recorded as sent, a priority moved, fetches detached or put under an update.)
/// ``CachedTransport/perform(_:launchingOffCaller:)`` carries it out, with no lock held: it
/// resumes every caller, starts and cancels every load and task, and calls the app's code. A new
/// way for a fetch to move on is one more case here, decided in the machine.
enum FetchAction {
    /// Nothing: the event changed no caller and no load (or every caller had left).
    case none
    /// An arrival that could not join decides only with the time and its whole plan: make the
    /// plan and read the clock with no lock held, then take the arrival's second step (see
    /// ``FetchStateMachine/arrive(_:waiter:cancelled:at:facts:)``).
    case needsClock
    /// A caller joined a fetch in flight: the tests watching the joins that it let through
    /// resume.
    case joined(WatchedCount.Watchers)
    /// An arrival that did not join takes the answer stored between its plan and now: `waiter`'s
    /// caller resumes with it, a prefetch ends as stored already, a background revalidation
    /// (no waiter) ends.
    case takeStored(MemoryAnswer, by: Waiter?)
    /// `waiters`, detached, fail `because` of how they ended; `loads` (of fetches they were the
    /// last callers of) are cancelled; then `launches` go (the refreshes that waited behind a
    /// fetch its last caller left).
    case end(_ waiters: [Waiter], because: Ending, cancelling: [any NetworkLoad], then: [Launch])
    /// Send this fetch: started, or sent again after a wait.
    case launch(Launch)
    /// A load recorded for a fetch every caller has left: cancel it.
    case cancel(any NetworkLoad)
    /// Fetch `fetchID` (of `url`) waits before its next attempt; the wait becomes the load of its
    /// stage `stage`.
    case wait(FetchWait, fetchID: Int, stage: Int, url: URL?)
    /// A `304` confirmed an entry that is no longer stored: publish what the answer changed, and
    /// send the fetch again without conditions.
    case resend(Launch)
    /// Publish the changes the answer made, resume the callers, then launch `then` (fetches of
    /// their own for callers the answer's `Vary` does not serve, and the refreshes that waited
    /// behind this fetch).
    case answer(CallerAnswers, then: [Launch])

    /// Why callers end without an answer of their fetch.
    enum Ending {
        /// The caller was cancelled: `CancellationError` (a prefetch ends cancelled).
        case cancelled
        /// Its account was signed out: ``AuthenticationError/Code/signedOut``.
        case signedOut

        func error(for waiter: Waiter) -> any Error {
            switch self {
            case .cancelled: CancellationError()
            case .signedOut: AuthenticationError(.signedOut).carrying(CacheOutcome(source: .network(waiter.reason)))
            }
        }
    }
}

/// Why a fetch waits before its next attempt.
enum FetchWait {
    /// The answer is one the ``RetryPolicy`` tries again: wait `delay`, then send attempt `attempt`.
    case retry(attempt: Int, delay: Duration)
    /// The answer (`refusal`) refused the credential `request` carried (`stamp`): wait for a later
    /// one of its account (the account's one shared refresh), then send the fetch again; `again`
    /// when it was refused after an earlier wait.
    case credential(
        request: URLRequest, stamp: CredentialStamp, again: Bool, refusal: Result<(Data, URLResponse), any Error>)
}

/// What a fetch's wait for a later credential (``FetchWait/credential(request:stamp:again:refusal:)``)
/// came to, as its account's credential says (``CredentialStamp``).
enum CredentialWaitEnd {
    /// A later credential is in: the fetch is sent again with it.
    case renewed
    /// No later credential may come (refused again, past the limit): the refusal ends the attempt.
    case unchanged(Result<(Data, URLResponse), any Error>)
    /// The refresh failed (or the account was signed out): its error ends the attempt.
    case failed(any Error)
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

/// What a fetch brought, once a `304` has been taken.
enum FetchedAnswer {
    case failed(any Error)
    /// A response of its own, still to be stored.
    case fetched(Data, URLResponse)
    /// A `304` that confirmed the stored entry: its body, the merged response, and what became of
    /// the entry.
    case notModified(Data, URLResponse, CacheOutcome.Storage)
}

/// What the state machine's decisions read beyond the fetches in flight, and the store's work an
/// answer does: the store, the planner and the transport's policies, all the library's own code
/// (no app code runs through here), called with the in-flight lock held.
protocol FetchFacts {
    /// The answer stored for `plan` that may answer it at `now` (`reads`: a caller reads it,
    /// rather than a prefetch).
    func storedAnswer(for plan: FetchPlan, reads: Bool, at now: ContinuousClock.Instant) -> MemoryAnswer?
    /// Whether a fetch started now is a credential refresh's own request, which goes past the
    /// adapters and the authenticator.
    var startsInsideRefresh: Bool { get }
    /// A background revalidation starts a fetch (for the statistics).
    func backgroundRevalidationStarted()
    /// The stored entry that `fetch`, about to be sent, asks the origin to confirm; nil when it
    /// is sent unconditionally.
    func entryToConfirm(for fetch: Fetch) -> StoredResponse?
    /// How long `fetch` waits before its next attempt after one that ended with `result`; nil
    /// when the result is final.
    func retryDelay(of fetch: Fetch, after result: Result<(Data, URLResponse), any Error>, at date: Date) -> Duration?
    /// A fetch is sent again after its retry's wait (for the statistics).
    func retried()
    /// Takes a `304` that confirms `entry`, for `fetch`: the updated entry's answer, or nil when
    /// that entry is gone.
    func commitNotModified(
        _ notModified: HTTPURLResponse, of entry: StoredResponse, for fetch: Fetch, at reading: ClockReading,
        in machine: inout FetchStateMachine
    ) -> (data: Data, response: URLResponse, storage: CacheOutcome.Storage)?
    /// Stores what `fetch` brought and gives each of `callers` that it serves its answer.
    /// - Returns: the callers the answer's `Vary` does not serve, in groups whose requests match
    ///   each other.
    func commitAndAnswer(
        _ fetched: FetchedAnswer, of fetch: Fetch, to callers: CallerAnswers, at reading: ClockReading,
        in machine: inout FetchStateMachine
    ) -> [[Waiter]]
}

extension CachedTransport {
    /// Carries out `action`, with no lock held. Changes are published before any caller is
    /// resumed: a caller that subscribes once its answer is in hears only later changes, never the
    /// one this answer made.
    /// - Parameter launchingOffCaller: the event is a caller's arrival on an actor: a fetch it
    ///   started is sent from a task of its own (see ``fetch(_:)``).
    @inline(__always)
    nonisolated func perform(_ action: consuming FetchAction, launchingOffCaller: Bool = false) {
        switch consume action {
        case .none:
            break
        case .joined(let watchers):
            // Each of ten thousand coalesced callers ends here: inlined into its arrival.
            for watcher in watchers { watcher.resume() }
        case let action:
            performOutOfLine(action, launchingOffCaller: launchingOffCaller)
        }
    }

    private nonisolated func performOutOfLine(_ action: consuming FetchAction, launchingOffCaller: Bool) {
        switch consume action {
        case .none, .joined:
            preconditionFailure("carried out inline")
        case .needsClock:
            preconditionFailure("an arrival is carried out once the time is read")
        case .takeStored(let stored, let waiter):
            if let prefetch = waiter?.prefetch {
                prefetch.end(.alreadyStored)
            } else {
                waiter?.resume(with: .success((stored.data, stored.response)))
            }
        case .end(let waiters, let ending, let loads, let launches):
            for waiter in waiters { waiter.resume(with: .failure(ending.error(for: waiter))) }
            for load in loads { load.cancel() }
            for launch in launches { self.launch(launch) }
        case .launch(let launch):
            if launchingOffCaller { launchOffCaller(launch) } else { self.launch(launch) }
        case .cancel(let load):
            load.cancel()
        case .wait(let wait, let fetchID, let stage, let url):
            let load: any NetworkLoad
            switch wait {
            case .retry(let attempt, let delay):
                if let url { reporter.retrying(url, attempt: attempt, delay: delay) }
                load = waitThenRetry(fetchID, after: delay)
            case .credential(let request, let stamp, let again, let refusal):
                load = reauthenticateThenResend(fetchID, refused: request, stamp: stamp, again: again, refusal: refusal)
            }
            perform(changingFetches { $0.loadStarted(load, for: fetchID, stage: stage) })
        case .resend(let launch):
            committer.publishQueuedChanges()
            self.launch(launch)
        case .answer(let callers, let launches):
            committer.publishQueuedChanges()
            callers.resumeAll()
            for launch in launches { self.launch(launch) }
        }
    }
}
