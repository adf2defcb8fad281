// swift-format-ignore-file
// A block of DecodedValues.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Observation
import TransportCache

@MainActor @Observable
final class ArticlesModel {
    private(set) var articles: [Article] = []
    private(set) var loadError: (any Error)?
    private let transport: CachedTransport
    private let request = URLRequest(url: URL(string: "https://api.example.com/articles")!)

    init(transport: CachedTransport) { self.transport = transport }

    /// Run from the view with `.task { await model.watch() }`: it stops when the view goes away.
    func watch() async {
        do {
            for try await articles in transport.values([Article].self, for: request) {
                self.articles = articles      // the current list, then each change, decoded once
            }
        } catch {
            loadError = error                 // only a failed first load ends the stream
        }
    }

    func pullToRefresh() async { _ = try? await transport.refresh(request) }   // every watcher hears it
}
