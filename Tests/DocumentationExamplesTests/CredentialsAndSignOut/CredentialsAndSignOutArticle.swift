// swift-format-ignore-file
// The blocks of CredentialsAndSignOut.md, verbatim as a reader copies them: DocumentationBlocksTests checks they are the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

struct ArticleTokenAuthenticator: Authenticator {
    let api: AuthAPI
    func apply(_ session: UserSession, to request: inout URLRequest) {}
    func refresh(_ session: UserSession) async throws -> UserSession { try await api.refresh(session) }
    func isRequest(_ request: URLRequest, authenticatedWith session: UserSession) -> Bool { false }
}

/// What the app knows of the tenant its user works in; nil for none.
struct CredentialsArticleTenant: Sendable {
    var current: String?
}

func credentialsAndSignOutAdapters(tenant: CredentialsArticleTenant) {
    var configuration = CachedTransport.Configuration()
    configuration.identity.requestAdapters = [
        .header("Accept-Language") { _ in "de" },        // in the key; a hit builds no request
        .header("X-Tenant") { _ in tenant.current },     // a String?: nil sends no X-Tenant
    ]
    _ = configuration
}

func credentialsAndSignOutArticle(api: AuthAPI, savedSession: UserSession) {
    typealias TokenAuthenticator = ArticleTokenAuthenticator
    let credentials = Credentials(TokenAuthenticator(api: api), credential: savedSession)
    var configuration = CachedTransport.Configuration()
    configuration.identity.authenticate(with: credentials)
    let transport = CachedTransport(configuration: configuration)

    let partitioned = Credentials(
        TokenAuthenticator(api: api), credential: savedSession, partition: { $0.userID })
    _ = partitioned

    credentials.credential = nil
    transport.signOut(partition: savedSession.userID)
}

func credentialsAndSignOutSeveralAccounts(
    api: AuthAPI, aliceSession: UserSession, bobSession: UserSession, inboxURL: URL
) async throws {
    typealias TokenAuthenticator = ArticleTokenAuthenticator
    let accounts = Accounts(TokenAuthenticator(api: api))
    try accounts.setCredential(aliceSession, for: "alice")
    try accounts.setCredential(bobSession, for: "bob")
    var configuration = CachedTransport.Configuration()
    configuration.identity.authenticate(with: accounts)
    let transport = CachedTransport(configuration: configuration)

    var inbox = URLRequest(url: inboxURL)
    inbox.account = "alice"                              // keyed by alice, sent with her credential
    let (data, _) = try await transport.data(for: inbox)

    // Bob signs out: nothing of his is left, and his credential is forgotten; alice goes on.
    transport.signOut(partition: "bob")
    _ = data
}
