import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one boundary every request crosses: what makes it the app's own, in two steps.
///
/// - ``keyed(_:)``, synchronous, shapes the key: the keyed adapters, and the account of the
///   current credential. Every public call that takes a request or makes a key begins here, the
///   synchronous reads included, so every call finds the same entry for the same request.
/// - ``outgoing(_:keyedFor:)`` only decorates what goes to the network: the sending adapters, then
///   the current credential (once a refresh under way has ended). Every request sent runs it, a
///   caller's and those the transport sends on its own account, but for a refresh's own, and it
///   refuses to send one with another account's credential than the one it was made for.
///
/// A hit crosses only the first step: it never waits for a refresh or runs app code that
/// suspends.
final class RequestPreparation: Sendable {
    let keyedAdapters: [RequestAdapter.Keyed]
    /// The keyed headers (``RequestAdapter/header(_:value:)``), in their order.
    let headerAdapters: [HeaderAdapter]
    /// The first of them, read apart: most apps have one.
    private let firstHeader: HeaderAdapter?
    let sendingAdapters: [RequestAdapter.Sending]
    let credentials: (any CredentialApplying)?
    /// Where the credentials find a request's account, read by every call.
    private let accountSource: AccountSource?
    /// The account of one current credential (``Credentials``), read by every call: held apart
    /// from ``accountSource`` so that a hit reads one reference and switches on nothing.
    private let keyAccount: KeyAccount?
    /// The accounts requests name (``Accounts``), held apart for the same reason.
    private let directory: AccountDirectory?
    private let keyHeaders: KeyHeaders
    /// The keyed headers' values made last (``KeyedHeaders/Recent``).
    private let recentHeaders = KeyedHeaders.Recent(nil)
    /// Whether a request that goes out needs the second step.
    let decoratesOutgoing: Bool

    /// Set while a credential is refreshed: the refresh's own requests go past the adapters and
    /// the authenticator, so that the refresh never waits for itself. Read through
    /// ``isInsideRefresh``; set through ``refreshing(_:)``.
    @TaskLocal private static var isRefreshing = false

    /// Whether the current task runs a credential's refresh (``refreshing(_:)``). The task-local
    /// is read only while some refresh runs (``RefreshGate``): a request otherwise pays one load.
    @inline(__always)
    static var isInsideRefresh: Bool { RefreshGate.mayBeRunning && isRefreshing }

    /// Runs `refresh`, a credential's refresh, so that the requests it makes go past the chain.
    static func refreshing<Result>(_ refresh: () async throws -> Result) async rethrows -> Result {
        RefreshGate.enter()
        defer { RefreshGate.leave() }
        return try await $isRefreshing.withValue(true) { try await refresh() }
    }

    /// Runs `body` outside any refresh, whatever the task inherited: for work a refresh's request
    /// happened to launch on behalf of others.
    static func outsideRefresh<Result>(_ body: () async throws -> Result) async rethrows -> Result {
        try await $isRefreshing.withValue(false) { try await body() }
    }

    /// The preparation `configuration` asks for; nil when it has neither adapters nor credentials,
    /// so that a request then pays one comparison for this.
    init?(_ configuration: CachedTransport.Configuration, keyHeaders: KeyHeaders) {
        guard !configuration.identity.requestAdapters.isEmpty || configuration.identity.credentials != nil else {
            return nil
        }
        var keyedAdapters: [RequestAdapter.Keyed] = []
        var headerAdapters: [HeaderAdapter] = []
        var sendingAdapters: [RequestAdapter.Sending] = []
        for adapter in configuration.identity.requestAdapters {
            switch adapter.step {
            case .keyed(let adapt): keyedAdapters.append(adapt)
            case .header(let name, let value):
                headerAdapters.append(HeaderAdapter(name: name, value: value, keyHeaders: keyHeaders))
            case .sending(let adapt): sendingAdapters.append(adapt)
            }
        }
        self.keyedAdapters = keyedAdapters
        self.headerAdapters = headerAdapters
        firstHeader = headerAdapters.first
        self.sendingAdapters = sendingAdapters
        credentials = configuration.identity.credentials
        accountSource = configuration.identity.credentials?.accountSource
        if case .current(let keyAccount) = accountSource { self.keyAccount = keyAccount } else { keyAccount = nil }
        if case .named(let directory) = accountSource { self.directory = directory } else { directory = nil }
        self.keyHeaders = keyHeaders
        decoratesOutgoing = !sendingAdapters.isEmpty || credentials != nil
    }

