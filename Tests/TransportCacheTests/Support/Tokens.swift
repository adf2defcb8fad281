import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import TransportCache
import TransportCacheTesting

/// Bearer tokens named `<account>-<n>`: a request carries `Authorization: Bearer <token>` and
/// `X-Account: <account>`, which a partition reads. Each refresh is counted and runs `refreshed`.
final class TokenAuthenticator: Authenticator {
    let refreshed: @Sendable (_ token: String, _ refresh: Int) async throws -> String
    private let count = Locked(0)

    init(
        refreshed: @escaping @Sendable (_ token: String, _ refresh: Int) async throws -> String = { token, refresh in
            "\(TokenAuthenticator.account(of: token))-\(refresh + 1)"
        }
    ) {
        self.refreshed = refreshed
    }

    /// Refreshes that each wait at `gate` first, then give what `refreshed` makes.
    convenience init(
        heldAt gate: Gate, then refreshed: @escaping @Sendable (_ token: String, _ refresh: Int) async throws -> String
    ) {
        self.init { token, refresh in
            try await gate.wait()
            return try await refreshed(token, refresh)
        }
    }

    var refreshes: Int { count.withLock { $0 } }

    static func account(of token: String) -> String { String(token.prefix { $0 != "-" }) }

    func apply(_ token: String, to request: inout URLRequest) {
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue(Self.account(of: token), forHTTPHeaderField: "X-Account")
    }

    func refresh(_ token: String) async throws -> String {
        let refresh = count.withLock { count in
            count += 1
            return count
        }
        return try await refreshed(token, refresh)
    }

    func isRequest(_ request: URLRequest, authenticatedWith token: String) -> Bool {
        request.value(forHTTPHeaderField: "Authorization") == "Bearer \(token)"
    }
}

/// An origin that answers `200` with the `Authorization` it was sent, or `401` for any
/// credential outside `accepted`.
func authenticatingOrigin(accepting accepted: Locked<Set<String>>, gated: Bool = false) -> ScriptedOrigin {
    ScriptedOrigin(gated: gated) { request, call in
        let auth = request.value(forHTTPHeaderField: "Authorization") ?? "-"
        guard accepted.withLock({ $0.contains(auth) }) else { return .init(status: 401, text: "refused") }
        return .init(text: "\(request.url!.path) auth=\(auth) call=\(call)")
    }
}
