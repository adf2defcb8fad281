import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One account's credential and its refreshes: the one place a credential is applied, refreshed,
/// replaced and ended. ``Credentials`` keeps one for the account of its current credential,
/// ``Accounts`` one for each account signed in.
///
/// - A refresh, once started, runs to its end (see ``SharedRefresh``); a request refused meanwhile
///   joins it, and its result becomes the credential unless the app replaced the credential or
///   the account ended meanwhile.
/// - Two refreshes of one account never overlap: a request refused while a refresh it may not
///   join still runs (one of a credential the app replaced since) waits for that refresh's end
///   before it starts the next.
/// - One refresh per burst: a request stamped with a credential before the last refresh of that
///   credential began, and refused after that refresh failed (whatever its error, a returned
///   unchanged credential included), fails with its error rather than starting another; one
///   running is joined as usual. An authorization server that refused one refresh token refuses it
///   again, and one that rotates them may take a second presentation of a revoked one as a stolen
///   token. The failure outranks ``AuthenticationError/Code/tooManyRefreshes``.
/// - Once ended (signed out, or, for ``Credentials``, another account's credential set), nothing
///   is sent with it or refreshed again: every request of the account fails with why it ended.
///
/// Lock order: its state, then its refresh's (read for ``SharedRefresh/releases``).
final class AccountCredential<Authenticating: Authenticator>: CredentialRecovering {
    private struct State: Sendable {
        var credential: Authenticating.Credential
        /// Counts the credentials of this account, set by the app or refreshed: a refused request
        /// is resent only once a later one is current.
        var generation = 0
        /// The refresh under way, and the generation it refreshes; nil once it has ended.
        var refresh: (refresh: SharedRefresh, of: Int)?
        /// The number of the last refresh started (they are numbered from 1): a request going out
        /// notes it (``CredentialStamp``), so that a refusal of it tells the refreshes that began
        /// after it was stamped.
        var lastRefreshNumber = 0
        /// The last refresh that failed: the generation it refreshed, its number among those
        /// started, and its error.
        var failed: (of: Int, number: Int, error: AuthenticationError)?
        var refreshStarts: [ContinuousClock.Instant] = []
        /// Why its requests fail, once it has ended.
        var ended: AuthenticationError.Code?
    }

    let authenticator: Authenticating
    let limit: RefreshLimit
    /// What the keys of its requests hold.
    let identity: AccountIdentity
    private let state: Locked<State>

    init(
        _ credential: Authenticating.Credential, identity: AccountIdentity, authenticator: Authenticating,
        limit: RefreshLimit
    ) {
        self.authenticator = authenticator
        self.limit = limit
        self.identity = identity
        state = Locked(State(credential: credential))
    }

    /// The credential its requests go out with; nil once ended.
    var credential: Authenticating.Credential? {
        state.withLock { $0.ended == nil ? $0.credential : nil }
    }

    /// Whether it has ended (see ``end(because:)``).
    var hasEnded: Bool { state.withLock { $0.ended != nil } }

    /// The app set `credential` for this account: requests go out with it from now on, and those
    /// waiting for a refresh go out with it at once. A refresh under way runs on, but its result
    /// no longer replaces this one.
    func replace(with credential: Authenticating.Credential) {
        let refresh = state.withLock { state in
            state.credential = credential
            state.generation += 1
            return state.refresh?.refresh
        }
        refresh?.releaseWaiters()
    }

    /// Ends the account: from now on its requests fail with `code`, and those waiting for its
    /// refresh fail at once. A sign-out outranks another reason, whichever comes first.
    func end(because code: AuthenticationError.Code) {
        let refresh = state.withLock { state in
            if state.ended == nil || code == .signedOut { state.ended = code }
            return state.refresh?.refresh
        }
        refresh?.releaseWaiters()
    }