    /// `request` as every call keys it: after the keyed adapters, with the account of the current
    /// credential (see ``Credentials``). A request that carries its own `Authorization` is the
    /// app's to authenticate: it is keyed by that header, in no account. A request made by a
    /// refresh is keyed as it is, in no account: it never shares a key or a fetch with the requests
    /// that wait for that refresh.
    /// - Throws: an adapter's error; ``AuthenticationError/Code/partitionUnavailable``.
    func keyed(_ request: URLRequest) throws -> KeyedRequest {
        let key = try keyedLazily(request).key
        return KeyedRequest(request: key.adapted ?? request, account: key.account, headers: key.headers).materialized
    }

    /// The fields of `request` (``fields(of:accountName:)``) and how it is keyed with them
    /// (``keyedLazily(_:fields:accountName:)``), each read once.
    @inline(__always)
    func keyedLazily(_ request: URLRequest) throws -> (fields: RequestFields, key: LazyKey) {
        var accountName: String?
        var fields = fields(of: request, accountName: &accountName)
        let key = try keyedLazily(request, fields: &fields, accountName: accountName)
        return (fields, key)
    }

    /// The fields of `request` as ``keyedLazily(_:fields:accountName:)`` reads them, and the
    /// account it names, where each request names its own (``Accounts``).
    @inline(__always)
    func fields(of request: URLRequest, accountName: inout String?) -> RequestFields {
        RequestFields(
            request.allHTTPHeaderFields, keyHeaders: keyHeaders, readsAccount: readsAccount, accountName: &accountName)
    }

    /// Whether each request names its account (``Accounts``), read with its fields.
    var readsAccount: Bool { directory != nil }

    /// How ``keyed(_:)`` keys `request`, whose fields are `fields` and which names the account
    /// `accountName` (``fields(of:accountName:)``), but for the
    /// keyed headers, whose values are carried beside it (``LazyKey/headers``) rather than set on
    /// it: a hit puts them in the key only, and a request that is kept or sent is made with them
    /// (``KeyedRequest/materialized``). The request is not copied unless a keyed adapter changes
    /// it (``LazyKey/adapted``); then its fields are read again into `fields`.
    @inline(__always)
    func keyedLazily(_ request: URLRequest, fields: inout RequestFields, accountName: String?) throws -> LazyKey {
        if Self.isInsideRefresh { return LazyKey(adapted: nil, account: nil, headers: nil) }
        guard keyedAdapters.isEmpty else { return try keyed(adapting: request, fields: &fields) }
        let account: AccountIdentity?
        if let keyAccount {
            account = try self.account(of: request, fields: fields, in: keyAccount)
        } else if directory != nil {
            // Called through the optional, not bound: a binding retained the directory for the call.
            account = try directory?.account(of: request, fields: fields, named: accountName, keyHeaders: keyHeaders)
        } else {
            account = nil
        }
        // Tested here as well as in `headers(of:for:)`: a hit without keyed headers then passes its
        // account on without retaining it for the call.
        guard firstHeader != nil else { return LazyKey(adapted: nil, account: account, headers: nil) }
        return LazyKey(adapted: nil, account: account, headers: try headers(of: request, for: account))
    }

    /// `request` keyed for `account`, the one a call began with, whatever is current now: what an
    /// optimistic update's confirmed answers are stored under. A request that names its account
    /// (``Accounts``) is keyed for the one it names.
    func keyed(_ request: URLRequest, for account: AccountIdentity?) throws -> KeyedRequest {
        if Self.isInsideRefresh { return KeyedRequest(request: request, account: nil) }
        if case .named = accountSource { return try keyed(request) }
        var request = request
        for adapt in keyedAdapters { try adapt(&request) }
        return KeyedRequest(request: request, account: account, headers: try headers(of: request, for: account))
            .materialized
    }

    /// The account of the current credential, as ``keyed(_:)`` reads it; nil when each request
    /// names its own (``Accounts``).
    var currentAccount: AccountIdentity? {
        get throws {
            guard case .current(let keyAccount) = accountSource else { return nil }
            return try keyAccount.current()
        }
    }

    @inline(never)
    private func keyed(adapting request: URLRequest, fields: inout RequestFields) throws -> LazyKey {
        var request = request
        for adapt in keyedAdapters { try adapt(&request) }
        var accountName: String?
        fields = self.fields(of: request, accountName: &accountName)
        let owner = try accountSource.flatMap { try account(of: request, fields: fields, named: accountName, in: $0) }
        return LazyKey(adapted: request, account: owner, headers: try headers(of: request, for: owner))
    }

