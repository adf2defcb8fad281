import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache

@Suite("Decoded values per entry are bounded")
struct ValueBoundTests {
    let url = "https://api.example.com/feed"

    /// A decoder keyed by its instance: every one decodes for itself.
    static func uncomparableDecoder() -> JSONDecoder {
        jsonDecoder { $0.keyDecodingStrategy = .custom { $0.last! } }
    }

    @Test("the per-entry bound holds under 20 decoders, keeping the most recently used")
    func boundUnderTwentyDecoders() async throws {
        let loader = feedLoader(Locked(1))
        let transport = makeTransport(loader: loader)
        let (data, _) = try await transport.data(for: request(url))
        let stored = transport.statistics.bytesHeld
        let decoders = (0..<20).map { _ in Self.uncomparableDecoder() }
        for decoder in decoders {
            _ = try await transport.value(Feed.self, for: request(url), decoder: decoder)
            #expect(await transport.decodedValuesHeld <= 4)
        }
        let perValue = data.count + AnyDecodedValue.overhead
        #expect(await transport.decodedValuesHeld == 4)
        #expect(transport.statistics.bytesHeld == stored + 4 * perValue)
        #expect(transport.statistics.decodedEvictions == 16)
        #expect(transport.statistics.decodes == 20)
        // The last four are kept; the first was dropped and decodes again.
        for decoder in decoders.suffix(4) {
            _ = try await transport.value(Feed.self, for: request(url), decoder: decoder)
        }
        #expect(transport.statistics.decodes == 20)
        _ = try await transport.value(Feed.self, for: request(url), decoder: decoders[0])
        #expect(transport.statistics.decodes == 21)
        #expect(await transport.decodedValuesHeld == 4)
        #expect(transport.statistics.bytesHeld == stored + 4 * perValue)
        #expect(loader.callCount == 1)
    }

    @Test("the least recently used value of an entry is dropped first")
    func leastRecentlyUsedDropped() async throws {
        let transport = makeTransport(loader: feedLoader(Locked(1))) { $0.storage.maximumDecodedValuesPerEntry = 2 }
        let a = Self.uncomparableDecoder()
        let b = Self.uncomparableDecoder()
        let c = Self.uncomparableDecoder()
        let first = try await transport.value(Feed.self, for: request(url), decoder: a)
        _ = try await transport.value(Feed.self, for: request(url), decoder: b)
        _ = try await transport.value(Feed.self, for: request(url), decoder: a)  // a is now the most recent
        _ = try await transport.value(Feed.self, for: request(url), decoder: c)  // drops b
        #expect(transport.statistics.decodes == 3)
        let again = try await transport.value(Feed.self, for: request(url), decoder: a)
        #expect(again === first)
        #expect(transport.statistics.decodes == 3)
        _ = try await transport.value(Feed.self, for: request(url), decoder: b)
        #expect(transport.statistics.decodes == 4)
    }

    @Test("types count toward the bound like decoders")
    func typesCount() async throws {
        let transport = makeTransport(loader: feedLoader(Locked(1))) { $0.storage.maximumDecodedValuesPerEntry = 1 }
        _ = try await transport.value(Feed.self, for: request(url))
        _ = try await transport.value(FeedNames.self, for: request(url))
        _ = try await transport.value(Feed.self, for: request(url))
        #expect(transport.statistics.decodes == 3)
        #expect(await transport.decodedValuesHeld == 1)
    }

    @Test("a bound of zero keeps no decoded value and charges nothing")
    func zeroBound() async throws {
        let transport = makeTransport(loader: feedLoader(Locked(1))) { $0.storage.maximumDecodedValuesPerEntry = 0 }
        _ = try await transport.data(for: request(url))
        let stored = transport.statistics.bytesHeld
        _ = try await transport.value(Feed.self, for: request(url))
        _ = try await transport.value(Feed.self, for: request(url))
        #expect(transport.statistics.decodes == 2)
        #expect(await transport.decodedValuesHeld == 0)
        #expect(transport.statistics.bytesHeld == stored)
    }
}
