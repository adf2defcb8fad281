// swift-format-ignore-file
// The block of DecodedValues.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

@MainActor
final class DecodedValuesArticleScreen {
    var articles: [Article] = []

    func show(transport: CachedTransport, request: URLRequest) async throws {
        // One call: from memory, decoded once per entry, shared by concurrent callers.
        let articles = try await transport.value([Article].self, for: request)

        // The same value: decoders with equal settings share it.
        let same = try await transport.value([Article].self, for: request, decoder: JSONDecoder())

        // A view model: the current value, then every change, whichever screen refreshed.
        for try await articles in transport.values([Article].self, for: request) {
            self.articles = articles
        }
        _ = (articles, same)
    }
}