    /// The values the keyed headers give `request`, for `account`; nil without keyed headers.
    /// The same values for the same account as the last request's are that request's.
    @inline(__always)
    private func headers(of request: URLRequest, for account: AccountIdentity?) throws -> KeyedHeaders? {
        guard firstHeader != nil else { return nil }
        // Called through the optional, not bound: a binding retained the adapter for the call.
        let first = try firstHeader?.value(of: request) ?? nil
        guard headerAdapters.count == 1 else { return try headers(first, of: request, for: account) }
        if let recent = recentHeaders.read({ $0 }), recent.first == first, recent.account === account,
            recent.others.isEmpty
        {
            return recent
        }
        return madeHeaders(first, [], for: account)
    }

    /// ``headers(of:for:)`` with more than one keyed header, the first of which gave `first`.
    @inline(never)
    private func headers(_ first: String?, of request: URLRequest, for account: AccountIdentity?) throws
        -> KeyedHeaders
    {
        var others: [String?] = []
        for adapter in headerAdapters.dropFirst() { others.append(try adapter.value(of: request)) }
        if let recent = recentHeaders.read({ $0 }), recent.first == first, recent.account === account,
            recent.others == others
        {
            return recent
        }
        return madeHeaders(first, others, for: account)
    }

    @inline(never)
    private func madeHeaders(_ first: String?, _ others: [String?], for account: AccountIdentity?) -> KeyedHeaders {
        let headers = KeyedHeaders(
            adapters: headerAdapters, first: first, others: others, account: account, keyHeaders: keyHeaders)
        recentHeaders.write { $0 = headers }
        return headers
    }

    /// The account of `request`, whose fields are `fields`: the current credential's, or the one
    /// it names. A request with its own `Authorization` keeps the current credential's account out
    /// of its key: the key builder leaves it out (``KeyHeaders/identity(values:account:headers:)``),
    /// as it reads that header anyway, rather than a second read of it on every hit; and it is
    /// keyed even when the partition cannot be read.
    @inline(__always)
    private func account(
        of request: URLRequest, fields: RequestFields, named accountName: String?, in source: AccountSource
    ) throws -> AccountIdentity? {
        switch source {
        case .current(let keyAccount): return try account(of: request, fields: fields, in: keyAccount)
        case .named(let directory):
            return try directory.account(of: request, fields: fields, named: accountName, keyHeaders: keyHeaders)
        }
    }

    /// The current credential's account for `request`, as ``account(of:fields:named:in:)`` reads it.
    @inline(__always)
    private func account(of request: URLRequest, fields: RequestFields, in keyAccount: KeyAccount) throws
        -> AccountIdentity?
    {
        do {
            return try keyAccount.current()
        } catch  where keyHeaders.carriesAuthorization(fields.keyValues) {
            return nil
        }
    }

    /// `request`, as ``keyed(_:)`` made it, as it goes to the network: after the sending adapters,
    /// with the current credential. Runs on the caller's executor.
    /// - Parameter account: the account marker its key holds (nil for none): it goes out with
    ///   that account's credential only.
    /// - Throws: ``AuthenticationError/Code/identityChanged`` when a sending adapter changed a key
    ///   header, or the current credential is another account's than the key's; why the account
    ///   cannot send (signed out, no credential); an adapter's or the refresh's error.
    nonisolated(nonsending) func outgoing(_ request: URLRequest, keyedFor account: String?) async throws -> Outgoing {
        if Self.isInsideRefresh { return Outgoing(request: request, stamp: nil) }
        var sent = request
        for adapt in sendingAdapters { sent = try await adapt(sent) }
        let keyValues = keyHeaders.values(in: request.allHTTPHeaderFields)
        if !sendingAdapters.isEmpty, keyHeaders.values(in: sent.allHTTPHeaderFields) != keyValues {
            throw AuthenticationError(.identityChanged)
        }
        guard let credentials else { return Outgoing(request: sent, stamp: nil) }
        // The app put a credential on it itself: it goes out as it is.
        let carriesOwnCredential = keyHeaders.carriesAuthorization(keyValues)
        if case .named = accountSource {
            // The account's name is the transport's to read, not the origin's.
            if sent.value(forHTTPHeaderField: AccountDirectory.header) != nil {
                if carriesOwnCredential { throw AuthenticationError(.invalidAccount) }
                sent.setValue(nil, forHTTPHeaderField: AccountDirectory.header)
            }
        }
        if carriesOwnCredential { return Outgoing(request: sent, stamp: nil) }
        let authenticated = try await credentials.authenticate(sent, keyedFor: account)
        return Outgoing(request: authenticated.request, stamp: authenticated.stamp)
    }
}

