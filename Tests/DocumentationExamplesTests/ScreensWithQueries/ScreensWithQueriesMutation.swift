// swift-format-ignore-file
// A block of ScreensWithQueries.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache
import TransportCacheQueries

/// The list the query and mutation example shows.
private let articlesURL = URL(string: "https://api.example.com/articles")!

@MainActor
func showArticles(transport: CachedTransport) async {
    let articles = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
    // articles.status: .loaded at once when memory held the list, else .loading
    // articles.value, .failure, .isFetching, .outcome: what the view reads
    await articles.refresh()                      // every other query on the list hears it

    let post = CachedMutation(in: transport) { (draft: Article) in
        [try ProvisionalAnswer(for: URLRequest(url: articlesURL), value: (articles.value ?? []) + [draft])]
    } write: { draft in
        var request = URLRequest(url: articlesURL)
        request.httpMethod = "POST"
        request.httpBody = try JSONEncoder().encode(draft)
        _ = try await transport.data(for: request)
    }
    await post.run(Article(title: "Hello"))       // post.isPending, post.error
}
