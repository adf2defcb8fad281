import Foundation
@testable import OpenAPIExample
import OpenAPIRuntime
import OpenAPIURLSession
import Testing
import TransportCache
import TransportCacheOpenAPI

/// The two transports a generated client is tested with, side by side: the adapter over
/// `CachedTransport`, and the `URLSessionTransport` generated clients usually get.
enum TransportUnderTest: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case cached = "CachedClientTransport"
    case urlSession = "URLSessionTransport"

    var testDescription: String { rawValue }

    /// A generated client for `serverURL` over this transport, with the `CachedTransport` behind
    /// it when there is one.
    func makeClient(serverURL: URL) -> (client: Client, cache: CachedTransport?) {
        switch self {
        case .cached:
            let cache = CachedTransport()
            return (Client(serverURL: serverURL, transport: CachedClientTransport(cache)), cache)
        case .urlSession:
            return (Client(serverURL: serverURL, transport: URLSessionTransport()), nil)
        }
    }

    /// What the origin sees for `calls` calls of one operation: one hit through the cache, one per
    /// call without it.
    func expectedHits(calls: Int) -> Int {
        switch self {
        case .cached: 1
        case .urlSession: calls
        }
    }
}

extension Client {
    /// The text of `getItem`'s 200 answer.
    func itemText(_ itemID: String, page: Int? = nil) async throws -> String {
        let output = try await getItem(path: .init(itemID: itemID), query: .init(page: page))
        return try await String(plainText: output.ok.body.plainText)
    }

    /// The text of `getNote`'s answer.
    func noteText(_ noteID: String) async throws -> String {
        try await String(plainText: getNote(path: .init(noteID: noteID)).ok.body.plainText)
    }
}
