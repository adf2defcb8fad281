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
        /// The credential the latest successful refresh replaced, and the generation it made.
        var refreshedFrom: (credential: Authenticating.Credential, generation: Int)?
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
            let (credential, refresh) = state.withLock { ($0.credential, $0.refresh) }
            if let refresh {
                // Made while a refresh runs: it goes out with the refreshed credential, or fails with it.
                try await Self.wait(for: refresh)
                continue
            }
            // The app's code runs with no lock held.
            var request = request
            if let credential { authenticator.apply(credential, to: &request) }
            return request
        }
    }

    func isRefusal(_ response: URLResponse, to request: URLRequest) -> Bool {
        guard let response = response as? HTTPURLResponse else { return false }
        return authenticator.isRefusal(response, to: request)
    }

    func recover(fromRefusalOf request: URLRequest) async throws -> Bool {
        while true {
            let (credential, generation, running) = state.withLock { ($0.credential, $0.generation, $0.refresh) }
            if let running {
                try await Self.wait(for: running)
                return vouchesForRefresh(of: request)
            }
            guard let credential else { throw AuthenticationError(.noCredential) }
            // Refused with a credential replaced since: sent again with the current one.
            guard authenticator.isRequest(request, authenticatedWith: credential) else {
                return vouchesForRefresh(of: request)
            }
            guard let refresh = try startRefresh(of: credential, refusing: request, ifStill: generation) else {
                continue
            }
            try await Self.wait(for: refresh)
            return vouchesForRefresh(of: request)
        }
    }

    /// Starts the one refresh of `credential`, unless the state moved on since it was read at
    /// `generation` (then nil: read it again).
    private func startRefresh(
        of credential: Authenticating.Credential, refusing request: URLRequest, ifStill generation: Int
    ) throws -> SharedRefresh? {
        try state.withLock { state -> SharedRefresh? in
            guard state.generation == generation, state.refresh == nil else { return nil }
            let now = ContinuousClock.now
            state.refreshStarts.removeAll { now - $0 >= limit.window }
            guard state.refreshStarts.count < limit.maximumRefreshes else {
                throw AuthenticationError(.tooManyRefreshes)
            }
            state.refreshStarts.append(now)
            let refresh = SharedRefresh()
            state.refresh = refresh
            refresh.start { [self] in
                try await self.refreshed(credential, refusing: request, generation: generation, by: refresh)
            }
            return refresh
        }
    }

    /// Whether the current credential is what a refresh made of the one `request` was sent with:
    /// the same account, which a resend may carry whatever its key said of the old credential.
    private func vouchesForRefresh(of request: URLRequest) -> Bool {
        guard
            let (refreshedFrom, generation) = state.withLock({ state in
                state.refreshedFrom.map { ($0.credential, $0.generation == state.generation) }
            }), generation
        else { return false }
        return authenticator.isRequest(request, authenticatedWith: refreshedFrom)
    }

    /// Waits for `refresh`; a cancellation that is not the caller's own (the refresh was left by
    /// every other waiter a moment before this one arrived) is read as "ask again".
    private static func wait(for refresh: SharedRefresh) async throws {
        do {
            try await refresh.wait()
        } catch is CancellationError where !Task.isCancelled {
            return
        }
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
        let unchanged = (try? result.get()).map { authenticator.isRequest(request, authenticatedWith: $0) } ?? false
        try state.withLock { state in
            if state.refresh === refresh { state.refresh = nil }
            switch result {
            case .failure(let error as CancellationError): throw error
            case .failure(let error): throw AuthenticationError(.refreshFailed, underlyingError: error)
            case .success(let refreshed):
                if unchanged { throw AuthenticationError(.credentialUnchanged) }
                if state.generation == generation {
                    state.credential = refreshed
                    state.generation += 1
                    state.refreshedFrom = (credential, state.generation)
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
    /// - Returns: whether that credential is what a refresh made of `request`'s: then a resend
    ///   may carry it even where the key holds the old credential (the same account). A
    ///   credential the app set instead may be another account's.
    /// - Throws: ``AuthenticationError`` when there is none to be had; `CancellationError`.
    func recover(fromRefusalOf request: URLRequest) async throws -> Bool
}
