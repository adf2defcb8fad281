// swift-format-ignore-file
// The block of InvalidationAndChanges.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

@MainActor
final class InvalidationArticleScreen {
    var articles: [Article] = []

    func follow(transport: CachedTransport, client: ArticlesClient, articlesURL: URL) async throws {
        // The screen the user pulled:
        _ = try await transport.refresh(URLRequest(url: articlesURL))

        // Every other screen showing articles:
        for await change in transport.changes(for: .pathPrefix("/articles")) {
            if case .updated = change { articles = try await client.articles(page: 1) }  // from memory
        }
    }
}
