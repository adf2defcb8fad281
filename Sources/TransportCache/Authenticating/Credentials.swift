import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The app's current credential and its one shared refresh: one account signed in at a time.
///
/// Give it to the transport with ``CachedTransport/Configuration/Identity/authenticate(with:)-(Credentials<Authenticating>)``.
/// Every request that goes to the network then carries the current credential. A request is keyed
/// by the credential's *account*, never by the token itself, so a hit never waits for a refresh and
/// a refreshed token keeps every entry:
/// - with `partition`, the account is the partition it names (the user's identifier), read once
///   when the app sets a credential; ``CachedTransport/signOut(partition:)`` drops all of it;
/// - without, each credential the app sets is an account of its own, kept by its refreshes.
///
/// For an app with several accounts signed in at once, each request naming its own, use
/// ``Accounts`` instead.
///
/// When the origin refuses a request (``Authenticator/isRefusal(_:to:)``):
/// - if it was sent with the current credential, one refresh starts, which every other refused
///   request, and every request that goes out meanwhile, waits for; each is then sent once more
///   with the new credential (the callers of one shared fetch share its resend). A resend refused
///   again may start one more refresh, within the limit, before its callers get the refusal;
/// - if the credential has been replaced since, it is sent again with the current one, without
///   a refresh, when that is the same account's, and fails with
///   ``AuthenticationError/Code/identityChanged`` otherwise: a refused request goes out again only
///   with a newer credential of its own account than the refused one;
/// - a refresh that throws (or returns the refused credential) fails every request waiting for it
///   with ``AuthenticationError/Code/refreshFailed`` (``AuthenticationError/Code/credentialUnchanged``),
///   and so does a refusal, after its end, of a request stamped with the credential before it
///   began: one refresh per burst. A request that goes out after it may start the next;
/// - more than ``RefreshLimit/maximumRefreshes`` within the window fail with
///   ``AuthenticationError/Code/tooManyRefreshes``.
///
/// A refresh, once called, runs to its end, even when every request waiting for it has left (they
/// end at once with `CancellationError`): an authorization server that rotates refresh tokens has
/// usually received it already, and a second refresh with the old token would be refused. A
/// request refused meanwhile joins it, and two refreshes of one account never overlap. The
/// transport never cancels the refresh: it runs the app's code, and on Linux cancelling a task that
/// awaits `URLSession.data(for:)` can deadlock the process.
///
/// Set ``credential`` when the user signs in or out: it applies to every request from then on.
/// A refresh under way then no longer replaces it, and no request of the new account waits for it.
public final class Credentials<Authenticating: Authenticator>: Sendable {
    private struct State: Sendable {
        /// The account of the current credential; nil while signed out, or when its partition
        /// could not be read.
        var current: AccountCredential<Authenticating>?
        /// Numbers the credentials the app set, for accounts without partitions.
        var lineage = 0
        /// The accounts signed out (by ``CachedTransport/signOut(partition:)`` or by setting the
        /// credential to nil) since the app last set one of their credentials: a request keyed
        /// for one of them fails with ``AuthenticationError/Code/signedOut``.
        var signedOut: Set<String> = []
    }

