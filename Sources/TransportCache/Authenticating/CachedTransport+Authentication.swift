import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CachedTransport {
    /// Sends `launch`'s request as it goes out (``RequestPreparation/outgoing(_:keyedFor:)``):
    /// when an adapter or the credential throws, or it would go out as another identity than its
    /// key's, the fetch fails with that error and nothing is sent or stored.
    nonisolated func launchPrepared(
        _ launch: Launch, by preparation: RequestPreparation, interval: TransportEvents.FetchInterval
    ) {
        let prepared = PreparedLoad()
        // Recorded before its task can start the network load or complete the fetch.
        let action = changingFetches {
            $0.loadStarted(prepared, for: launch.id, stage: launch.stage, at: launch.priority)
        }
        if case .cancel = action { return }
        let task = Task {
            let outgoing: Outgoing
            do {
                // Whether it goes past the chain was decided when the fetch started (a refresh's own
                // fetch is never launched here): not by a flag this task may inherit from a refresh
                // whose request happened to launch it.
                outgoing = try await RequestPreparation.$isRefreshing.withValue(false) {
                    try await preparation.outgoing(launch.request, keyedFor: .keyed(launch.key.account))
                }
            } catch {
                // Cancelled: every caller left, and the fetch is gone.
                if !Task.isCancelled { complete(launch.id, with: .failure(error), interval: interval) }
                return
            }
            let inFlight = inFlight.withLock { $0.sent(outgoing, for: launch.id) }
            guard inFlight else { return }
            send(
                outgoing.request, of: launch.id, stage: launch.stage, priority: launch.priority, interval: interval,
                within: prepared)
        }
        prepared.wait(for: task)
    }

    /// Whether `result` refuses the credential of `request`, as the app's authenticator says;
    /// false without one. Call with no lock held: the authenticator is the app's code.
    nonisolated func refuses(_ result: Result<(Data, URLResponse), any Error>, to request: URLRequest) -> Bool {
        guard let credentials = preparation?.credentials, case .success(let answer) = result else { return false }
        return credentials.isRefusal(answer.1, to: request)
    }

    /// What a refused `fetch` sent, which credential that carried, and the credentials to recover with; nil
    /// when it may not reauthenticate: a refresh's own request, one that carried the app's own
    /// credential, or one already resent. Call with the in-flight lock held.
    /// - Returns: also the fetch's stage whose load the wait for a credential is.
    nonisolated func reauthentication(of fetch: Fetch, in machine: inout FetchStateMachine) -> (
        URLRequest, Int, any CredentialApplying, stage: Int
    )? {
        guard !fetch.bypassesPreparation, let sent = fetch.sent, let generation = sent.generation,
            let credentials = preparation?.credentials, let stage = machine.waitsForCredential(fetch)
        else { return nil }
        return (sent.request, generation, credentials, stage)
    }

    /// Waits for a credential later than the `refused`-th (the one shared refresh, see
    /// ``Credentials``), then sends fetch `fetchID` once more with it; fails the fetch with
    /// the refresh's error. The wait is the fetch's load: when every caller leaves, it is
    /// cancelled, and with the last waiter, the refresh.
    nonisolated func reauthenticateThenResend(
        _ fetchID: Int, refused request: URLRequest, at refused: Int, by credentials: any CredentialApplying
    ) -> any NetworkLoad {
        TaskLoad(
            task: Task {
                do {
                    try await credentials.recover(fromRefusalOf: request, at: refused, clock: planner.policy.clock)
                } catch {
                    if !Task.isCancelled, let url = request.url { fail(fetchID, with: error, url: url) }
                    return
                }
                let next = inFlight.withLock { machine -> Launch? in
                    guard let again = machine.sendsAgain(fetchID, requestTime: planner.policy.clock.date) else {
                        return nil
                    }
                    return launchable(again, in: &machine)
                }
                if let next { launch(next) }
            })
    }

    /// Sends `plan`'s request, which is never stored, as it goes out
    /// (``RequestPreparation/outgoing(_:keyedFor:)``), with the credential of the account it was
    /// made for only, and once more, with a later credential of that account, when its credential
    /// was refused: the refusal path fetches take, for a request the cache does not handle.
    nonisolated(nonsending) func sendAuthenticated(_ plan: SendPlan) async throws -> (Data, URLResponse) {
        guard let preparation, preparation.decoratesOutgoing else { return try await queue.load(plan.request) }
        let outgoing = try await preparation.outgoing(plan.request, keyedFor: .keyed(plan.account))
        let answer = try await queue.load(outgoing.request)
        guard let credentials = preparation.credentials, let generation = outgoing.generation,
            credentials.isRefusal(answer.1, to: outgoing.request)
        else { return answer }
        try await credentials.recover(fromRefusalOf: outgoing.request, at: generation, clock: planner.policy.clock)
        return try await queue.load(
            try await preparation.outgoing(plan.request, keyedFor: .keyed(plan.account)).request)
    }
}

/// The load of a fetch whose request is prepared before it is sent: the preparation, then the
/// network load, cancelled as one.
final class PreparedLoad: NetworkLoad {
    private struct State {
        var task: Task<Void, Never>?
        var load: (any NetworkLoad)?
        var isCancelled = false
        /// The fetch's priority, when it moved before the network load started.
        var priority: FetchPriority?
    }

    private let state = Locked(State())

    /// Cancels `task` with the load.
    func wait(for task: Task<Void, Never>) {
        let cancelled = state.withLock { state in
            state.task = task
            return state.isCancelled
        }
        if cancelled { task.cancel() }
    }

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
        let (task, load) = state.withLock { state in
            state.isCancelled = true
            return (state.task, state.load)
        }
        task?.cancel()
        load?.cancel()
    }
}

extension CachedTransport {
    /// Signs `partition` out (see ``Credentials/init(_:credential:limit:partition:)``): nothing of
    /// it is left in memory or in flight, whatever call wrote it (a fetch, ``store(_:)``, an
    /// optimistic update), and a refresh of its credential under way ends.
    ///
    /// Its entries, their decoded values and the tags naming them are dropped and announced as
    /// ``CacheChange/invalidated(urls:endpoint:)``; its pending optimistic updates are forgotten (no
    /// rollback brings their entries back); its fetches in flight, revalidations and polls among
    /// them, are cancelled, and their callers fail with ``AuthenticationError/Code/signedOut``, so
    /// that none of them stores an answer or hands one to anybody. Afterwards ``snapshot()`` shows
    /// nothing of it. Other partitions, and requests of no partition, are not touched. Signing out
    /// a partition that holds nothing does nothing. Set the app's credential (``Credentials``)
    /// to the next account's, or nil, first, so that no new request goes out as the old one.
    ///
    /// Runs on the caller's thread, without waiting for the actor.
    /// - Complexity: O(n) in the keys held, read a batch at a time under the lock a hit takes.
    public nonisolated func signOut(partition: String) {
        preparation?.credentials?.signedOut(partition: partition)
        let (waiters, loads) = committer.remove(.partition(partition)).abandoned
        for waiter in waiters {
            let outcome = CacheOutcome(source: .network(waiter.reason))
            waiter.resume(with: .failure(AuthenticationError(.signedOut).carrying(outcome)))
        }
        for load in loads { load.cancel() }
    }
}
