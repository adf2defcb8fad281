import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CachedTransport {
    /// Sends `launch`'s request as it goes out (``RequestPreparation/outgoing(_:keyedFor:)``):
    /// when an adapter or the credential throws, or it would go out as another identity than its
    /// key's, the fetch fails with that error and nothing is sent or stored.
    ///
    /// The preparation runs the app's code (sending adapters, the wait for a refresh) in a task of
    /// its own that is never cancelled: when every caller leaves, it runs to its end and sends
    /// nothing (see ``PreparedLoad``).
    nonisolated func launchPrepared(
        _ launch: Launch, by preparation: RequestPreparation, interval: TransportEvents.FetchInterval
    ) {
        let prepared = PreparedLoad()
        // Recorded before its task can start the network load or complete the fetch.
        let action = changingFetches {
            $0.loadStarted(prepared, for: launch.id, stage: launch.stage, at: launch.priority)
        }
        // Every caller left before the load was recorded: nothing is prepared or sent.
        if case .cancel = action {
            perform(action)
            return
        }
        Task {
            let outgoing: Outgoing
            do {
                // Whether it goes past the chain was decided when the fetch started (a refresh's own
                // fetch is never launched here): not by a flag this task may inherit from a refresh
                // whose request happened to launch it.
                outgoing = try await RequestPreparation.outsideRefresh {
                    try await preparation.outgoing(launch.request, keyedFor: launch.key.account)
                }
            } catch {
                // Every caller left meanwhile: the fetch is gone, and completing it does nothing.
                complete(launch.id, with: .failure(error), interval: interval)
                return
            }
            let inFlight = inFlight.withLock { $0.sent(outgoing, for: launch.id) }
            guard inFlight, !prepared.isCancelled else { return }
            send(
                outgoing.request, of: launch.id, stage: launch.stage, priority: launch.priority, interval: interval,
                within: prepared)
        }
    }

    /// Whether `result` refuses the credential of `request`, as the app's authenticator says;
    /// false without one. Call with no lock held: the authenticator is the app's code.
    nonisolated func refuses(_ result: Result<(Data, URLResponse), any Error>, to request: URLRequest) -> Bool {
        guard let credentials = preparation?.credentials, case .success(let answer) = result else { return false }
        return credentials.isRefusal(answer.1, to: request)
    }

    /// Waits for a credential of its account later than the one `stamp` names (the account's one
    /// shared refresh, see ``Credentials``), then sends fetch `fetchID` once more with it; fails
    /// the fetch with the refresh's error. Refused `again`, and one more refresh past the limit,
    /// the fetch completes with `refusal`, the origin's answer. The wait is the fetch's load: when
    /// every caller leaves, the wait is cancelled, never the refresh.
    nonisolated func reauthenticateThenResend(
        _ fetchID: Int, refused request: URLRequest, stamp: CredentialStamp, again: Bool,
        refusal: Result<(Data, URLResponse), any Error>
    ) -> any NetworkLoad {
        TaskLoad(
            task: Task {
                let end: CredentialWaitEnd
                do {
                    let renewed = try await stamp.recover(
                        fromRefusalOf: request, clock: planner.policy.clock, again: again)
                    end = renewed ? .renewed : .unchanged(refusal)
                } catch {
                    // Every caller left, or the account was signed out: the wait was cancelled,
                    // and the fetch is gone.
                    if Task.isCancelled { return }
                    end = .failed(error)
                }
                let reading = planner.policy.clock.reading
                perform(inFlight.withLock { $0.credentialWaitEnded(fetchID, end, at: reading, facts: self) })
            })
    }

    /// Sends `plan`'s request, which is never stored, as it goes out
    /// (``RequestPreparation/outgoing(_:keyedFor:)``), with the credential of the account it was
    /// made for only, and again, with a later credential of that account, when its credential
    /// was refused (twice at most, as a fetch): the refusal path fetches take, for a request the
    /// cache does not handle. The app's code runs to its end even when the caller leaves
    /// (``runningToItsEnd(_:)``).
    nonisolated(nonsending) func sendAuthenticated(_ plan: SendPlan) async throws -> (Data, URLResponse) {
        guard let preparation, preparation.decoratesOutgoing else { return try await queue.load(plan.request) }
        var resends = 0
        while true {
            let outgoing = try await runningToItsEnd {
                try await preparation.outgoing(plan.request, keyedFor: plan.account)
            }
            let answer = try await queue.load(outgoing.request)
            guard resends < FetchStateMachine.maximumReauthentications,
                let credentials = preparation.credentials, let stamp = outgoing.stamp,
                credentials.isRefusal(answer.1, to: outgoing.request)
            else { return answer }
            resends += 1
            let recovered = try await stamp.recover(
                fromRefusalOf: outgoing.request, clock: planner.policy.clock, again: resends > 1)
            if !recovered { return answer }
        }
    }
}

