import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What makes a request the app's own before it is keyed and sent: the adapters in order, then
/// the current credential. The one place both are run, for the callers' requests and for those
/// the transport sends on its own account.
final class RequestPreparation: Sendable {
    let adapters: [RequestAdapter]
    let credentials: (any CredentialApplying)?

    /// Set while a credential is refreshed: the refresh's own requests go past the adapters and
    /// the authenticator, so that the refresh never waits for itself.
    @TaskLocal static var isRefreshing = false

    /// The preparation `configuration` asks for; nil when it has neither adapters nor credentials,
    /// so that a request then pays one comparison for this.
    init?(_ configuration: CachedTransport.Configuration) {
        guard !configuration.requestAdapters.isEmpty || configuration.credentials != nil else { return nil }
        adapters = configuration.requestAdapters
        credentials = configuration.credentials
    }

    /// `request` after the adapters, with the current credential on it (once a refresh under way
    /// has ended). A request made by a refresh is returned as it is. Runs on the caller's
    /// executor: a request that waits for no refresh is prepared without leaving it.
    nonisolated(nonsending) func prepare(_ request: URLRequest) async throws -> URLRequest {
        if Self.isRefreshing { return request }
        var request = request
        for adapter in adapters { request = try await adapter.adapt(request) }
        if let credentials { request = try await credentials.authenticate(request) }
        return request
    }
}
