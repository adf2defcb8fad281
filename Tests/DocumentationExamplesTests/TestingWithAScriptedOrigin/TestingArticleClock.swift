// swift-format-ignore-file
// A block of TestingWithAScriptedOrigin.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TransportCache
import TransportCacheTesting

extension ArticleListModelTests {
    @Test func agesWithoutSleeping() async throws {
        let clock = ManualCacheClock()
        var configuration = CachedTransport.Configuration()
        configuration.freshness.maximumAge = .seconds(60)
        configuration.clock = clock.cacheClock
        origin.respond(
            to: ArticleListModel.url,
            with: .init(headers: ["ETag": "\"v1\""], text: #"[{"title":"Hello"}]"#),
            .init(status: 304, headers: ["ETag": "\"v1\""]))
        let transport = CachedTransport(configuration: configuration, origin: origin)
        _ = try await transport.data(from: ArticleListModel.url)
        clock.advance(by: .seconds(61))
        let (_, _, outcome) = try await transport.response(for: URLRequest(url: ArticleListModel.url))
        #expect(outcome.source == .revalidated(.expired))
    }
}
