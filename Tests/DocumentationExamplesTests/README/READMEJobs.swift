// swift-format-ignore-file
// The blocks of README.md's six common jobs, verbatim as a reader copies them: DocumentationBlocksTests checks they are the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

func readmeFetch(transport: CachedTransport, articlesURL: URL) async throws {
    let (data, response) = try await transport.data(from: articlesURL)   // memory after the first call
    let (_, _, outcome) = try await transport.response(for: URLRequest(url: articlesURL))
    print(outcome.source)                                                // where it came from, and why
    _ = (data, response)
}

func readmeDecode(transport: CachedTransport, articlesURL: URL, show: ([Article]) -> Void) async throws {
    let articles = try await transport.value([Article].self, from: articlesURL)   // decoded once per entry

    for try await articles in transport.values([Article].self, for: URLRequest(url: articlesURL)) {
        show(articles)                                    // the current list, then each change
    }
    _ = articles
}

func readmeInvalidate(transport: CachedTransport, articlesURL: URL) {
    transport.invalidate(URLRequest(url: articlesURL))   // one entry
    transport.invalidate(.pathPrefix("/articles"))        // every entry under a path, every identity
    transport.invalidate(tag: "articles")                 // every entry fetched with data(for:tags:)
    transport.invalidateAll()                             // everything
}

func readmeSignOut(api: AuthAPI, savedSession: UserSession) {
    typealias TokenAuthenticator = ArticleTokenAuthenticator
    let credentials = Credentials(TokenAuthenticator(api: api), credential: savedSession, partition: { $0.userID })
    var configuration = CachedTransport.Configuration()
    configuration.identity.authenticate(with: credentials)
    let transport = CachedTransport(configuration: configuration)

    // The user signs out: nothing of the account is left, in memory or in flight.
    credentials.credential = nil
    transport.signOut(partition: savedSession.userID)
}

func readmeSeveralAccounts(
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
    inbox.account = "alice"                                   // keyed by alice, sent with her token
    let (data, _) = try await transport.data(for: inbox)
    transport.signOut(partition: "bob")                       // bob only: alice goes on
    _ = data
}

func readmePrefetch(transport: CachedTransport, detailsURL: URL) throws {
    // A row is about to appear: fetch its details ahead, behind every screen's request.
    let prefetch = try transport.prefetch(URLRequest(url: detailsURL))
    prefetch.cancel()   // it scrolled away: if it still waits for its host, nothing is sent
}
