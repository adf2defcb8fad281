// swift-format-ignore-file
// A block of README.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
import Testing
import TransportCache
import TransportCacheTesting

@Test func secondPageLoadComesFromMemory() async throws {
    let url = URL(string: "https://api.example.com/articles?page=1")!
    let origin = ScriptedOrigin()
    origin.respond(to: url, with: .init(headers: ["Cache-Control": "no-cache"], text: "[]"))
    let client = ArticlesClient(transport: CachedTransport(origin: origin))
    _ = try await client.articles(page: 1)
    _ = try await client.articles(page: 1)
    #expect(origin.callCount(for: url) == 1)
}
