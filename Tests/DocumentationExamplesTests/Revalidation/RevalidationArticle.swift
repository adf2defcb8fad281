// swift-format-ignore-file
// The block of Revalidation.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import TransportCache

func revalidationArticleConfiguration() -> CachedTransport.Configuration {
    var configuration = CachedTransport.Configuration()
    configuration.freshness.maximumAge = .seconds(60)
    configuration.freshness.staleWhileRevalidate = .seconds(600)
    configuration.freshness.staleWhileRevalidateWindows = [EndpointSetting(.pathPrefix("/live"), .seconds(5))]
    return configuration
}