/// How a request is keyed (``RequestPreparation/keyedLazily(_:fields:accountName:)``), held beside the request
/// rather than with a copy of it: a hit copies no request.
struct LazyKey {
    /// The request a keyed adapter made of it; nil when no keyed adapter ran.
    let adapted: URLRequest?
    let account: AccountIdentity?
    /// The values of the keyed headers, not yet set on the request; nil without keyed headers.
    let headers: KeyedHeaders?
}

/// A request as every call keys it (``RequestPreparation/keyed(_:)``), with the account its key
/// holds.
struct KeyedRequest {
    var request: URLRequest
    var account: AccountIdentity?
    /// The values of the keyed headers, not yet set on ``request`` (``LazyKey/headers``); nil once
    /// set, or without keyed headers.
    var headers: KeyedHeaders?

    init(request: URLRequest, account: AccountIdentity?, headers: KeyedHeaders? = nil) {
        self.request = request
        self.account = account
        self.headers = headers
    }

    /// The same, with the keyed headers set on its request.
    var materialized: KeyedRequest {
        guard let headers else { return self }
        return KeyedRequest(request: headers.applied(to: request), account: account)
    }
}

/// One keyed header (``RequestAdapter/header(_:value:)``): its name, its place among the key
/// headers, and what gives its value.
final class HeaderAdapter: Sendable {
    let name: String
    /// Its place in ``KeyHeaders/names``.
    let position: Int
    let value: RequestAdapter.Header

    /// The value `request` is given. Out of line, where the adapter is borrowed, the closure's
    /// context is not retained and released around the call.
    @inline(never)
    func value(of request: URLRequest) throws -> String? {
        try value(request)
    }

    init(name: String, value: @escaping RequestAdapter.Header, keyHeaders: KeyHeaders) {
        self.name = name
        self.value = value
        // Present: the transport makes every keyed header's name a key header.
        position = keyHeaders.names.firstIndex(of: name.lowercased()) ?? 0
    }
}

/// The values the keyed headers gave one request, for one account, carried beside it until it is
/// kept or sent; immutable, so that the same values for the same account are made once and shared
/// (``KeyedHeaders/Recent``), and a hit through a keyed header copies one reference.
final class KeyedHeaders: Sendable {
    let adapters: [HeaderAdapter]
    let first: String?
    let others: [String?]
    /// The account they were made for.
    let account: AccountIdentity?
    /// The identity of a request with no key header of its own keyed with them, for ``account``:
    /// made once, as ``KeyHeaders/identity(values:account:headers:)`` would make it on every hit.
    let alone: KeyIdentity

    init(
        adapters: [HeaderAdapter], first: String?, others: [String?], account: AccountIdentity?, keyHeaders: KeyHeaders
    ) {
        self.adapters = adapters
        self.first = first
        self.others = others
        self.account = account
        alone = keyHeaders.identity(values: [], account: account, settingEach: adapters, first: first, others: others)
    }

    /// Calls `body` with each keyed header and its value.
    @inline(__always)
    func forEachValue(_ body: (HeaderAdapter, String?) -> Void) {
        body(adapters[0], first)
        for (index, value) in others.enumerated() { body(adapters[index + 1], value) }
    }

    /// `request` with each keyed header set to its value (taken off for nil).
    func applied(to request: URLRequest) -> URLRequest {
        var request = request
        forEachValue { adapter, value in request.setValue(value, forHTTPHeaderField: adapter.name) }
        return request
    }

    /// The values made last, reused while the keyed headers give the same for the same account:
    /// a hit then builds and normalises no identity, and reads them as ``ReadMostly`` reads (on
    /// Linux without a lock). A hit whose values or account differ from the last writes, as it
    /// builds new values anyway: where several accounts alternate, each such hit does, and a
    /// replaced copy is freed at the next write that finds no read under way.
    typealias Recent = ReadMostly<KeyedHeaders?>
}

/// A request as it goes out (``RequestPreparation/outgoing(_:keyedFor:)``).
struct Outgoing {
    let request: URLRequest
    /// Which credential it carries, of which account; nil for none of the authenticator's.
    let stamp: CredentialStamp?
}
