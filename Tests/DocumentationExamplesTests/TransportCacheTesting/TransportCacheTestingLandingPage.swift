// swift-format-ignore-file
// The block of TransportCacheTesting.md, the landing page, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache
import TransportCacheTesting

func transportCacheTestingLandingPage(articlesURL: URL) -> CachedTransport {
    let origin = ScriptedOrigin()
    origin.respond(to: articlesURL, with: .init(text: #"[{"title":"Hello"}]"#))
    let transport = CachedTransport(origin: origin)
    return transport
}
