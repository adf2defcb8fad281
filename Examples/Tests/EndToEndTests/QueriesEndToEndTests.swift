import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Observation
import Testing
import TransportCache
import TransportCacheQueries

/// Observable queries against a real origin over TCP: a second screen's query starts from memory
/// in its initialiser, refreshing one query updates the other, and a request the transport does
/// not cache is loaded without following changes.
@Suite("Observable queries against a real origin")
@MainActor
struct QueriesEndToEndTests {
    @Test("a second query starts loaded from memory, and a refresh of one updates the other")
    func refreshOfOneQueryUpdatesTheOther() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let request = URLRequest(url: origin.url("/board?stable=1&cc=max-age=60"))
            // One decoder for both: a decoder without comparable settings shares values by instance.
            let decoder = BodyTextDecoder()
            let screenA = CachedQuery(String.self, for: request, in: transport, decoder: decoder)
            #expect(screenA.status == .loading)
            await screenA.waitForFetches()
            #expect(screenA.value?.contains("version=0") == true)

            let screenB = CachedQuery(String.self, for: request, in: transport, decoder: decoder)
            #expect(screenB.status == .loaded)
            #expect(screenB.outcome?.isFromMemory == true)
            #expect(screenB.value == screenA.value)
            #expect(await origin.hits(path: "/board") == 1)

            _ = await origin.bumpVersion(of: "/board")
            let screenBChanged = nextChange(of: screenB)
            await screenA.refresh()
            await screenBChanged()

            #expect(screenA.value?.contains("version=1") == true)
            #expect(screenB.value == screenA.value)
            #expect(!screenB.isFetching)
            #expect(await origin.hits(path: "/board") == 2)
            #expect(transport.statistics.decodes == 2)
        }
    }

    @Test("a POST query is loaded, says it passed through, and follows nothing")
    func notCacheableQuery() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            var request = URLRequest(url: origin.url("/search"))
            request.httpMethod = "POST"
            request.httpBody = Data("term=swift".utf8)

            let query = CachedQuery(String.self, for: request, in: transport, decoder: BodyTextDecoder())
            await query.waitForFetches()

            #expect(query.status == .loaded)
            #expect(query.value == "term=swift")
            #expect(query.outcome?.source == .passedThrough(.unsafeMethod))
            #expect(!query.isFollowingChanges)
            #expect(await origin.hits(path: "/search") == 1)
        }
    }
}

/// Decodes a body as its text, whatever it holds.
final class BodyTextDecoder: ResponseDecoding {
    struct NotText: Error {}

    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        guard let text = String(decoding: data, as: UTF8.self) as? Value else { throw NotText() }
        return text
    }
}

/// Registers, now, for the next change of what `query` shows; the returned function waits for it.
@MainActor
func nextChange(of query: CachedQuery<String>) -> () async -> Void {
    let (changes, continuation) = AsyncStream<Void>.makeStream()
    withObservationTracking {
        _ = query.value
    } onChange: {
        continuation.yield()
        continuation.finish()
    }
    return {
        for await _ in changes { return }
    }
}
