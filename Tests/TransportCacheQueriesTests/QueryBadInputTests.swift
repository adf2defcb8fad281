import Foundation
import Testing
import TransportCache
import TransportCacheQueries
import TransportCacheTesting
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Observable queries: bad input")
@MainActor
struct QueryBadInputTests {
    @Test("a request the transport does not cache loads, says so, and follows nothing")
    func notCacheableLoads() async throws {
        let origin = ScriptedOrigin()
        origin.respond(to: articlesURL, method: "POST", with: .init(body: articlesJSON("searched")))
        let transport = makeTransport(origin)
        var request = URLRequest(url: articlesURL)
        request.httpMethod = "POST"

        let query = CachedQuery([Article].self, for: request, in: transport)
        let observed = observe(query)
        await observed.waitForChanges(1)
        await transport.waitForChangeSubscribers(0)

        #expect(
            observed.states == [
                Shown(.loading, nil, fetching: true, nil),
                Shown(.loaded, articles("searched"), .passedThrough(.unsafeMethod)),
            ])
        #expect(!query.isFollowingChanges)
        #expect(origin.callCount == 1)
    }

    @Test("bytes that do not decode show failed with the decoding error, the last good value kept")
    func decodingFailureKeepsTheValue() async throws {
        let origin = ScriptedOrigin()
        origin.respond(
            to: articlesURL, with: .init(headers: fresh, body: articlesJSON("one")),
            .init(headers: fresh, text: "not JSON"))
        let transport = makeTransport(origin)
        _ = try await transport.data(from: articlesURL)
        let query = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        let observed = observe(query)

        await query.refresh()

        #expect(
            observed.states == [
                Shown(.loaded, articles("one"), .memory(.fresh)),
                Shown(.loaded, articles("one"), fetching: true, .memory(.fresh)),
                Shown(.failed, articles("one"), error: "ValueDecodingError decodingFailed", .memory(.fresh)),
            ])
        #expect((query.error as? ValueDecodingError)?.underlyingError is DecodingError)
    }

    @Test("a status that is not a success shows failed, and a later good answer recovers")
    func unacceptableStatusThenRecovery() async throws {
        let origin = ScriptedOrigin()
        origin.respond(to: articlesURL, with: .init(status: 500), .init(headers: fresh, body: articlesJSON("one")))
        let transport = makeTransport(origin)
        let query = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        let observed = observe(query)
        await observed.waitForChanges(1)

        await query.refresh()

        #expect(
            observed.states == [
                Shown(.loading, nil, fetching: true, nil),
                Shown(.failed, nil, error: "ValueDecodingError unacceptableStatus", nil),
                Shown(.failed, nil, error: "ValueDecodingError unacceptableStatus", fetching: true, nil),
                Shown(.loaded, articles("one"), .network(.refresh)),
            ])
    }
}
