// swift-format-ignore-file
// A block of ScreensWithQueries.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache
import TransportCacheQueries

/// The URL of page `number` of the article list.
func pageURL(_ number: Int) -> URL {
    URL(string: "https://api.example.com/articles?page=\(number)")!
}

@MainActor
func screensWithQueriesPages(transport: CachedTransport) async {
    let feed = CachedPagedQuery([Article].self, first: URLRequest(url: pageURL(1)), in: transport) { last in
        last.isEmpty ? nil : URLRequest(url: pageURL(2))
    }
    await feed.loadNextPage()
    await feed.refresh()
}
