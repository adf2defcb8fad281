import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Several accounts signed in at once, each with its own credential and its own refresh: a mail
/// app with three inboxes, a social app polling two accounts.
///
/// Give it to the transport with ``CachedTransport/Configuration/Identity/authenticate(with:)-(Accounts<Authenticating>)``.
/// Each request names its account with `URLRequest.account`, and is keyed by it:
/// two accounts never share an entry, a fetch in flight or a decoded value, and an account's
/// token renewals keep its entries. Everything the transport sends for an account (a caller's
/// fetch, a revalidation, a poll, a retry, a resend after a refusal) carries that account's
/// current credential, applied by the authenticator as it goes out.
///
/// ```swift
/// let accounts = Accounts(TokenAuthenticator(api: api))
/// try accounts.setCredential(aliceSession, for: "alice")
/// try accounts.setCredential(bobSession, for: "bob")
/// var configuration = CachedTransport.Configuration()
/// configuration.identity.authenticate(with: accounts)
/// let transport = CachedTransport(configuration: configuration)
///
/// var inbox = URLRequest(url: inboxURL)
/// inbox.account = "alice"
/// let (data, _) = try await transport.data(for: inbox)
///
/// transport.signOut(partition: "bob")   // nothing of bob is left; alice goes on
/// ```
///
/// - A request that names no account fails with ``AuthenticationError/Code/noAccount``, one that
///   names an account with no credential with ``AuthenticationError/Code/noCredential``, and one
///   that names a signed-out account with ``AuthenticationError/Code/signedOut``; nothing is sent
///   or stored. A request that carries its own `Authorization` and names no account is the app's
///   to authenticate: it goes out as it is, keyed by that header.
/// - Each account refreshes on its own, as ``Credentials`` does for its one account: one refresh
///   per account for any number of refused requests, never two of one account at once, run to its
///   end once called. One account's refresh never delays or fails another's requests.
/// - ``CachedTransport/signOut(partition:)`` with the account's name leaves nothing of it in memory
///   or in flight (entries, tags, optimistic updates, polls, prefetches, its refresh's waiters),
///   and forgets its credential; the other accounts go on untouched.
public final class Accounts<Authenticating: Authenticator>: Sendable {
    private struct State: Sendable {
        var accounts: [String: AccountCredential<Authenticating>] = [:]
    }

    let authenticator: Authenticating
    let limit: RefreshLimit
    private let state = Locked(State())
    /// What the keys of each account hold, read on every call. Written with ``state``'s lock
    /// held. Lock order: ``state``, then this one's.
    let directory = AccountDirectory()

    /// Accounts whose credentials `authenticator` applies and refreshes, none signed in yet.
    ///
    /// - Parameters:
    ///   - authenticator: applies, refreshes and judges the credentials.
    ///   - limit: how many refreshes of one account may start within a window.
    public init(_ authenticator: Authenticating, limit: RefreshLimit = RefreshLimit()) {
        self.authenticator = authenticator
        self.limit = limit
    }

    /// Signs `account` in with `credential`, or replaces its credential (a credential the app
    /// refreshed itself): its requests go out with it from now on, those waiting for its refresh at
    /// once, and a refresh under way no longer replaces it. Nil signs it out of the credentials
    /// (its requests fail with ``AuthenticationError/Code/signedOut``); call
    /// ``CachedTransport/signOut(partition:)`` as well, in either order, to drop what it left.
    ///
    /// - Throws: ``AuthenticationError/Code/invalidAccount`` for a name that is empty, has
    ///   control characters or a comma, or begins or ends with a space; then nothing changes.
    public func setCredential(_ credential: Authenticating.Credential?, for account: String) throws {
        guard AccountDirectory.isValid(account) else { throw AuthenticationError(.invalidAccount) }
        guard let credential else {
            signedOut(partition: account)
            return
        }
        let replaced = state.withLock { state -> AccountCredential<Authenticating>? in
            if let held = state.accounts[account] { return held }
            let identity = AccountIdentity(KeyHeaders.partitionPrefix + account)
            state.accounts[account] = AccountCredential(
                credential, identity: identity, authenticator: authenticator, limit: limit)
            directory.signIn(account, as: identity)
            return nil
        }
        replaced?.replace(with: credential)
    }

    /// The credential `account`'s requests go out with; nil when it is not signed in.
    public func credential(for account: String) -> Authenticating.Credential? {
        state.withLock { $0.accounts[account] }?.credential
    }

    /// The accounts signed in, sorted.
    public var signedInAccounts: [String] {
        state.withLock { $0.accounts.keys.sorted() }
    }
}

extension Accounts: CredentialApplying {
    var accountSource: AccountSource { .named(directory) }

    nonisolated(nonsending) func authenticate(_ request: URLRequest, keyedFor account: String?) async throws
        -> Authenticated
    {
        guard let name = account.flatMap(KeyHeaders.partition(ofMarker:)) else { throw AuthenticationError(.noAccount) }
        guard let held = state.withLock({ $0.accounts[name] }) else {
            throw AuthenticationError(directory.hasSignedOut(name) ? .signedOut : .noCredential)
        }
        return try await held.authenticate(request)
    }

    func isRefusal(_ response: URLResponse, to request: URLRequest) -> Bool {
        guard let response = response as? HTTPURLResponse else { return false }
        return authenticator.isRefusal(response, to: request)
    }

