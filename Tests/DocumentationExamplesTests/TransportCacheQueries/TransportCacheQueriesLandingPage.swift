// swift-format-ignore-file
// The block of TransportCacheQueries.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache
import TransportCacheQueries

@MainActor
func queriesLandingPage(transport: CachedTransport, articlesURL: URL) async {
    let articles = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
    await articles.refresh()
}
