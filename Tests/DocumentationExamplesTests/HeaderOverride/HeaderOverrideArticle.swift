// swift-format-ignore-file
// The block of HeaderOverride.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

func headerOverrideArticle(configuration: URLSessionConfiguration) {
    configuration.protocolClasses = [CacheOverrideURLProtocol.self] + (configuration.protocolClasses ?? [])
}
