import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import TransportCache

/// A signed-in account of the loopback origin: its name, which a transport may partition by, and
/// its bearer token.
public struct OriginAccount: Sendable, Equatable {
    /// The account's name.
    public var name: String
    /// Its bearer token.
    public var token: String

    /// The account `name` with `token`.
    public init(name: String, token: String) {
        self.name = name
        self.token = token
    }
}

/// The loopback origin's bearer tokens as an ``Authenticator``: a request carries
/// `Authorization: Bearer <token>` and `X-Account: <name>`; a refresh `POST`s to the origin's
/// `/token` through the transport given to ``use(_:)`` (held weakly, since that transport holds
/// this authenticator), past its adapters and authenticator. It counts its refreshes, per account.
public final class OriginTokens: Authenticator {
    /// Held weakly: the transport holds this authenticator.
    private final class WeakTransport: Sendable {
        weak let transport: CachedTransport?
        init(_ transport: CachedTransport) { self.transport = transport }
    }

    private struct State {
        var tokenURL: @Sendable (String) -> URL
        var transport: WeakTransport?
        /// The refreshes started, per account.
        var started: [String: Int] = [:]
        var ended = 0
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    /// Tokens from `tokenURL` (the origin's `/token`, with any of its parameters).
    public convenience init(tokenURL: URL) {
        self.init(tokenURLOf: { _ in tokenURL })
    }

    /// Tokens of each account from its own `/token` URL, `tokenURLOf(name)`: with several
    /// accounts (``Accounts``), `/token?account=<name>` issues that account's tokens, and a gate
    /// named after it holds its refreshes alone.
    public init(tokenURLOf: @escaping @Sendable (String) -> URL) {
        state = Mutex(State(tokenURL: tokenURLOf))
    }

    /// Refreshes through `transport` from now on.
    public func use(_ transport: CachedTransport) { state.withLock { $0.transport = WeakTransport(transport) } }

    /// Where refreshes ask for a token from now on.
    public func setTokenURL(_ url: URL) { state.withLock { $0.tokenURL = { _ in url } } }

    /// The refreshes started so far.
    public var refreshes: Int { state.withLock { $0.started.values.reduce(0, +) } }

    /// The refreshes of account `name` started so far.
    public func refreshes(of name: String) -> Int { state.withLock { $0.started[name] ?? 0 } }

    /// Suspends until every refresh started so far has returned or thrown: a refresh no caller
    /// waits for any more runs on, and only its end tells that its answer has been dealt with.
    public func waitUntilIdle() async {
        await withCheckedContinuation { continuation in
            let idle = state.withLock { state in
                guard state.started.values.reduce(0, +) > state.ended else { return true }
                state.idleWaiters.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }

    /// Sets `Authorization: Bearer <token>` and `X-Account: <name>`.
    public func apply(_ account: OriginAccount, to request: inout URLRequest) {
        request.setValue("Bearer \(account.token)", forHTTPHeaderField: "Authorization")
        request.setValue(account.name, forHTTPHeaderField: "X-Account")
    }

    /// A new token for `account` from the origin's `/token`.
    public func refresh(_ account: OriginAccount) async throws -> OriginAccount {
        let (url, transport) = state.withLock { state in
            state.started[account.name, default: 0] += 1
            return (state.tokenURL(account.name), state.transport?.transport)
        }
        defer {
            let idle = state.withLock { state in
                state.ended += 1
                guard state.started.values.reduce(0, +) == state.ended else {
                    return [CheckedContinuation<Void, Never>]()
                }
                defer { state.idleWaiters = [] }
                return state.idleWaiters
            }
            for waiter in idle { waiter.resume() }
        }
        guard let transport else { throw URLError(.userAuthenticationRequired) }
        var post = URLRequest(url: url)
        post.httpMethod = "POST"
        let (data, response) = try await transport.data(for: post)
        guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw URLError(.userAuthenticationRequired) }
        return OriginAccount(name: account.name, token: String(decoding: data, as: UTF8.self))
    }

    /// Whether `request` carries `account`'s token.
    public func isRequest(_ request: URLRequest, authenticatedWith account: OriginAccount) -> Bool {
        request.value(forHTTPHeaderField: "Authorization") == "Bearer \(account.token)"
    }
}
