// swift-format-ignore-file
// A block of TestingWithAScriptedOrigin.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Observation
import TransportCache

@MainActor @Observable
final class ArticleListModel {
    struct Article: Decodable, Sendable, Equatable { let title: String }

    private(set) var articles: [Article] = []
    private(set) var failed = false
    private let transport: CachedTransport
    private let changes: AsyncStream<CacheChange>
    static let url = URL(string: "https://api.example.com/articles")!

    init(transport: CachedTransport) {
        self.transport = transport
        // Subscribed now, so no change made after the model exists is missed.
        changes = transport.changes(for: .url(Self.url))
    }

    func load() async {
        do {
            articles = try await transport.value([Article].self, from: Self.url)
            failed = false
        } catch {
            failed = true
        }
    }

    func refresh() async {
        _ = try? await transport.refresh(URLRequest(url: Self.url))
        await load()
    }

    /// Run from the view with `.task { await model.followChanges() }`: it stops when the view goes away.
    func followChanges() async {
        for await _ in changes { await load() }
    }
}
