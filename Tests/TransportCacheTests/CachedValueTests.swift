import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Decoded values read from memory without waiting")
struct CachedValueTests {
    let url = "https://api.example.com/feed"

    @Test("with nothing in memory it returns nil and sends nothing")
    func missReturnsNil() throws {
        let origin = feedLoader(Locked(1))
        let transport = makeTransport(loader: origin)

        #expect(try transport.cachedValue(Feed.self, for: request(url)) == nil)
        #expect(origin.callCount == 0)
    }

    @Test("a stored entry gives its value, bytes and memory outcome, decoded once with value(_:for:)")
    func hitSharesTheDecode() async throws {
        let transport = makeTransport(loader: feedLoader(Locked(1)))
        _ = try await transport.data(for: request(url))

        let read = try #require(try transport.cachedValue(Feed.self, for: request(url)))
        let awaited = try await transport.value(Feed.self, for: request(url))

        #expect(read.value === awaited)
        #expect(read.data == feedBody(1))
        #expect(read.outcome.source == .memory(.fresh))
        #expect(transport.statistics.decodes == 1)
        #expect(transport.statistics.memoryHits == 2)
    }

    @Test("an entry the request may not use, by age or by policy, gives nil")
    func unusableEntryReturnsNil() async throws {
        let clock = TestClock()
        let transport = makeTransport(loader: feedLoader(Locked(1)), clock: clock) {
            $0.freshness.maximumAge = .seconds(10)
        }
        _ = try await transport.data(for: request(url))

        #expect(try transport.cachedValue(Feed.self, for: request(url, policy: .reloadIgnoringLocalCacheData)) == nil)
        clock.advance(by: .seconds(11))
        #expect(try transport.cachedValue(Feed.self, for: request(url)) == nil)
        #expect(transport.statistics.decodes == 0)
    }

    @Test("a stored body that does not decode throws the decoding error and keeps nothing")
    func decodingFailureThrows() async throws {
        let transport = makeTransport(loader: fixedLoader("not JSON"))
        _ = try await transport.data(for: request(url))

        let error = try #require(throws: ValueDecodingError.self) {
            try transport.cachedValue(Feed.self, for: request(url))
        }
        #expect(error.code == .decodingFailed)
        #expect(throws: ValueDecodingError.self) { try transport.cachedValue(Feed.self, for: request(url)) }
        #expect(transport.statistics.decodes == 2)
    }
}
