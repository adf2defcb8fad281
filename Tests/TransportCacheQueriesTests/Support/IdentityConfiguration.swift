import Foundation
import Testing
import TransportCache
import TransportCacheTesting
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The identity configurations a screen's plain request (a URL, no `Authorization`) meets, as the
/// transport's own tests name them: each keys the request its own way, and a query must read the
/// entry its request's answer was stored under.
enum IdentityConfiguration: String, CaseIterable, CustomTestStringConvertible, Sendable {
    /// `accounts`: several accounts signed in at once, "me" (`me-1`) and "you" (`you-1`); the
    /// screen's requests name "me" (see ``request(_:)``).
    case none, adapter, authenticator, partitions, accounts

    var testDescription: String { rawValue }

    /// A transport in front of `origin` in this configuration, signed in as `me-1`, with the rest
    /// of its configuration as `configure` leaves it.
    func transport(
        _ origin: ScriptedOrigin, configure: (inout CachedTransport.Configuration) -> Void = { _ in }
    ) -> CachedTransport {
        makeTransport(origin) { configuration in
            configure(&configuration)
            switch self {
            case .none:
                break
            case .adapter:
                configuration.identity.requestAdapters = [
                    .keyed { $0.setValue("de", forHTTPHeaderField: "Accept-Language") },
                    RequestAdapter { request in
                        var request = request
                        request.setValue("4.2", forHTTPHeaderField: "X-App-Version")
                        return request
                    },
                ]
            case .authenticator:
                configuration.identity.authenticate(with: Credentials(BearerAuthenticator(), credential: "me-1"))
            case .partitions:
                configuration.identity.authenticate(
                    with: Credentials(
                        BearerAuthenticator(), credential: "me-1", partition: { String($0.prefix { $0 != "-" }) }))
            case .accounts:
                let accounts = Accounts(BearerAuthenticator())
                // Two accounts, so that a request keyed for the wrong one shows.
                try! accounts.setCredential("me-1", for: "me")
                try! accounts.setCredential("you-1", for: "you")
                configuration.identity.authenticate(with: accounts)
            }
        }
    }

    /// A screen's plain request for `url` in this configuration: with several accounts signed in,
    /// a request must name its account, so it names "me"; otherwise the plain request.
    func request(_ url: URL) -> URLRequest {
        var plain = URLRequest(url: url)
        if self == .accounts { plain.account = "me" }
        return plain
    }
}

/// Bearer tokens that are never refused: a refresh gives the token back.
struct BearerAuthenticator: Authenticator {
    func apply(_ token: String, to request: inout URLRequest) {
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
    }

    func refresh(_ token: String) async throws -> String { token }

    func isRequest(_ request: URLRequest, authenticatedWith token: String) -> Bool {
        request.value(forHTTPHeaderField: "Authorization") == "Bearer \(token)"
    }
}