    /// `request` with the current credential on it, once a refresh of that credential under way
    /// has ended.
    /// - Throws: why the account ended; the refresh's error.
    nonisolated(nonsending) func authenticate(_ request: URLRequest) async throws -> Authenticated {
        while true {
            let (credential, generation, lastRefreshNumber, refresh, ended) = state.withLock { state in
                (
                    state.credential, state.generation, state.lastRefreshNumber,
                    state.refresh.flatMap { $0.of == state.generation ? ($0.refresh, $0.refresh.releases) : nil },
                    state.ended
                )
            }
            if let ended { throw AuthenticationError(ended) }
            if let (refresh, releases) = refresh {
                // Goes out with the refreshed credential, or fails with it.
                do { try await refresh.wait(releasedAfter: releases) } catch is AskAgain {}
                continue
            }
            // The app's code runs with no lock held.
            var request = request
            authenticator.apply(credential, to: &request)
            return Authenticated(
                request: request,
                stamp: CredentialStamp(account: self, generation: generation, lastRefreshNumber: lastRefreshNumber))
        }
    }

    func recover(
        fromRefusalOf request: URLRequest, at refused: Int, sentAfter: Int, clock: CacheClock,
        again: Bool
    ) async throws -> Bool {
        while true {
            let (credential, generation, running, ended) = state.withLock {
                ($0.credential, $0.generation, $0.refresh.map { ($0.refresh, $0.of, $0.refresh.releases) }, $0.ended)
            }
            if let ended { throw AuthenticationError(ended) }
            // A later credential is current: the request goes out again with it.
            if generation != refused { return true }
            if let running {
                do {
                    try await running.0.wait(releasedAfter: running.2)
                } catch is AskAgain {
                } catch let error where running.1 != refused && !(error is CancellationError) {
                    // The end of a refresh of a credential replaced since, waited for only so that
                    // two refreshes never overlap: its failure is not this request's.
                }
                continue
            }
            // A wait every caller left asks the app for nothing.
            try Task.checkCancellation()
            let started: SharedRefresh?
            do {
                started = try startRefresh(
                    of: credential, refusing: request, ifStill: generation, sentAfter: sentAfter, at: clock.now)
            } catch let error as AuthenticationError where again && error.code == .tooManyRefreshes {
                // One more refresh was only worth trying within the limit: the refusal is the answer.
                return false
            }
            if let started {
                do { try await started.wait(releasedAfter: 0) } catch is AskAgain {}
            }
        }
    }

    /// Starts the one refresh of `credential` at `now` (the transport's clock), for `request`,
    /// stamped after refresh number `sentAfter` had started, unless the state moved on since it
    /// was read at `generation` (then nil: read it again). Its task starts after the lock is
    /// released.
    /// - Throws: the error of a later refresh of `credential` that failed: the request was of its
    ///   burst; ``AuthenticationError/Code/tooManyRefreshes``.
    private func startRefresh(
        of credential: Authenticating.Credential, refusing request: URLRequest, ifStill generation: Int,
        sentAfter: Int, at now: ContinuousClock.Instant
    ) throws -> SharedRefresh? {
        let started = try state.withLock { state -> (refresh: SharedRefresh, number: Int)? in
            guard state.generation == generation, state.refresh == nil, state.ended == nil else { return nil }
            if let failed = state.failed, failed.of == generation, failed.number > sentAfter { throw failed.error }
            state.refreshStarts.removeAll { now - $0 >= limit.window }
            guard state.refreshStarts.count < limit.maximumRefreshes else {
                throw AuthenticationError(.tooManyRefreshes)
            }
            state.refreshStarts.append(now)
            state.lastRefreshNumber += 1
            let refresh = SharedRefresh()
            state.refresh = (refresh, generation)
            return (refresh, state.lastRefreshNumber)
        }
        guard let (refresh, number) = started else { return nil }
        refresh.start { [self] in
            try await self.refreshed(credential, refusing: request, generation: generation, number: number)
        }
        return refresh
    }

    /// Runs the authenticator's refresh of `credential`, the `number`-th started, outside the
    /// transport's chain, and makes its answer the current credential unless the app replaced it
    /// or the account ended meanwhile; its failure is kept for the requests of its burst.
    private func refreshed(
        _ credential: Authenticating.Credential, refusing request: URLRequest, generation: Int, number: Int
    ) async throws {
        let result: Result<Authenticating.Credential, any Error>
        do {
            result = .success(
                try await RequestPreparation.refreshing {
                    try await authenticator.refresh(credential)
                })
        } catch {
            result = .failure(error)
        }
        let unchanged = (try? result.get()).map { authenticator.isRequest(request, authenticatedWith: $0) } ?? false
        try state.withLock { state in
            state.refresh = nil
            let failure: AuthenticationError
            switch result {
            case .failure(let error):
                failure = AuthenticationError(.refreshFailed, underlyingError: error)
            case .success(let refreshed):
                guard !unchanged else {
                    failure = AuthenticationError(.credentialUnchanged)
                    break
                }
                if state.generation == generation, state.ended == nil {
                    state.credential = refreshed
                    state.generation += 1
                }
                return
            }
            state.failed = (generation, number, failure)
            throw failure
        }
    }
}

