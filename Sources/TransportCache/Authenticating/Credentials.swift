import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The app's current credential and its one shared refresh.
///
/// Give it to the transport with ``CachedTransport/Configuration/Identity/authenticate(with:)``. Every
/// request that goes to the network then carries the current credential. A request is keyed by
/// the credential's *account*, never by the token itself, so a hit never waits for a refresh and
/// a refreshed token keeps every entry:
/// - with `partition`, the account is the partition it names (the user's identifier), read once
///   when the app sets a credential; ``CachedTransport/signOut(partition:)`` drops all of it;
/// - without, each credential the app sets is an account of its own, kept by its refreshes.
///
/// When the origin refuses a request (``Authenticator/isRefusal(_:to:)``):
/// - if it was sent with the current credential, one refresh starts, which every other refused
///   request, and every request that goes out meanwhile, waits for; each is then sent once more
///   with the new credential (the callers of one shared fetch share its resend);
/// - if the credential has been replaced since, it is sent again with the current one, without
///   a refresh, when that is the same account's, and fails with
///   ``AuthenticationError/Code/identityChanged`` otherwise: a refused request goes out again only
///   with a newer credential of its own account than the refused one;
/// - a refresh that throws fails every request waiting for it with
///   ``AuthenticationError/Code/refreshFailed``, and the next refused request may try again;
/// - more than ``RefreshLimit/maximumRefreshes`` within the window fail with
///   ``AuthenticationError/Code/tooManyRefreshes``;
/// - a refresh every waiting request has left is cancelled, and the next request starts a new one.
///
/// Set ``credential`` when the user signs in or out: it applies to every request from then on,
/// and a refresh under way ends, so no request of the new account waits for it or fails with it.
public final class Credentials<Authenticating: Authenticator>: Sendable {
    private struct State: Sendable {
        var credential: Authenticating.Credential?
        /// Counts the credentials, set by the app or refreshed: a refused request is resent only
        /// once a later one is current.
        var generation = 0
        /// Numbers the credentials the app set, for accounts without partitions.
        var lineage = 0
        var refresh: SharedRefresh?
        var refreshStarts: [ContinuousClock.Instant] = []
        /// The generation whose partition was signed out (``CredentialApplying/signedOut(partition:)``):
        /// its credential is neither sent nor refreshed until the app sets another.
        var signedOut: Int?

        /// The refresh under way, unless every request left it or it was ended.
        mutating func liveRefresh() -> SharedRefresh? {
            if let refresh, !refresh.isLive { self.refresh = nil }
            return refresh
        }
    }

    let authenticator: Authenticating
    let limit: RefreshLimit
    private let partition: (@Sendable (Authenticating.Credential) throws -> String?)?
    private let state: Locked<State>
    /// What a key holds for the current credential. Written with ``state``'s lock held, so that a
    /// credential read with it is always read with its own account. Lock order: ``state``, then
    /// this one's.
    let keyAccount = KeyAccount()

    /// Credentials that `authenticator` applies and refreshes, starting from `credential` (nil
    /// while signed out: requests then go out without one).
    ///
    /// - Parameters:
    ///   - authenticator: applies, refreshes and judges the credentials.
    ///   - credential: the credential requests go out with first; nil while signed out.
    ///   - limit: how many refreshes may start within a window.
    ///   - partition: the partition (account) a credential belongs to, such as the user's
    ///     identifier; nil, the default, for none. Read once each time the app sets a credential,
    ///     never for a refreshed one, which stays in its account; a closure that answers differently
    ///     on two calls therefore never splits one credential's entries. When it throws, requests
    ///     that would carry that credential fail with ``AuthenticationError/Code/partitionUnavailable``
    ///     and nothing is sent or stored; when it answers nil, the credential is an account of its own.
    public init(
        _ authenticator: Authenticating, credential: Authenticating.Credential?, limit: RefreshLimit = RefreshLimit(),
        partition: (@Sendable (Authenticating.Credential) throws -> String?)? = nil
    ) {
        self.authenticator = authenticator
        self.limit = limit
        self.partition = partition
        state = Locked(State(credential: credential))
        let account = account(of: credential, lineage: 0)
        keyAccount.set(account)
    }

