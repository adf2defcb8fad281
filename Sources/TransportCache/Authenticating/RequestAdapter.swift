import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One step of the chain that makes a request the app's own: a header every request carries, a
/// signature, a tenant, a language.
///
/// An adapter is one of two kinds, and the difference is whether it shapes the cache key:
///
/// - **A keyed header** (``header(_:value:)``) gives the value of one header: a language, a
///   tenant, an API version. It is synchronous, runs on every call that takes a request before
///   its key is built, and its header is part of the key. A hit puts the value in the key only;
///   the header is set on the request when one is made to go out or be stored. Prefer it to a
///   keyed adapter for what only sets headers: a hit through it costs about what a plain hit does.
/// - **A keyed adapter** (``keyed(_:)``) is synchronous and runs on every call that takes a
///   request, before its key is built: ``CachedTransport/data(for:)``, the value calls,
///   ``CachedTransport/cachedValue(_:for:decoder:)`` and a query's first frame, invalidation,
///   writes. What it sets is part of the key when it is a key header (`Accept`,
///   `Accept-Language`, `Authorization`, `Cookie` or one of
///   ``CachedTransport/Configuration/Identity/keyHeaders``), and a URL it rewrites is the URL the entry is
///   stored and found under. Use it for what selects a representation: a language, a tenant, an
///   API version in the path. It must be quick: a hit runs it.
/// - **A sending adapter** (``init(_:)``) is asynchronous and runs only on requests that go to
///   the network, after the key is built: a caller's fetch, and every request the transport sends
///   on its own account (a retry, a revalidation, a poll, a resend after a refused credential),
///   so each carries today's headers. A hit never runs it. Use it for what only decorates: a
///   client version, a trace identifier, a signature or an API key in the query. It may change
///   the URL (the entry stays under the URL the app asked for), but not a key header: that would
///   let a request go out as another identity than its key's, so such a request fails with
///   ``AuthenticationError/Code/identityChanged`` and nothing is sent.
///
/// The keyed adapters run first, in their order in ``CachedTransport/Configuration/Identity/requestAdapters``,
/// then the keyed headers in theirs (each sets its header, or takes it off for nil, over what the
/// request carries), then, for a request that goes out, the sending ones in theirs, then the credential
/// (``Credentials`` or ``Accounts``). An adapter that throws fails its call with that error (a
/// synchronous read included; ``CachedTransport/invalidate(_:)-(URLRequest)`` then drops nothing):
/// nothing is sent or stored.
///
/// ```swift
/// var configuration = CachedTransport.Configuration()
/// configuration.identity.requestAdapters = [
///     .header("Accept-Language") { _ in "de" },
///     RequestAdapter { request in
///         var request = request
///         request.setValue("ios/4.2", forHTTPHeaderField: "X-Client")
///         return request
///     },
/// ]
/// ```
public struct RequestAdapter: Sendable {
    typealias Keyed = @Sendable (inout URLRequest) throws -> Void
    typealias Header = @Sendable (URLRequest) throws -> String?
    typealias Sending = nonisolated(nonsending) @Sendable (URLRequest) async throws -> URLRequest

    enum Step: Sendable {
        case keyed(Keyed)
        case header(String, Header)
        case sending(Sending)
    }

    let step: Step

    /// A sending adapter: `adapt`'s request goes to the network in place of the one it is given.
    /// It runs on the caller's executor.
    public init(_ adapt: nonisolated(nonsending) @escaping @Sendable (URLRequest) async throws -> URLRequest) {
        step = .sending(adapt)
    }

    /// A keyed adapter: `adapt` changes the request before its key is built, on every call.
    public static func keyed(_ adapt: @escaping @Sendable (inout URLRequest) throws -> Void) -> RequestAdapter {
        RequestAdapter(step: .keyed(adapt))
    }

    /// A keyed header: `value` gives the value of the header `name` for a request, on every
    /// call, before its key is built; nil takes the header off. `name` joins the key headers
    /// (``CachedTransport/Configuration/Identity/keyHeaders``). It must be quick: a hit runs it.
    ///
    /// ```swift
    /// configuration.identity.requestAdapters = [.header("X-Tenant") { _ in tenant.current }]
    /// ```
    public static func header(_ name: String, value: @escaping @Sendable (URLRequest) throws -> String?)
        -> RequestAdapter
    {
        RequestAdapter(step: .header(name, value))
    }

    private init(step: Step) {
        self.step = step
    }
}
