// swift-format-ignore-file
// The block of WritesEveryScreenSees.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

func writesEveryScreenSeesArticle(
    transport: CachedTransport, api: READMEArticlesAPI, listRequest: URLRequest, articles: [Article], draft: Article
) async throws {
    let created = try await transport.optimisticUpdate(
        [try ProvisionalAnswer(for: listRequest, value: articles + [draft])],
        write: { try await api.post(draft) })
    _ = created
}
