// swift-format-ignore-file
// The block of WritesEveryScreenSees.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

/// Stands for the app's client of its own API.
struct WritesArticlesAPI: Sendable {
    func post(_ article: Article) async throws -> Article { article }
}

func writesEveryScreenSeesArticle(
    transport: CachedTransport, api: WritesArticlesAPI, listRequest: URLRequest, articles: [Article], draft: Article
) async throws {
    let created = try await transport.optimisticUpdate(
        [try ProvisionalAnswer(for: listRequest, value: articles + [draft])],
        write: { try await api.post(draft) })
    _ = created
}
