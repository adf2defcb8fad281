// swift-format-ignore-file
// A block of README.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

func readmeRevalidation(feedURL: URL) async throws {
    var configuration = CachedTransport.Configuration()
    configuration.freshness.maximumAge = .seconds(60)             // fresh for a minute
    configuration.freshness.staleWhileRevalidate = .seconds(600)  // then answered at once for ten more, while revalidating
    let transport = CachedTransport(configuration: configuration)

    let (_, response) = try await transport.data(from: feedURL)
    if response.isRevalidatingAnswer { /* shown at once; changes() announces .updated if the bytes change */ }
}
