// swift-format-ignore-file
// A block of README.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

@MainActor
final class READMEArticlesScreen {
    var articles: [Article]?
    let transport: CachedTransport
    let client: ArticlesClient
    let articlesURL = URL(string: "https://api.example.com/articles?page=1")!

    init(transport: CachedTransport, client: ArticlesClient) {
        self.transport = transport
        self.client = client
    }

    // The screen the user pulled: fetch anew; the transport stores it and announces the change.
    func pullToRefresh() async throws {
        _ = try await transport.refresh(URLRequest(url: articlesURL))
    }

    // Any other screen showing the same data: reload from memory when it changes.
    func watchArticles() async {
        for await change in transport.changes(for: .pathPrefix("/articles")) {
            if case .updated = change { articles = try? await client.articles(page: 1) }   // a memory hit
            if case .invalidated = change { articles = try? await client.articles(page: 1) } // a fetch
        }
    }
}
