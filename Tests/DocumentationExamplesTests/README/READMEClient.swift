// swift-format-ignore-file
// A block of README.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
import TransportCache

final class ArticlesClient: Sendable {
    private let transport: CachedTransport
    init(transport: CachedTransport) { self.transport = transport }

    func articles(page: Int) async throws -> [Article] {
        let url = URL(string: "https://api.example.com/articles?page=\(page)")!
        let (data, _) = try await transport.data(from: url)   // memory after the first call
        return try JSONDecoder().decode([Article].self, from: data)
    }
}
