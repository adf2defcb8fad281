import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Snapshot")
struct SnapshotTests {
    @Test("each entry shows its URL, variant, age, lifetime, validators, bytes, hits and decoded types")
    func entries() async throws {
        struct Feed: Decodable, Sendable { let name: String }
        let origin = ScriptedOrigin { request, _ in
            switch request.url?.path {
            case "/feed":
                .init(headers: ["ETag": "\"v1\"", "Vary": "Accept-Encoding"], text: #"{"name":"feed"}"#)
            default: .init(headers: ["Last-Modified": "Tue, 24 Nov 2026 10:00:00 GMT"], text: "other")
            }
        }
        let clock = TestClock()
        let transport = makeTransport(loader: origin, clock: clock) { $0.freshness.maximumAge = .seconds(60) }
        let feed = request("https://api.example.com/feed", headers: ["Accept-Encoding": "gzip"])
        _ = try await transport.value(Feed.self, for: feed)
        _ = try await transport.data(for: feed)
        _ = try await transport.data(for: feed)
        clock.advance(by: .seconds(10))
        _ = try await transport.data(for: request("https://api.example.com/other"))
        clock.advance(by: .seconds(5))

        let snapshot = transport.snapshot()
        #expect(snapshot.entries.count == 2)
        let other = try #require(snapshot.entries.first)
        let stored = try #require(snapshot.entries.last)
        #expect(other.url.absoluteString == "https://api.example.com/other")
        #expect(other.age == .seconds(5))
        #expect(other.lastModified == "Tue, 24 Nov 2026 10:00:00 GMT")
        #expect(other.entityTag == nil)
        #expect(other.hits == 0)
        #expect(stored.url.absoluteString == "https://api.example.com/feed")
        #expect(stored.method == "GET")
        #expect(stored.variantHeaders == ["accept-encoding": "gzip"])
        #expect(stored.age == .seconds(15))
        #expect(stored.freshnessLifetime == .seconds(60))
        #expect(stored.isFresh)
        #expect(stored.entityTag == "\"v1\"")
        #expect(stored.bytes == 15)
        #expect(stored.hits == 2)
        #expect(stored.decodedTypes == ["Feed"])

        let table = snapshot.description.split(separator: "\n")
        #expect(table.count == 4)
        #expect(table[0].hasPrefix("URL"))
        #expect(table[1].hasPrefix("https://api.example.com/other"))
        #expect(table[2].contains("accept-encoding=gzip"))
        #expect(table[2].contains("ETag \"v1\""))
        #expect(table[3] == "2 entries, 20 bytes")
    }

    @Test("an empty transport has an empty snapshot")
    func empty() {
        let transport = makeTransport(loader: echoOrigin())
        #expect(transport.snapshot().entries.isEmpty)
        #expect(transport.snapshot().description.hasSuffix("0 entries, 0 bytes"))
    }
}