    /// The credential requests go out with. Setting it (sign-in, sign-out, another account, a
    /// credential the app refreshed itself) applies to every request from then on and ends a
    /// refresh under way: the requests waiting for it go out with the new credential when it is
    /// the same partition's, and fail with ``AuthenticationError/Code/identityChanged`` otherwise.
    /// Without partitions every credential the app sets is an account of its own, even the same
    /// token set again: the entries of the previous one are no longer read (they leave with the
    /// store's eviction), and its requests in flight fail with
    /// ``AuthenticationError/Code/identityChanged``. Declare partitions to keep entries across
    /// credentials the app sets for one user.
    public var credential: Authenticating.Credential? {
        get { state.withLock { $0.credential } }
        set {
            // The app's code runs with no lock held.
            let lineage = state.withLock { state in
                state.lineage += 1
                return state.lineage
            }
            let account = account(of: newValue, lineage: lineage)
            let ended = state.withLock { state in
                state.credential = newValue
                state.generation += 1
                keyAccount.set(account)
                defer { state.refresh = nil }
                return state.refresh
            }
            ended?.end()
        }
    }

    /// What the key holds for `credential`, the app's `lineage`-th.
    private func account(of credential: Authenticating.Credential?, lineage: Int) -> Result<
        AccountIdentity?, AuthenticationError
    > {
        guard let credential else { return .success(nil) }
        do {
            if let partition, let name = try partition(credential) {
                return .success(AccountIdentity(KeyHeaders.partitionPrefix + name))
            }
        } catch {
            return .failure(AuthenticationError(.partitionUnavailable, underlyingError: error))
        }
        return .success(AccountIdentity(KeyHeaders.credentialPrefix + String(lineage)))
    }
}

extension Credentials: CredentialApplying {
    nonisolated(nonsending) func authenticate(_ request: URLRequest) async throws -> Authenticated {
        while true {
            let (credential, generation, account, refresh, signedOut) = state.withLock { state in
                (
                    state.credential, state.generation, keyAccount.result, state.liveRefresh(),
                    state.signedOut == state.generation
                )
            }
            if let refresh {
                // Goes out with the refreshed credential, or fails with it.
                try await Self.wait(for: refresh)
                continue
            }
            if signedOut { throw AuthenticationError(.signedOut) }
            // The app's code runs with no lock held.
            var request = request
            if let credential { authenticator.apply(credential, to: &request) }
            return Authenticated(request: request, generation: generation, account: try account.get()?.marker)
        }
    }

    func isRefusal(_ response: URLResponse, to request: URLRequest) -> Bool {
        guard let response = response as? HTTPURLResponse else { return false }
        return authenticator.isRefusal(response, to: request)
    }

    func recover(fromRefusalOf request: URLRequest, at refused: Int, clock: CacheClock) async throws {
        while true {
            let (credential, generation, running, signedOut) = state.withLock {
                ($0.credential, $0.generation, $0.liveRefresh(), $0.signedOut == $0.generation)
            }
            // A later credential is current: the request goes out again with it.
            if generation != refused { return }
            if signedOut { throw AuthenticationError(.signedOut) }
            if let running {
                try await Self.wait(for: running)
                continue
            }
            guard let credential else { throw AuthenticationError(.noCredential) }
            if let refresh = try startRefresh(of: credential, refusing: request, ifStill: generation, at: clock.now) {
                try await Self.wait(for: refresh)
            }
        }
    }

    func signedOut(partition: String) {
        let ended = state.withLock { state -> SharedRefresh? in
            guard (try? keyAccount.result.get())??.marker == KeyHeaders.partitionPrefix + partition else {
                return nil
            }
            state.signedOut = state.generation
            defer { state.refresh = nil }
            return state.refresh
        }
        ended?.end()
    }

    /// Starts the one refresh of `credential` at `now` (the transport's clock), unless the state
    /// moved on since it was read at `generation` (then nil: read it again). The refresh is
    /// registered under the lock and its task started after it.
    private func startRefresh(
        of credential: Authenticating.Credential, refusing request: URLRequest, ifStill generation: Int,
        at now: ContinuousClock.Instant
    ) throws -> SharedRefresh? {
        let refresh = try state.withLock { state -> SharedRefresh? in
            guard state.generation == generation, state.liveRefresh() == nil else { return nil }
            state.refreshStarts.removeAll { now - $0 >= limit.window }
            guard state.refreshStarts.count < limit.maximumRefreshes else {
                throw AuthenticationError(.tooManyRefreshes)
            }
            state.refreshStarts.append(now)
            let refresh = SharedRefresh()
            state.refresh = refresh
            return refresh
        }
        if let refresh {
            refresh.start { [self] in
                try await self.refreshed(credential, refusing: request, generation: generation, by: refresh)
            }
        }
        return refresh
    }

