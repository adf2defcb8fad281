// swift-format-ignore-file
// A block of README.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

func readmeInstallOverride(in configuration: URLSessionConfiguration) {
    configuration.protocolClasses = [CacheOverrideURLProtocol.self] + (configuration.protocolClasses ?? [])
}

final class APIOverride: CacheOverrideURLProtocol {
    override class var cacheOverride: CacheOverride {
        CacheOverride(writtenMaxAge: .seconds(300), endpoints: [.host("api.example.com")])
    }
}