    let authenticator: Authenticating
    let limit: RefreshLimit
    private let partition: (@Sendable (Authenticating.Credential) throws -> String?)?
    private let state: Locked<State>
    /// What a key holds for the current credential. Written with ``state``'s lock held, so that a
    /// credential read with it is always read with its own account. Lock order: ``state``, then
    /// this one's, or then the current account's (``AccountCredential``).
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
        state = Locked(State())
        let account = account(of: credential, lineage: 0)
        state.withLock { state in
            state.current = self.account(credential, identity: account)
            keyAccount.set(account)
        }
    }

    /// The credential requests go out with. Setting it (sign-in, sign-out, another account, a
    /// credential the app refreshed itself) applies to every request from then on:
    /// - of the same partition, the requests waiting for a refresh go out with it at once, and a
    ///   refresh under way no longer replaces it;
    /// - of another account, the requests keyed for the previous one fail with
    ///   ``AuthenticationError/Code/identityChanged``, and nil fails them with
    ///   ``AuthenticationError/Code/signedOut``.
    ///
    /// Without partitions every credential the app sets is an account of its own, even the same
    /// token set again: the entries of the previous one are no longer read (they leave with the
    /// store's eviction). Declare partitions to keep entries across credentials the app sets for
    /// one user.
    public var credential: Authenticating.Credential? {
        get { state.withLock { $0.current?.credential } }
        set {
            // The app's code runs with no lock held.
            let lineage = state.withLock { state in
                state.lineage += 1
                return state.lineage
            }
            let account = account(of: newValue, lineage: lineage)
            let (replaced, ended) = state.withLock {
                state -> (
                    AccountCredential<Authenticating>?, (AccountCredential<Authenticating>, AuthenticationError.Code)?
                ) in
                let previous = state.current
                if newValue != nil, let previous, !previous.hasEnded,
                    case .success(let identity?) = account, identity.marker == previous.identity.marker
                {
                    return (previous, nil)
                }
                state.current = self.account(newValue, identity: account)
                keyAccount.set(account)
                if let marker = state.current?.identity.marker { state.signedOut.remove(marker) }
                guard let previous else { return (nil, nil) }
                if newValue == nil { state.signedOut.insert(previous.identity.marker) }
                return (nil, (previous, newValue == nil ? .signedOut : .identityChanged))
            }
            if let replaced, let newValue { replaced.replace(with: newValue) }
            if let (previous, code) = ended { previous.end(because: code) }
        }
    }

    /// The account of `credential` with `identity`, unless there is none.
    private func account(
        _ credential: Authenticating.Credential?, identity: Result<AccountIdentity?, AuthenticationError>
    ) -> AccountCredential<Authenticating>? {
        guard let credential, case .success(let identity?) = identity else { return nil }
        return AccountCredential(credential, identity: identity, authenticator: authenticator, limit: limit)
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
    var accountSource: AccountSource { .current(keyAccount) }

    nonisolated(nonsending) func authenticate(_ request: URLRequest, keyedFor account: String?) async throws
        -> Authenticated
    {
        let (current, signedOut) = state.withLock { state in
            (state.current, account.map { state.signedOut.contains($0) } ?? false)
        }
        if let current, current.identity.marker == account { return try await current.authenticate(request) }
        if signedOut { throw AuthenticationError(.signedOut) }
        // Keyed with no account while none is signed in: it goes out with no credential, and a
        // refusal of it fails with `noCredential`.
        if account == nil, current == nil {
            return Authenticated(
                request: request,
                stamp: CredentialStamp(account: NoCredential.shared, generation: 0, lastRefreshNumber: 0))
        }
        throw AuthenticationError(.identityChanged)
    }

    func isRefusal(_ response: URLResponse, to request: URLRequest) -> Bool {
        guard let response = response as? HTTPURLResponse else { return false }
        return authenticator.isRefusal(response, to: request)
    }

    func signedOut(partition: String) {
        let marker = KeyHeaders.partitionPrefix + partition
        let ended = state.withLock { state -> AccountCredential<Authenticating>? in
            state.signedOut.insert(marker)
            guard state.current?.identity.marker == marker else { return nil }
            // Until the app sets another credential, no call keys a request for it: nothing of
            // the account is read, written or sent, in whichever order the credential goes.
            keyAccount.set(.failure(AuthenticationError(.signedOut)))
            return state.current
        }
        ended?.end(because: .signedOut)
    }
}

/// What a key holds for the current credential of ``Credentials``: its partition's or its own
/// account, nil without a credential, or why there is none (the partition could not be read).
/// Not generic, and one reference, so that a hit reads it without looking up a generic type at run
/// time or copying an error; read without a lock (``ReadMostly``), as every call reads it and only
/// a new credential writes it.
final class KeyAccount: Sendable {
    private let value = ReadMostly<AccountIdentity?>(nil)

    /// The account. Never waits.
    /// - Throws: ``AuthenticationError/Code/partitionUnavailable``.
    @inline(__always)
    func current() throws -> AccountIdentity? {
        let account = value.read { $0 }
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
        value.write { $0 = identity }
    }
}
