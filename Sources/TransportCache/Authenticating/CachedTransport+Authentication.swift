import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CachedTransport {
    /// Prepares `launch`'s request again (see ``RequestPreparation``) and sends it, unless it
    /// would now go out as another identity than its key's: then, or when an adapter or the
    /// credential throws, the fetch fails with that error and nothing is sent or stored.
    nonisolated func launchPrepared(
        _ launch: Launch, by preparation: RequestPreparation, interval: TransportEvents.FetchInterval
    ) {
        let prepared = PreparedLoad()
        // Recorded before its task can start the network load or complete the fetch.
        if case .cancel = inFlight.withLock({ $0.loadStarted(prepared, for: launch.id) }) { return }
        let task = Task {
            let request: URLRequest
            do {
                request = try await preparation.prepare(launch.request)
                if !launch.mayChangeIdentity, planner.storedKey(of: request) != launch.key {
                    throw AuthenticationError(.identityChanged)
                }
            } catch {
                // Cancelled: every caller left, and the fetch is gone.
                if !Task.isCancelled { complete(launch.id, with: .failure(error), interval: interval) }
                return
            }
            let inFlight = inFlight.withLock { machine in
                machine.fetches[launch.id].map { fetch in fetch.sentRequest = request } != nil
            }
            guard inFlight else { return }
            send(request, of: launch.id, interval: interval, within: prepared)
        }
        prepared.wait(for: task)
    }

    /// Whether `result` refuses the credential of `request`, as the app's authenticator says;
    /// false without one. Call with no lock held: the authenticator is the app's code.
    nonisolated func refuses(_ result: Result<(Data, URLResponse), any Error>, to request: URLRequest) -> Bool {
        guard let credentials = preparation?.credentials, case .success(let answer) = result else { return false }
        return credentials.isRefusal(answer.1, to: request)
    }

    /// The request a refused `fetch` was sent with, and the credentials to recover with; nil when
    /// it may not reauthenticate: a refresh's own request, or one already resent. Call with the
    /// in-flight lock held.
    nonisolated func reauthentication(of fetch: Fetch) -> (URLRequest, any CredentialApplying)? {
        guard !fetch.bypassesPreparation, !fetch.hasReauthenticated, let credentials = preparation?.credentials else {
            return nil
        }
        fetch.hasReauthenticated = true
        return (fetch.sentRequest ?? fetch.request, credentials)
    }

    /// Waits for a credential other than the one `refused` was sent with (the one shared refresh,
    /// see ``Credentials``), then sends fetch `fetchID` once more with it; fails the fetch with
    /// the refresh's error. The wait is the fetch's load: when every caller leaves, it is
    /// cancelled, and with the last waiter, the refresh.
    nonisolated func reauthenticateThenResend(
        _ fetchID: Int, refused: URLRequest, by credentials: any CredentialApplying
    ) -> any NetworkLoad {
        TaskLoad(
            task: Task {
                let vouched: Bool
                do {
                    vouched = try await credentials.recover(fromRefusalOf: refused)
                } catch {
                    if !Task.isCancelled, let url = refused.url { fail(fetchID, with: error, url: url) }
                    return
                }
                let next = inFlight.withLock { machine -> Launch? in
                    guard let fetch = machine.fetches[fetchID] else { return nil }
                    fetch.requestTime = planner.policy.clock.date
                    var launch = launchable((fetchID, fetch))
                    // Only a refresh of its own credential may change what the key held.
                    launch.mayChangeIdentity = vouched
                    return launch
                }
                if let next { launch(next) }
            })
    }

    /// Sends `plan`'s request once more when its credential was refused (see ``Credentials``),
    /// prepared again with the credential now current; otherwise returns `answer` as it is.
    nonisolated(nonsending) func resendingIfRefused(
        _ plan: SendPlan, answer: (Data, URLResponse)
    ) async throws -> (Data, URLResponse) {
        guard let preparation, let credentials = preparation.credentials, !RequestPreparation.isRefreshing,
            credentials.isRefusal(answer.1, to: plan.request)
        else { return answer }
        let vouched = try await credentials.recover(fromRefusalOf: plan.request)
        let resent = try await preparation.prepare(plan.request)
        // A credential the app set meanwhile may be another account's: not for this request.
        if !vouched,
            CacheKey(resent, keyHeaders: planner.keyHeaders) != CacheKey(plan.request, keyHeaders: planner.keyHeaders)
        {
            throw AuthenticationError(.identityChanged)
        }
        return try await loader.load(resent)
    }
}

/// The load of a fetch whose request is prepared before it is sent: the preparation, then the
/// network load, cancelled as one.
final class PreparedLoad: NetworkLoad {
    private struct State {
        var task: Task<Void, Never>?
        var load: (any NetworkLoad)?
        var isCancelled = false
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

    /// The network load has started. - Returns: false when the load was cancelled first.
    func started(_ load: any NetworkLoad) -> Bool {
        state.withLock { state in
            guard !state.isCancelled else { return false }
            state.load = load
            return true
        }
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
    /// Signs `partition` out (see ``Configuration/partition``): nothing of it is left in memory or
    /// in flight.
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
        let (waiters, loads) = committer.dropPartition(partition)
        for waiter in waiters {
            let outcome = CacheOutcome(source: .network(waiter.reason))
            waiter.resume(with: .failure(AuthenticationError(.signedOut).carrying(outcome)))
        }
        for load in loads { load.cancel() }
    }
}
