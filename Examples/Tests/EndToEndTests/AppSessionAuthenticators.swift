import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Synchronization
import TransportCache

/// The loopback origin's bearer tokens, refreshed as an app refreshes them: a `POST` to the
/// origin's `/token` awaited with the app's own URLSession's async API, not through the transport.
/// The transport runs this refresh in a task of its own, so how that task ends is the transport's
/// doing: the point of the tests that use it.
final class SessionTokens: Authenticator {
    private let session: URLSession
    private let tokenURLOf: @Sendable (String) -> URL
    private let counts = Mutex((started: 0, ended: 0, idleWaiters: [CheckedContinuation<Void, Never>]()))

    /// Tokens from `tokenURL` (the origin's `/token`, with any of its parameters), fetched with
    /// `session`.
    convenience init(session: URLSession, tokenURL: URL) {
        self.init(session: session, tokenURLOf: { _ in tokenURL })
    }

    /// Tokens of each account from its own URL, `tokenURLOf(name)` (the origin's
    /// `/token?account=<name>` issues that account's tokens), fetched with `session`.
    init(session: URLSession, tokenURLOf: @escaping @Sendable (String) -> URL) {
        self.session = session
        self.tokenURLOf = tokenURLOf
    }

    /// The refreshes started so far.
    var refreshes: Int { counts.withLock { $0.started } }

    /// Suspends until every refresh started so far has returned or thrown: the transport may run
    /// one that no caller waits for any more, and only its end tells.
    func waitUntilIdle() async {
        await withCheckedContinuation { continuation in
            let idle = counts.withLock { counts in
                guard counts.started > counts.ended else { return true }
                counts.idleWaiters.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }

    func apply(_ account: OriginAccount, to request: inout URLRequest) {
        request.setValue("Bearer \(account.token)", forHTTPHeaderField: "Authorization")
        request.setValue(account.name, forHTTPHeaderField: "X-Account")
    }

    func refresh(_ account: OriginAccount) async throws -> OriginAccount {
        counts.withLock { $0.started += 1 }
        defer {
            let idle = counts.withLock { counts in
                counts.ended += 1
                guard counts.started == counts.ended else { return [CheckedContinuation<Void, Never>]() }
                defer { counts.idleWaiters = [] }
                return counts.idleWaiters
            }
            for waiter in idle { waiter.resume() }
        }
        var post = URLRequest(url: tokenURLOf(account.name))
        post.httpMethod = "POST"
        let (data, response) = try await session.data(for: post)
        guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw URLError(.userAuthenticationRequired) }
        return OriginAccount(name: account.name, token: String(decoding: data, as: UTF8.self))
    }

    func isRequest(_ request: URLRequest, authenticatedWith account: OriginAccount) -> Bool {
        request.value(forHTTPHeaderField: "Authorization") == "Bearer \(account.token)"
    }
}

/// An OAuth grant as an app keeps it: the account it signs in, its access token and the refresh
/// token that the next refresh presents.
struct Grant: Sendable, Equatable {
    var account: String
    var accessToken: String
    var refreshToken: String
}

/// An authorization server that rotates refresh tokens (the loopback origin's `/token?rotate=1`),
/// refreshed as an app refreshes it: the grant's refresh token presented in a form `POST`,
/// awaited with the app's own URLSession's async API, and the answer's JSON decoded into the next
/// grant. A refused refresh throws, so the callers waiting for it fail with
/// ``AuthenticationError/Code/refreshFailed``.
final class RotatingTokens: Authenticator {
    /// The authorization server refused the refresh, with this status and body.
    struct Refused: Error {
        let status: Int
        let body: String
    }

    private struct TokenAnswer: Decodable {
        let accessToken: String
        let refreshToken: String
    }

    private let session: URLSession
    private let tokenURL: URL
    private let started = Atomic(0)
    /// Yields once for each refresh that returned or threw.
    let endedRefreshes: AsyncStream<Void>
    private let ended: AsyncStream<Void>.Continuation

    /// Refreshes at `tokenURL` (the origin's `/token?rotate=1`, with any other of its parameters),
    /// fetched with `session`.
    init(session: URLSession, tokenURL: URL) {
        self.session = session
        self.tokenURL = tokenURL
        (endedRefreshes, ended) = AsyncStream.makeStream()
    }

    /// The refreshes started so far.
    var refreshes: Int { started.load(ordering: .relaxed) }

    func apply(_ grant: Grant, to request: inout URLRequest) {
        request.setValue("Bearer \(grant.accessToken)", forHTTPHeaderField: "Authorization")
    }

    func refresh(_ grant: Grant) async throws -> Grant {
        started.add(1, ordering: .relaxed)
        defer { ended.yield() }
        var post = URLRequest(url: tokenURL)
        post.httpMethod = "POST"
        post.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        post.httpBody = Data("grant_type=refresh_token&refresh_token=\(grant.refreshToken)".utf8)
        let (data, response) = try await session.data(for: post)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard status == 200 else { throw Refused(status: status, body: String(decoding: data, as: UTF8.self)) }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let answer = try decoder.decode(TokenAnswer.self, from: data)
        return Grant(account: grant.account, accessToken: answer.accessToken, refreshToken: answer.refreshToken)
    }

    func isRequest(_ request: URLRequest, authenticatedWith grant: Grant) -> Bool {
        request.value(forHTTPHeaderField: "Authorization") == "Bearer \(grant.accessToken)"
    }
}

/// How a call through the transport ended, in a form a test can compare, count and print.
enum CallEnd: Sendable, Equatable, CustomStringConvertible {
    case answered(status: Int, body: String)
    case cancelled
    case authentication(AuthenticationError.Code)
    case urlError(URLError.Code)
    /// An error a caller could not act on: neither cancellation, nor authentication, nor the network.
    case unexpected(String)

    /// How `call` ended.
    init(of call: () async throws -> (Data, URLResponse)) async {
        do {
            let (data, response) = try await call()
            self = .answered(status: (response as? HTTPURLResponse)?.statusCode ?? 0, body: data.text)
        } catch is CancellationError {
            self = .cancelled
        } catch let error as AuthenticationError {
            self = .authentication(error.code)
        } catch let error as URLError {
            self = .urlError(error.code)
        } catch {
            self = .unexpected("\(type(of: error)): \(error)")
        }
    }

    /// The body of a `200`, else nil.
    var answer: String? {
        guard case .answered(200, let body) = self else { return nil }
        return body
    }

    var description: String {
        switch self {
        case .answered(let status, let body): "answered \(status): \(body)"
        case .cancelled: "cancelled"
        case .authentication(let code): "authentication error \(code)"
        case .urlError(let code): "URL error \(code.rawValue)"
        case .unexpected(let description): "unexpected \(description)"
        }
    }
}
