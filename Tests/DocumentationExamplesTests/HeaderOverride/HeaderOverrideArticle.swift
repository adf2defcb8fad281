// swift-format-ignore-file
// The blocks of HeaderOverride.md, verbatim as a reader copies them: DocumentationBlocksTests checks they are the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

func headerOverrideArticle(configuration: URLSessionConfiguration) {
    configuration.protocolClasses = [CacheOverrideURLProtocol.self] + (configuration.protocolClasses ?? [])
}

final class APIOverride: CacheOverrideURLProtocol {
    override class var cacheOverride: CacheOverride {
        CacheOverride(writtenMaxAge: .seconds(300), endpoints: [.host("api.example.com")])
    }
}
