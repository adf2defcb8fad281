// swift-format-ignore-file
// A block of README.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

struct READMEArticlesAPI: Sendable {
    func post(_ article: Article) async throws -> Article { article }
}

struct READMEProfile: Codable, Sendable {
    let name: String
}

func readmeWrites(
    transport: CachedTransport, api: READMEArticlesAPI, listRequest: URLRequest, articles: [Article], draft: Article,
    meRequest: URLRequest, profile: READMEProfile, request: URLRequest
) async throws {
    var configuration = CachedTransport.Configuration()
    // The screen that posts: the list shows the new article everywhere at once, then the origin's list.
    let created = try await transport.optimisticUpdate(
        [try ProvisionalAnswer(for: listRequest, value: articles + [draft])],
        write: { try await api.post(draft) })                 // throws → rolled back to the exact bytes held before

    try transport.store(ProvisionalAnswer(for: meRequest, value: profile))   // an answer written by the app

    _ = try await transport.data(for: request, tags: ["articles"])          // tags stay in the app
    transport.invalidate(tag: "articles")                                    // every entry tagged, any URL

    configuration.network.queryEndpoints = [.pathPrefix("/graphql")]         // POST queries cached like GETs
    _ = (created, configuration)
}
