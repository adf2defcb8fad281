// swift-format-ignore-file
// The blocks of Prefetching.md, verbatim as a reader copies them: DocumentationBlocksTests checks they are the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

func prefetchingArticleRow(transport: CachedTransport, detailsURL: URL) async throws {
    // A row is about to appear: fetch its details ahead, at low priority.
    let prefetch = try transport.prefetch(URLRequest(url: detailsURL))

    // The row scrolled away before the user tapped it: nothing is sent if it still waits.
    prefetch.cancel()

    // The user tapped it: the screen's request joins the prefetch's fetch, or reads memory.
    let (details, _) = try await transport.data(from: detailsURL)
    _ = details
}

func prefetchingArticleNamed(transport: CachedTransport, request: URLRequest) async throws {
    let (data, _) = try await withFetchPriority(.veryHigh) {
        try await transport.data(for: request)
    }
    _ = data
}