/// Runs `body`, which runs the app's code, in a task the transport never cancels, and returns
/// its result; a caller cancelled meanwhile leaves at once with `CancellationError`, and `body`
/// runs on to its end. On Linux, cancelling a task that awaits `URLSession.data(for:)` as its
/// response completes can deadlock the process (swift-corelibs-foundation 5412), and the app's
/// adapters and refreshes often await it.
nonisolated(nonsending) func runningToItsEnd<Value: Sendable>(
    _ body: @escaping @Sendable () async throws -> Value
) async throws -> Value {
    let outcome = Locked<(result: Result<Value, any Error>?, waiter: CheckedContinuation<Value, any Error>?)>(
        (nil, nil))
    Task {
        let result: Result<Value, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        let waiter = outcome.withLock { outcome in
            outcome.result = result
            defer { outcome.waiter = nil }
            return outcome.waiter
        }
        waiter?.resume(with: result)
    }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            let now = outcome.withLock { outcome -> Result<Value, any Error>? in
                if let result = outcome.result { return result }
                if Task.isCancelled { return .failure(CancellationError()) }
                outcome.waiter = continuation
                return nil
            }
            if let now { continuation.resume(with: now) }
        }
    } onCancel: {
        let waiter = outcome.withLock { outcome in
            defer { outcome.waiter = nil }
            return outcome.waiter
        }
        waiter?.resume(throwing: CancellationError())
    }
}

/// The load of a fetch whose request is prepared before it is sent: the preparation, then the
/// network load, cancelled as one. The preparation runs the app's code and is never cancelled:
/// once cancelled, this load only sends nothing when the preparation ends.
final class PreparedLoad: NetworkLoad {
    private struct State {
        var load: (any NetworkLoad)?
        var isCancelled = false
        /// The fetch's priority, when it moved before the network load started.
        var priority: FetchPriority?
    }

    private let state = Locked(State(), rank: .preparedLoad)

    /// Whether every caller left: the prepared request is not sent.
    var isCancelled: Bool { state.withLock { $0.isCancelled } }

    /// The network load has started. A priority the fetch moved to while its request was
    /// prepared is passed to it here, under this load's lock, so that no later change is
    /// overtaken by this one.
    /// - Returns: whether it was recorded: false when the load was cancelled first.
    func started(_ load: any NetworkLoad, at priority: FetchPriority) -> Bool {
        state.withLock { state in
            guard !state.isCancelled else { return false }
            state.load = load
            if let moved = state.priority, moved != priority { load.prioritize(moved) }
            return true
        }
    }

    func prioritize(_ priority: FetchPriority) {
        let load = state.withLock { state in
            state.priority = priority
            return state.load
        }
        load?.prioritize(priority)
    }

    func cancel() {
        let load = state.withLock { state in
            state.isCancelled = true
            return state.load
        }
        load?.cancel()
    }
}

extension CachedTransport {
    /// Signs `partition` out (see ``Credentials/init(_:credential:limit:partition:)``), or the
    /// account of that name of ``Accounts``, whose credential it forgets: nothing of it is left in
    /// memory or in flight, whatever call wrote it (a fetch, ``store(_:)``, an optimistic update).
    /// A refresh of its credential under way runs to its end, and its result is dropped.
    ///
    /// Its entries, their decoded values and the tags naming them are dropped and announced as
    /// ``CacheChange/invalidated(urls:endpoint:)``; its pending optimistic updates are forgotten (no
    /// rollback brings their entries back); its fetches in flight, revalidations and polls among
    /// them, are cancelled, and their callers fail with ``AuthenticationError/Code/signedOut``, so
    /// that none of them stores an answer or hands one to anybody. Afterwards ``snapshot()`` shows
    /// nothing of it. Other partitions, and requests of no partition, are not touched. Signing out
    /// a partition the transport holds nothing of drops nothing; its name is remembered as signed
    /// out, so that a later request of it fails with ``AuthenticationError/Code/signedOut`` until
    /// the app sets a credential of it again. Set the app's credential (``Credentials``) to the
    /// next account's, or nil, as well, before or after: from the first of the two on, no fetch
    /// goes out as the old account, and a call keyed for it fails with
    /// ``AuthenticationError/Code/signedOut``. A request the cache does not handle (a `POST`)
    /// already waiting for its host's room in the queue with the old credential on it still goes
    /// out.
    ///
    /// Runs on the caller's thread, without waiting for the actor.
    /// - Complexity: O(n) in the keys held, read a batch at a time under the lock a hit takes.
    public nonisolated func signOut(partition: String) {
        preparation?.credentials?.signedOut(partition: partition)
        perform(committer.signOut(partition).abandoned)
    }
}
