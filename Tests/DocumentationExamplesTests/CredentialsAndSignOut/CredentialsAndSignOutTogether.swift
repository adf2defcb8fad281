// swift-format-ignore-file
// A block of CredentialsAndSignOut.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

struct UserSession: Sendable {
    var userID: String
    var accessToken: String
    var refreshToken: String
}

struct AuthAPI: Sendable {
    func refresh(_ session: UserSession) async throws -> UserSession { session }
}

func credentialsAndSignOutTogether(api: AuthAPI, savedSession: UserSession) {
struct TokenAuthenticator: Authenticator {
    let api: AuthAPI                                    // your own client for the token endpoint

    func apply(_ session: UserSession, to request: inout URLRequest) {
        request.setValue("Bearer \(session.accessToken)", forHTTPHeaderField: "Authorization")
    }
    func refresh(_ session: UserSession) async throws -> UserSession {
        try await api.refresh(session)                  // once, however many requests were refused
    }
    func isRequest(_ request: URLRequest, authenticatedWith session: UserSession) -> Bool {
        request.value(forHTTPHeaderField: "Authorization") == "Bearer \(session.accessToken)"
    }
}

let credentials = Credentials(
    TokenAuthenticator(api: api), credential: savedSession,
    partition: { $0.userID })                         // entries outlive a token; sign-out by user
var configuration = CachedTransport.Configuration()
configuration.identity.authenticate(with: credentials)
configuration.identity.requestAdapters = [
    .header("Accept-Language") { _ in "de" },                             // shapes the key
    RequestAdapter { request in                                           // only what goes out
        var request = request
        request.setValue("4.2", forHTTPHeaderField: "X-App-Version")
        return request
    },
]
let transport = CachedTransport(configuration: configuration)

// Signing out: nothing of the account is left, in memory or in flight.
credentials.credential = nil
transport.signOut(partition: savedSession.userID)
}
