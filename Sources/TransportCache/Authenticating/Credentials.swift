import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The app's current credential and its one shared refresh.
///
/// Give it to the transport with ``CachedTransport/Configuration/authenticate(with:)``. Every
/// request then goes out with the current credential, applied before its key is built. When the
/// origin refuses one (``Authenticator/isRefusal(_:to:)``):
/// - if it was sent with the current credential, one refresh starts, which every other refused
///   request, and every request made meanwhile, waits for; each is then sent once more with the
///   new credential (the callers of one shared fetch share its resend);
/// - if the credential has been replaced since, it is sent again with the current one, without
///   a refresh;
/// - a refresh that throws fails every request waiting for it with
///   ``AuthenticationError/Code/refreshFailed``, and the next refused request may try again;
/// - more than ``RefreshLimit/maximumRefreshes`` within the window fail with
///   ``AuthenticationError/Code/tooManyRefreshes``;
/// - a refresh every waiting request has left is cancelled.
///
/// Set ``credential`` when the user signs in or out; a refresh under way then no longer replaces it.
public final class Credentials<Authenticating: Authenticator>: Sendable {
    private struct State: Sendable {
        var credential: Authenticating.Credential?
        /// Counts the credentials set by the app, so that a refresh begun before one does not
        /// replace it.
        var generation = 0
        var refresh: SharedRefresh?
        var refreshStarts: [ContinuousClock.Instant] = []
    }

    let authenticator: Authenticating
    let limit: RefreshLimit
    private let state: Locked<State>

    /// Credentials that `authenticator` applies and refreshes, starting from `credential` (nil
    /// while signed out: requests then go out without one).
    public init(
        _ authenticator: Authenticating, credential: Authenticating.Credential?, limit: RefreshLimit = RefreshLimit()
    ) {
        self.authenticator = authenticator
        self.limit = limit
        state = Locked(State(credential: credential))
    }

    /// The credential requests go out with. Setting it (sign-in, sign-out, a credential the app
    /// refreshed itself) applies to every request from then on.
    public var credential: Authenticating.Credential? {
        get { state.withLock { $0.credential } }
        set {
            state.withLock { state in
                state.credential = newValue
                state.generation += 1
            }
        }
    }
}

extension Credentials: CredentialApplying {
    nonisolated(nonsending) func authenticate(_ request: URLRequest) async throws -> URLRequest {
        while true {
            let next = state.withLock { state -> (URLRequest?, SharedRefresh?) in
                if let refresh = state.refresh { return (nil, refresh) }
                var request = request
                if let credential = state.credential { authenticator.apply(credential, to: &request) }
                return (request, nil)
            }
            if let request = next.0 { return request }
            // Made while a refresh runs: it goes out with the refreshed credential, or fails with it.
            try await next.1?.wait()
        }
    }

    func isRefusal(_ response: URLResponse, to request: URLRequest) -> Bool {
        guard let response = response as? HTTPURLResponse else { return false }
        return authenticator.isRefusal(response, to: request)
    }

    func recover(fromRefusalOf request: URLRequest) async throws {
        let refresh = try state.withLock { state -> SharedRefresh? in
            if let refresh = state.refresh { return refresh }
            guard let credential = state.credential else { throw AuthenticationError(.noCredential) }
            // Refused with a credential replaced since: sent again with the current one.
            guard authenticator.isRequest(request, authenticatedWith: credential) else { return nil }
            let now = ContinuousClock.now
            state.refreshStarts.removeAll { now - $0 >= limit.window }
            guard state.refreshStarts.count < limit.maximumRefreshes else {
                throw AuthenticationError(.tooManyRefreshes)
            }
            state.refreshStarts.append(now)
            let refresh = SharedRefresh()
            state.refresh = refresh
            refresh.start { [self, generation = state.generation] in
                try await self.refreshed(credential, refusing: request, generation: generation, by: refresh)
            }
            return refresh
        }
        try await refresh?.wait()
    }

    /// Runs the authenticator's refresh of `credential`, outside the transport's chain, and makes
    /// its answer the current credential unless the app set one meanwhile.
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
        try state.withLock { state in
            if state.refresh === refresh { state.refresh = nil }
            switch result {
            case .failure(let error as CancellationError): throw error
            case .failure(let error): throw AuthenticationError(.refreshFailed, underlyingError: error)
            case .success(let refreshed):
                if authenticator.isRequest(request, authenticatedWith: refreshed) {
                    throw AuthenticationError(.credentialUnchanged)
                }
                if state.generation == generation {
                    state.credential = refreshed
                    state.generation += 1
                }
            }
        }
    }
}

/// The type-erased view of ``Credentials`` the transport holds.
protocol CredentialApplying: Sendable {
    /// `request` with the current credential on it, once any refresh under way has ended.
    nonisolated(nonsending) func authenticate(_ request: URLRequest) async throws -> URLRequest
    /// Whether `response` to `request` refuses its credential.
    func isRefusal(_ response: URLResponse, to request: URLRequest) -> Bool
    /// Returns once a credential other than the one `request` was refused with is current:
    /// at once when it was already replaced, else after the one shared refresh.
    /// - Throws: ``AuthenticationError`` when there is none to be had; `CancellationError`.
    func recover(fromRefusalOf request: URLRequest) async throws
}
