// swift-format-ignore-file
// A block of ScreensWithQueries.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
#if canImport(SwiftUI)
import SwiftUI
import TransportCache
import TransportCacheQueries

struct ArticlesView: View {
    @State private var articles: CachedQuery<[Article]>

    init(transport: CachedTransport) {
        _articles = State(initialValue: CachedQuery(
            [Article].self, for: URLRequest(url: URL(string: "https://api.example.com/articles")!),
            in: transport))
    }

    var body: some View {
        List(articles.value ?? [], id: \.title) { Text($0.title) }
            .overlay { if articles.status == .loading { ProgressView() } }
            .refreshable { await articles.refresh() }
    }
}
#endif
