import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the transport needs to know of the app's credentials: how to put one on a request, how to
/// get a new one, and how to tell that the origin refused one.
///
/// Give it to the transport inside ``Credentials``, which holds the current credential and makes
/// every refresh one shared refresh (see
/// ``CachedTransport/Configuration/Identity/authenticate(with:)-(Credentials<Authenticating>)``), or
/// inside ``Accounts``, which does so for each of several accounts signed in at once.
public protocol Authenticator: Sendable {
    /// What proves who the app is: a token, a token pair with its expiry.
    associatedtype Credential: Sendable

    /// Puts `credential` on `request`, usually as its `Authorization` header.
    func apply(_ credential: Credential, to request: inout URLRequest)

    /// A new credential in place of `credential`, which the origin refused.
    ///
    /// The transport runs one refresh of an account's credential at a time, whatever the number of
    /// refused requests, and never cancels it: once called, it runs to its end. A request made
    /// through the transport from here goes past the adapters and the authenticator, so the
    /// refresh never waits for itself; hold that transport weakly, since it holds its
    /// authenticator. Throw to fail every request that waits for the refresh.
    func refresh(_ credential: Credential) async throws -> Credential

    /// Whether `response` to `request` says its credential was refused. The default: status 401.
    func isRefusal(_ response: HTTPURLResponse, to request: URLRequest) -> Bool

    /// Whether `request` was sent with `credential`: a refresh that gives back the credential the
    /// origin just refused fails with ``AuthenticationError/Code/credentialUnchanged`` instead of
    /// sending the same request again. (Which credential a refused request carried, and so
    /// whether a newer one is current, the transport tracks itself.)
    func isRequest(_ request: URLRequest, authenticatedWith credential: Credential) -> Bool
}

extension Authenticator {
    /// Status 401 (Unauthorized) refuses the credential.
    public func isRefusal(_ response: HTTPURLResponse, to request: URLRequest) -> Bool {
        response.statusCode == 401
    }
}

/// How many refreshes of one account's credential ``Credentials`` or ``Accounts`` makes within a
/// window before it stops: a credential that every refresh brings back refused ends in
/// ``AuthenticationError/Code/tooManyRefreshes`` instead of a loop.
public struct RefreshLimit: Sendable, Hashable {
    /// The most refreshes started within ``window``. At least 1.
    public var maximumRefreshes: Int
    /// How far back refreshes count.
    public var window: Duration

    /// At most `maximumRefreshes` refreshes within `window`; by default 3 within 30 seconds.
    public init(maximumRefreshes: Int = 3, window: Duration = .seconds(30)) {
        self.maximumRefreshes = max(1, maximumRefreshes)
        self.window = window
    }
}
