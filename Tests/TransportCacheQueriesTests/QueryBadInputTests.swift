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
    @Test("a request the transport does not cache loads, says so, and follows nothing from its initialiser on")
    func notCacheableLoads() async throws {
        let origin = ScriptedOrigin(gated: true)
        origin.respond(to: articlesURL, method: "POST", with: .init(body: articlesJSON("searched")))
        let transport = makeTransport(origin)

        let query = CachedQuery([Article].self, for: articlesPOST, in: transport)
        let observed = observe(query)
        await origin.waitForCalls(1)
        // The answer is held at the gate: nothing was subscribed to while it is awaited.
        #expect(!query.isFollowingChanges)
        #expect(transport.statistics.subscribers == 0)
        origin.openGate()
        await observed.waitForChanges(1)

        #expect(
            observed.states == [
                Shown(.loading, nil, fetching: true, nil),
                Shown(.loaded, articles("searched"), .passedThrough(.unsafeMethod)),
            ])
        #expect(!query.isFollowingChanges)
        #expect(transport.statistics.subscribers == 0)
        #expect(origin.callCount == 1)
    }

    @Test("a POST to a query endpoint follows changes from its initialiser on, and from memory at once")
    func queryEndpointFollows() async throws {
        let origin = ScriptedOrigin()
        origin.respond(to: articlesURL, method: "POST", with: .init(headers: fresh, body: articlesJSON("searched")))
        let transport = makeTransport(origin) { $0.network.queryEndpoints = [.url(articlesURL)] }

        let query = CachedQuery([Article].self, for: articlesPOST, in: transport)
        #expect(query.isFollowingChanges)
        await query.waitForFetches()
        #expect(shown(query) == Shown(.loaded, articles("searched"), .network(.noEntry)))
        let held = CachedQuery([Article].self, for: articlesPOST, in: transport)
        #expect(held.isFollowingChanges)
        let observed = [query, held].map(observe)

        try transport.store(ProvisionalAnswer(for: articlesPOST, value: articles("written")))
        for states in observed { await states.waitForChanges(1) }

        #expect(observed.allSatisfy { $0.states.map(\.value) == [articles("searched"), articles("written")] })
        #expect(origin.callCount == 1)
    }

    @Test("a request of another scheme shows a pass-through outcome and follows nothing from its initialiser on")
    func otherSchemeLoads() async throws {
        // A `data:` URL: URLSession answers it in the process, and its answer is not HTTP.
        let transport = CachedTransport()
        let url = URL(string: "data:application/json;base64," + articlesJSON("inline").base64EncodedString())!

        let query = CachedQuery([Article].self, for: URLRequest(url: url), in: transport)
        #expect(!query.isFollowingChanges)
        #expect(transport.statistics.subscribers == 0)
        await query.waitForFetches()

        #expect(shown(query) == Shown(.loaded, articles("inline"), .passedThrough(.notHTTP)))
        #expect(!query.isFollowingChanges)
        #expect(transport.statistics.networkFetches == 1)
    }

    @Test("every answer sets the outcome, a failed one too: a 500 after a good answer, then bytes that do not decode")
    func failedAnswersSetTheOutcome() async throws {
        let (origin, transport) = try await transportHoldingOne()
        origin.respond(to: articlesURL, with: .init(status: 500), .init(headers: fresh, text: "not JSON"))
        let query = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        #expect(query.outcome?.source == .memory(.fresh))

        await query.refresh()
        #expect(query.status == .failed)
        #expect(query.outcome?.source == .network(.refresh))
        #expect(query.outcome?.storage == .notStored(.status(500)))

        await query.refresh()
        #expect(query.status == .failed)
        #expect(query.outcome?.source == .network(.refresh))
        #expect(query.outcome?.storage == .stored(changedBytes: true))
        #expect(query.value == articles("one"))
        #expect(origin.callCount == 3)
    }

    /// A query of `articlesURL` whose first answer is `reply`, once that answer is shown; a refresh
    /// then answers the articles "one".
    func query(firstAnswering reply: ScriptedOrigin.Reply) async -> CachedQuery<[Article]> {
        let origin = ScriptedOrigin()
        origin.respond(to: articlesURL, with: reply, .init(headers: fresh, body: articlesJSON("one")))
        let query = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: makeTransport(origin))
        await query.waitForFetches()
        return query
    }

    @Test("a failure tells the server's refusal from bad data and from no answer, and an answer clears it")
    func failureSortsTheError() async throws {
        let refused = await query(firstAnswering: .init(status: 404))
        #expect(refused.failure == .status(404))
        #expect(refused.failure?.statusCode == 404)
        let unreadable = await query(firstAnswering: .init(headers: fresh, text: "not JSON"))
        #expect(unreadable.failure == .invalidData)
        #expect(unreadable.failure?.statusCode == nil)
        let unanswered = await query(firstAnswering: .failure(.notConnectedToInternet))
        let error = try #require(unanswered.error as? URLError)
        #expect(error.code == .notConnectedToInternet)
        #expect(unanswered.failure == .network(error))

        await refused.refresh()
        #expect(refused.failure == nil)
        #expect(refused.value == articles("one"))
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
                Shown(.failed, articles("one"), error: "ValueDecodingError decodingFailed", .network(.refresh)),
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
                Shown(.failed, nil, error: "ValueDecodingError unacceptableStatus", .network(.noEntry)),
                Shown(.failed, nil, error: "ValueDecodingError unacceptableStatus", fetching: true, .network(.noEntry)),
                Shown(.loaded, articles("one"), .network(.refresh)),
            ])
    }

    /// A stored answer that gives no `[Article]`.
    enum StoredFailure: String, CaseIterable, CustomTestStringConvertible, Sendable {
        /// Bytes that do not decode, fetched from the origin.
        case fetchedBytes
        /// Bytes that do not decode, written by the app.
        case writtenBytes
        /// A `404` the origin says is fresh for a minute, stored by a transport configured to.
        case fetchedRefusal

        var testDescription: String { rawValue }

        /// The error's code and what a screen tells from it.
        var expected: (code: ValueDecodingError.Code, failure: QueryFailure) {
            switch self {
            case .fetchedBytes, .writtenBytes: (.decodingFailed, .invalidData)
            case .fetchedRefusal: (.unacceptableStatus, .status(404))
            }
        }

        /// Stores the answer for `request` in `transport`: fetched from its origin, scripted by
        /// ``script(_:)``, or written.
        func store(for request: URLRequest, in transport: CachedTransport) async throws {
            switch self {
            case .fetchedBytes, .fetchedRefusal: _ = try await transport.data(for: request)
            case .writtenBytes: try transport.store(ProvisionalAnswer(for: request, data: Data("not JSON".utf8)))
            }
        }

        /// Scripts `origin` to answer `articlesURL` with this failure first, then the articles "one".
        func script(_ origin: ScriptedOrigin) {
            let first: ScriptedOrigin.Reply =
                switch self {
                case .fetchedBytes, .writtenBytes: .init(headers: fresh, text: "not JSON")
                case .fetchedRefusal: .init(status: 404, headers: fresh, text: "no articles")
                }
            origin.respond(to: articlesURL, with: first, .init(headers: fresh, body: articlesJSON("one")))
        }
    }

    @Test(
        "an entry in memory that gives no value shows failed in the first frame, from memory, and sends nothing",
        arguments: IdentityConfiguration.allCases, StoredFailure.allCases)
    func storedFailureShowsInTheFirstFrame(identity: IdentityConfiguration, stored: StoredFailure) async throws {
        let origin = ScriptedOrigin()
        stored.script(origin)
        let transport = identity.transport(origin) { $0.storage.storableStatusCodes.insert(404) }
        let request = identity.request(articlesURL)
        try await stored.store(for: request, in: transport)
        let sent = origin.callCount
        #expect(transport.statistics.entries == 1)

        let query = CachedQuery([Article].self, for: request, in: transport)
        let observed = observe(query)

        #expect(query.status == .failed)
        let error = try #require(query.error as? ValueDecodingError)
        #expect(error.code == stored.expected.code)
        #expect(query.failure == stored.expected.failure)
        #expect(query.outcome?.isFromMemory == true)
        #expect(query.outcome?.source == .memory(.fresh))
        #expect(!query.isFetching)
        #expect(query.value == nil)
        #expect(query.isFollowingChanges)
        await query.waitForFetches()
        #expect(observed.changes == 0)
        #expect(origin.callCount == sent)
    }

    @Test("a query that starts failed from memory shows its URL's next change, and a refresh recovers it")
    func storedFailureFollowsAndRefreshes() async throws {
        let origin = ScriptedOrigin()
        StoredFailure.fetchedBytes.script(origin)
        let transport = makeTransport(origin)
        let request = URLRequest(url: articlesURL)
        try await StoredFailure.fetchedBytes.store(for: request, in: transport)
        let query = CachedQuery([Article].self, for: request, in: transport)
        let observed = observe(query)

        try transport.store(ProvisionalAnswer(for: request, value: articles("written")))
        await observed.waitForChanges(1)
        await query.refresh()

        #expect(
            observed.states == [
                Shown(.failed, nil, error: "ValueDecodingError decodingFailed", .memory(.fresh)),
                Shown(.loaded, articles("written"), .memory(.fresh)),
                Shown(.loaded, articles("written"), fetching: true, .memory(.fresh)),
                Shown(.loaded, articles("one"), .network(.refresh)),
            ])
        #expect(origin.callCount == 2)
    }

    @Test("a request the app's adapter refuses is fetched as a miss, and shows the adapter's error without an outcome")
    func adapterErrorIsFetched() async throws {
        struct Refused: Error {}
        let origin = ScriptedOrigin()
        let transport = makeTransport(origin) { $0.identity.requestAdapters = [.keyed { _ in throw Refused() }] }

        let query = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        let observed = observe(query)
        #expect(shown(query) == Shown(.loading, nil, fetching: true, nil))
        await query.waitForFetches()

        #expect(observed.states.last == Shown(.failed, nil, error: "Refused", nil))
        #expect(origin.callCount == 0)
    }

    @Test("a GET with its own conditions is never stored, so its query never follows changes")
    func conditionalGETNeverFollows() async throws {
        let origin = ScriptedOrigin()
        origin.respond(to: articlesURL, with: .init(headers: fresh, body: articlesJSON("conditional")))
        let transport = makeTransport(origin)
        var conditional = URLRequest(url: articlesURL)
        conditional.setValue("\"v1\"", forHTTPHeaderField: "If-None-Match")

        let query = CachedQuery([Article].self, for: conditional, in: transport)
        #expect(!query.isFollowingChanges)
        #expect(transport.statistics.subscribers == 0)
        await query.waitForFetches()
        #expect(!query.isFollowingChanges)
        #expect(origin.callCount == 1)
    }
}
