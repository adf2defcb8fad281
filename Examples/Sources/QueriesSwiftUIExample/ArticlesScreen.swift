#if canImport(SwiftUI)
import SwiftUI
import TransportCache
import TransportCacheQueries

/// An article of the list the screen shows.
public struct Article: Codable, Identifiable, Sendable {
    /// The title, which names an article in the list.
    public var id: String { title }
    /// The article's title.
    public var title: String

    /// An article titled `title`.
    public init(title: String) {
        self.title = title
    }
}

/// A list screen over a `CachedQuery`: shown from memory in its first frame when the transport
/// holds the list, refreshed by pull-to-refresh, and a button that posts an article through a
/// `CachedMutation`, shown at once and rolled back if the post fails.
public struct ArticlesScreen: View {
    @State private var articles: CachedQuery<[Article]>
    @State private var post: CachedMutation<Article, Void>
    private let listRequest: URLRequest

    /// The screen of the list at `listURL`, loaded through `transport`.
    public init(transport: CachedTransport, listURL: URL) {
        let listRequest = URLRequest(url: listURL)
        let articles = CachedQuery([Article].self, for: listRequest, in: transport)
        self.listRequest = listRequest
        _articles = State(initialValue: articles)
        _post = State(
            initialValue: CachedMutation(in: transport) { (draft: Article) in
                [try ProvisionalAnswer(for: listRequest, value: (articles.value ?? []) + [draft])]
            } write: { draft in
                var request = URLRequest(url: listURL)
                request.httpMethod = "POST"
                request.httpBody = try JSONEncoder().encode(draft)
                _ = try await transport.data(for: request)
            })
    }

    /// The list, its error, a spinner for the first load only, and the post button.
    public var body: some View {
        List {
            if let error = articles.error {
                Text("Could not load: \(error.localizedDescription)")
            }
            ForEach(articles.value ?? []) { article in
                Text(article.title)
            }
        }
        .overlay {
            if articles.status == .loading { ProgressView() }
        }
        .refreshable { await articles.refresh() }
        // Follows the list while the screen is shown: a query stopped when the screen went away
        // starts again, from memory, when it comes back.
        .task { articles.start() }
        .onDisappear { articles.stop() }
        .toolbar {
            Button("Post") {
                Task { await post.run(Article(title: "New article")) }
            }
            .disabled(post.isPending)
        }
        .alert("The post failed", isPresented: .constant(post.error != nil)) {}
    }
}
#endif
