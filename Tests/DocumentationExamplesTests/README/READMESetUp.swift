// swift-format-ignore-file
// A block of README.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

func readmeSetUp() -> ArticlesClient {
    var configuration = CachedTransport.Configuration()
    configuration.storage.memoryCapacity = 64 * 1024 * 1024  // bodies plus a per-entry overhead
    configuration.freshness.maximumAge = .seconds(600)       // optional; default: until invalidated
    let transport = CachedTransport(configuration: configuration)
    let client = ArticlesClient(transport: transport)
    return client
}
