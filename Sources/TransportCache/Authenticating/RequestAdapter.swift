import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One step of the chain that makes a request the app's own before the transport keys and sends
/// it: a header every request carries, a signature, a tenant.
///
/// The transport runs ``CachedTransport/Configuration/requestAdapters`` in order on every request
/// before its key is built, so a header an adapter adds takes part in the key when it is a key
/// header (`Authorization`, `Cookie`, `Accept`, `Accept-Language` or one of
/// ``CachedTransport/Configuration/keyHeaders``): identities stay apart. It runs them again before
/// every request the transport sends on its own account (a retry, a revalidation, a poll, a
/// background revalidation, a resend after a refused credential), so such a request carries
/// today's headers, not those of the request that first fetched the entry.
///
/// An adapter that throws fails its request with that error: nothing is sent or stored.
///
/// ```swift
/// var configuration = CachedTransport.Configuration()
/// configuration.requestAdapters = [
///     RequestAdapter { request in
///         var request = request
///         request.setValue("ios/4.2", forHTTPHeaderField: "X-Client")
///         return request
///     }
/// ]
/// ```
public struct RequestAdapter: Sendable {
    let adapt: nonisolated(nonsending) @Sendable (URLRequest) async throws -> URLRequest

    /// An adapter that returns `adapt`'s request in place of the one it is given. It runs on the
    /// caller's executor, as the rest of a request the transport answers from memory does.
    public init(_ adapt: nonisolated(nonsending) @escaping @Sendable (URLRequest) async throws -> URLRequest) {
        self.adapt = adapt
    }
}