    func signedOut(partition: String) {
        let ended = state.withLock { state in
            directory.signOut(partition)
            return state.accounts.removeValue(forKey: partition)
        }
        ended?.end(because: .signedOut)
    }
}

/// What the keys of each account of ``Accounts`` hold, by the name requests give: not generic, and
/// one reference, so that a hit finds its account with one lookup, which takes no lock
/// (``ReadMostly``): accounts sign in and out far less often than requests name them.
final class AccountDirectory: Sendable {
    /// The header that carries `URLRequest.account`: read when a request is keyed, taken off
    /// before it goes out. Spelled as swift-corelibs-foundation stores a header name (each word
    /// capitalised), so that one dictionary lookup finds it on every platform.
    static let header = "X-Cache-Account"
    /// Its length, a literal, so that reading it initialises nothing on a hit (a mismatch with
    /// ``header`` would read no account at all, which every test of ``Accounts`` would show).
    private static let headerLength = 15
    /// Its length's bit (``ASCII/lengthBit(_:)``).
    static var lengthBit: UInt64 { ASCII.lengthBit(ofLength: headerLength) }

    private struct State: Sendable {
        var identities: [String: AccountIdentity] = [:]
        /// The same, while there are few, in an array: a few string comparisons find one at less
        /// cost than hashing its name.
        var few: [(name: String, identity: AccountIdentity)] = []
        /// Accounts signed out since they last signed in.
        var signedOut: Set<String> = []

        @inline(__always)
        func identity(of name: String) -> AccountIdentity? {
            if identities.count > Self.fewest { return identities[name] }
            // Lengths first: two names of different lengths never reach a Unicode comparison.
            let length = name.utf8.count
            // By index: an element bound by `for … in` is a copy, retained and released.
            for index in few.indices where few[index].name.utf8.count == length && few[index].name == name {
                return few[index].identity
            }
            return nil
        }

        /// How many accounts the array holds at most.
        static let fewest = 8

        mutating func set(_ identity: AccountIdentity?, for name: String) {
            identities[name] = identity
            few = identities.count > Self.fewest ? [] : identities.map { ($0.key, $0.value) }
        }
    }

    private let state = ReadMostly(State())

    /// The account `request` names, as its keys hold it: `fields` are its fields, read with the
    /// account's name, `name`.
    /// - Throws: ``AuthenticationError``: ``AuthenticationError/Code/noAccount``,
    ///   ``AuthenticationError/Code/invalidAccount``, ``AuthenticationError/Code/signedOut`` or
    ///   ``AuthenticationError/Code/noCredential``. A request that carries its own `Authorization`
    ///   and names no account is keyed in none.
    @inline(__always)
    func account(of request: URLRequest, fields: RequestFields, named name: String?, keyHeaders: KeyHeaders) throws
        -> AccountIdentity?
    {
        if let name {
            // The app's own credential beside a named account: which of the two would it be?
            if keyHeaders.carriesAuthorization(fields.keyValues) { throw AuthenticationError(.invalidAccount) }
            if let identity = state.read({ state in state.identity(of: name) }) { return identity }
        }
        return try unknownAccount(
            of: request, carriesAuthorization: keyHeaders.carriesAuthorization(fields.keyValues))
    }

    /// Whether the header field `field` is ``header``, spelled as Foundation stores it: its length
    /// compared first, which tells it from almost every other field.
    @inline(__always)
    static func isHeader(_ field: String) -> Bool {
        field.utf8.count == headerLength && field == "X-Cache-Account"
    }

    /// Why `request` has no account to key it with, or nil when it is the app's to authenticate
    /// (it names none and `carriesAuthorization`).
    @inline(never)
    private func unknownAccount(of request: URLRequest, carriesAuthorization: Bool) throws -> AccountIdentity? {
        guard let name = request.value(forHTTPHeaderField: Self.header) else {
            if carriesAuthorization { return nil }
            throw AuthenticationError(.noAccount)
        }
        if let identity = state.read({ $0.identity(of: name) }) { return identity }
        guard Self.isValid(name) else { throw AuthenticationError(.invalidAccount) }
        throw AuthenticationError(hasSignedOut(name) ? .signedOut : .noCredential)
    }

    func signIn(_ account: String, as identity: AccountIdentity) {
        state.write { state in
            state.set(identity, for: account)
            state.signedOut.remove(account)
        }
    }

    func signOut(_ account: String) {
        state.write { state in
            state.set(nil, for: account)
            state.signedOut.insert(account)
        }
    }

    func hasSignedOut(_ account: String) -> Bool {
        state.read { $0.signedOut.contains(account) }
    }

    /// Whether `name` can name an account: not empty, no control character, no comma (two names
    /// given for one request arrive joined by one), no space at either end (a header value loses
    /// it).
    static func isValid(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, let last = name.unicodeScalars.last,
            first != " ", last != " "
        else { return false }
        return !name.unicodeScalars.contains { $0 == "," || $0.properties.generalCategory == .control }
    }
}

extension URLRequest {
    /// The account of ``Accounts`` this request belongs to: it is keyed by it and goes out with
    /// that account's credential. A transport authenticating with ``Accounts`` takes it off the
    /// request before it is sent; without them it is a header like any other.
    ///
    /// ```swift
    /// var request = URLRequest(url: inboxURL)
    /// request.account = "alice"
    /// ```
    public var account: String? {
        get { value(forHTTPHeaderField: AccountDirectory.header) }
        set { setValue(newValue, forHTTPHeaderField: AccountDirectory.header) }
    }
}