    /// Waits for `refresh`; a cancellation that is not the caller's own (the refresh was ended,
    /// or left by every other waiter a moment before this one arrived) is read as "ask again".
    private static func wait(for refresh: SharedRefresh) async throws {
        do {
            try await refresh.wait()
        } catch is CancellationError where !Task.isCancelled {
            return
        }
    }

    /// Runs the authenticator's refresh of `credential`, outside the transport's chain, and makes
    /// its answer the current credential, in the same account, unless another credential became
    /// current meanwhile.
    private func refreshed(
        _ credential: Authenticating.Credential, refusing request: URLRequest, generation: Int,
        by refresh: SharedRefresh
    ) async throws {
        let result: Result<Authenticating.Credential, any Error>
        do {
            result = .success(
                try await RequestPreparation.$isRefreshing.withValue(true) {
                    try await authenticator.refresh(credential)
                })
        } catch {
            result = .failure(error)
        }
        let unchanged = (try? result.get()).map { authenticator.isRequest(request, authenticatedWith: $0) } ?? false
        try state.withLock { state in
            if state.refresh === refresh { state.refresh = nil }
            switch result {
            case .failure(let error) where Task.isCancelled || Self.isCancellation(error):
                throw CancellationError()
            case .failure(let error):
                throw AuthenticationError(.refreshFailed, underlyingError: error)
            case .success(let refreshed):
                if unchanged { throw AuthenticationError(.credentialUnchanged) }
                if state.generation == generation {
                    state.credential = refreshed
                    state.generation += 1
                }
            }
        }
    }

    /// Whether `error` says the refresh was cancelled: Swift's own, or URLSession's for the
    /// refresh's own request.
    private static func isCancellation(_ error: any Error) -> Bool {
        if error is CancellationError { return true }
        return (error as? URLError)?.code == .cancelled
    }
}

/// A request with the current credential on it, and which credential that was.
struct Authenticated: Sendable {
    let request: URLRequest
    /// The credential's place among those that were current (see ``CredentialApplying/recover(fromRefusalOf:at:clock:)``).
    let generation: Int
    /// What a key made for that credential holds (see ``CredentialApplying/currentAccount()``).
    let account: String?
}

/// The type-erased view of ``Credentials`` the transport holds.
protocol CredentialApplying: Sendable {
    /// What a key holds for the current credential: its partition's or its own account.
    var keyAccount: KeyAccount { get }
    /// `request` with the current credential on it, once any refresh under way has ended.
    nonisolated(nonsending) func authenticate(_ request: URLRequest) async throws -> Authenticated
    /// Whether `response` to `request` refuses its credential.
    func isRefusal(_ response: URLResponse, to request: URLRequest) -> Bool
    /// Returns once a credential later than the `refused`-th, which `request` was refused with,
    /// is current: at once when one is, else after the one shared refresh. The refresh limit's
    /// window is counted by `clock`, the transport's.
    /// - Throws: ``AuthenticationError`` when there is none to be had; `CancellationError`.
    func recover(fromRefusalOf request: URLRequest, at refused: Int, clock: CacheClock) async throws
    /// Ends the refresh under way when the current credential is `partition`'s, and keeps that
    /// credential from being sent or refreshed again until the app sets another.
    func signedOut(partition: String)
}

/// What a key holds for the current credential of ``Credentials``: its partition's or its own
/// account, nil without a credential, or why there is none (the partition could not be read).
/// Not generic, and one reference, so that a hit reads it without looking up a generic type at run
/// time or copying an error.
final class KeyAccount: Sendable {
    private let value = Locked<AccountIdentity?>(nil)

    /// The account. Never waits.
    /// - Throws: ``AuthenticationError/Code/partitionUnavailable``.
    @inline(__always)
    func current() throws -> AccountIdentity? {
        let account = value.withLock { $0 }
        if let failure = account?.failure { throw failure }
        return account
    }

    var result: Result<AccountIdentity?, AuthenticationError> {
        Result { try current() }.mapError { $0 as! AuthenticationError }
    }

    func set(_ account: Result<AccountIdentity?, AuthenticationError>) {
        let identity: AccountIdentity? =
            switch account {
            case .success(let identity): identity
            case .failure(let failure): AccountIdentity(failure: failure)
            }
        value.withLock { $0 = identity }
    }
}
