// swift-format-ignore-file
// The block of TransportCache.md, the landing page, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

func transportCacheLandingPage(url: URL) async throws {
    let transport = CachedTransport()
    let (data, response) = try await transport.data(from: url)
    _ = (data, response)
}
