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