/// What a request going out carries of the credential on it: the account it belongs to and
/// which of its credentials that was, so that a refusal of it is recovered from in that account.
struct CredentialStamp: Sendable {
    let account: any CredentialRecovering
    /// The credential's place among the account's (see ``CredentialRecovering/recover(fromRefusalOf:at:sentAfter:clock:again:)``).
    let generation: Int
    /// The number of the account's last refresh started when the request was stamped.
    let lastRefreshNumber: Int

    /// Returns once a credential later than this one is current in its account (true), or, for a
    /// request refused `again` after a refresh, when one more refresh is past the limit (false).
    func recover(fromRefusalOf request: URLRequest, clock: CacheClock, again: Bool) async throws -> Bool {
        try await account.recover(
            fromRefusalOf: request, at: generation, sentAfter: lastRefreshNumber, clock: clock, again: again)
    }
}

/// An account that recovers from a refusal of one of its credentials (``AccountCredential``).
protocol CredentialRecovering: AnyObject, Sendable {
    /// Returns true once a credential later than the `refused`-th, which `request` was refused
    /// with, is current: at once when one is, else after the account's one refresh. The request
    /// was stamped after the account's refresh number `sentAfter` had started: a later refresh of
    /// the same credential that failed was its burst's, and its error is the request's. The refresh limit's window is counted by
    /// `clock`, the transport's. For a request refused `again` right after a refresh, a refresh
    /// past the limit is not an error: it returns false, and the refusal is the request's answer.
    /// - Throws: ``AuthenticationError`` when there is none to be had; `CancellationError` when
    ///   the caller is cancelled (the refresh goes on).
    func recover(
        fromRefusalOf request: URLRequest, at refused: Int, sentAfter: Int, clock: CacheClock, again: Bool
    ) async throws -> Bool
}

/// The account of a request sent with no credential while none is signed in: a refusal of it
/// has no later credential to wait for.
final class NoCredential: CredentialRecovering {
    static let shared = NoCredential()

    func recover(
        fromRefusalOf request: URLRequest, at refused: Int, sentAfter: Int, clock: CacheClock, again: Bool
    ) async throws -> Bool {
        throw AuthenticationError(.noCredential)
    }
}

/// A request with its account's current credential on it, and which credential that was.
struct Authenticated: Sendable {
    let request: URLRequest
    /// Nil for a request that went out with no credential (no account is signed in).
    let stamp: CredentialStamp?
}

/// The type-erased view of ``Credentials`` and ``Accounts`` the transport holds.
protocol CredentialApplying: Sendable {
    /// Where a key finds the account of a request.
    var accountSource: AccountSource { get }
    /// `request`, keyed for the account `account` (a key's account marker; nil for none), with
    /// that account's current credential on it, once a refresh of it under way has ended.
    /// - Throws: ``AuthenticationError`` when that account's credential cannot be sent: signed
    ///   out, replaced by another account's, or never set.
    nonisolated(nonsending) func authenticate(_ request: URLRequest, keyedFor account: String?) async throws
        -> Authenticated
    /// Whether `response` to `request` refuses its credential.
    func isRefusal(_ response: URLResponse, to request: URLRequest) -> Bool
    /// Ends `partition`'s account, when it has one: nothing is sent or refreshed with its
    /// credential again, and its waiting requests fail with ``AuthenticationError/Code/signedOut``.
    func signedOut(partition: String)
}

/// Where the key of a request finds its account: read on every call, a hit's included, so both are
/// one non-generic reference.
enum AccountSource: Sendable {
    /// The account of one current credential (``Credentials``).
    case current(KeyAccount)
    /// The account each request names (``Accounts``).
    case named(AccountDirectory)
}
