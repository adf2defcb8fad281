import Foundation
import Testing
@testable import TransportCache
import TransportCacheQueries
import TransportCacheTesting
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Observable queries")
@MainActor
struct QueryTests {
    @Test("a query of a value in memory starts loaded, in its initialiser, with no change to observe")
    func memoryHitStartsLoaded() async throws {
        let (origin, transport) = try await transportHoldingOne()

        let query = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        let observed = observe(query)

        #expect(observed.states == [Shown(.loaded, articles("one"), .memory(.fresh))])
        #expect(query.isFollowingChanges)
        #expect(origin.callCount == 1)
    }

    @Test("many queries of one entry decode it once")
    func manyQueriesDecodeOnce() async throws {
        let (_, transport) = try await transportHoldingOne()

        let queries = (0..<20).map { _ in CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        }

        #expect(queries.allSatisfy { $0.value == articles("one") })
        #expect(transport.statistics.decodes == 1)
    }

    @Test("queries of one URL share one subscription, hear each change once each, and end it with the last")
    func queriesShareOneSubscription() async throws {
        let (_, transport) = try await transportHoldingOne()
        var queries = (0..<100).map { _ in CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        }
        var observed = queries.map(observe)
        #expect(transport.statistics.subscribers == 1)

        try transport.store(ProvisionalAnswer(for: URLRequest(url: articlesURL), value: articles("two")))
        for states in observed { await states.waitForChanges(1) }

        #expect(observed.allSatisfy { $0.states.map(\.value) == [articles("one"), articles("two")] })
        #expect(transport.statistics.decodes == 2)
        // The observers read the queries: they go first.
        observed.removeAll()
        queries.removeAll()
        await transport.waitForChangeSubscribers(0)
    }

    @Test("a query made as the last of its URL is released keeps the subscription, which ends with the last")
    func replacedQueryKeepsTheSubscription() async throws {
        let (_, transport) = try await transportHoldingOne()
        var query: CachedQuery<[Article]>? = CachedQuery(
            [Article].self, for: URLRequest(url: articlesURL), in: transport)
        #expect(transport.statistics.subscribers == 1)

        // Released and made again in one turn of the main actor, as a view made anew is.
        query = nil
        query = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        #expect(transport.statistics.subscribers == 1)

        var observed = query.map(observe)
        try transport.store(ProvisionalAnswer(for: URLRequest(url: articlesURL), value: articles("two")))
        await observed?.waitForChanges(1)
        #expect(observed?.states.map(\.value) == [articles("one"), articles("two")])
        // The observer reads the query: it goes first.
        observed = nil
        query = nil
        await transport.waitForChangeSubscribers(0)
    }

    @Test("a miss shows loading, then the fetched value with its outcome: one change")
    func missLoadsOnce() async throws {
        let origin = ScriptedOrigin(gated: true)
        origin.respond(to: articlesURL, with: .init(headers: fresh, body: articlesJSON("one")))
        let transport = makeTransport(origin)

        let query = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        let observed = observe(query)
        await origin.waitForCalls(1)
        origin.openGate()
        await observed.waitForChanges(1)

        #expect(
            observed.states == [
                Shown(.loading, nil, fetching: true, nil),
                Shown(.loaded, articles("one"), .network(.noEntry)),
            ])
    }

    @Test("a failed first fetch shows failed with its error: one change")
    func failureShowsTheError() async throws {
        let origin = ScriptedOrigin(gated: true)
        origin.respond(to: articlesURL, with: .failure(.notConnectedToInternet))
        let transport = makeTransport(origin)

        let query = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        let observed = observe(query)
        origin.openGate()
        await observed.waitForChanges(1)

        let failed = Shown(
            .failed, nil, error: "URLError \(URLError.Code.notConnectedToInternet.rawValue)",
            .network(.noEntry))
        #expect(observed.states == [Shown(.loading, nil, fetching: true, nil), failed])
    }

    @Test("refresh shows fetching over the kept value, then the new value: two changes")
    func refreshKeepsTheValueWhileFetching() async throws {
        let origin = ScriptedOrigin(gated: true)
        origin.respond(
            to: articlesURL, with: .init(headers: fresh, body: articlesJSON("one")),
            .init(headers: fresh, body: articlesJSON("two")))
        origin.release(1)
        let transport = makeTransport(origin)
        _ = try await transport.data(from: articlesURL)
        let query = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        let observed = observe(query)

        let refresh = Task { await query.refresh() }
        await origin.waitForCalls(2)
        #expect(observed.states.last == Shown(.loaded, articles("one"), fetching: true, .memory(.fresh)))
        origin.release(2)
        await refresh.value

        #expect(
            observed.states == [
                Shown(.loaded, articles("one"), .memory(.fresh)),
                Shown(.loaded, articles("one"), fetching: true, .memory(.fresh)),
                Shown(.loaded, articles("two"), .network(.refresh)),
            ])
    }

    @Test("a refresh of one query shows in another query of the same URL: one change, no fetch")
    func anotherQueryRefreshes() async throws {
        let origin = ScriptedOrigin()
        origin.respond(
            to: articlesURL, with: .init(headers: fresh, body: articlesJSON("one")),
            .init(headers: fresh, body: articlesJSON("two")))
        let transport = makeTransport(origin)
        _ = try await transport.data(from: articlesURL)
        let shown = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        let refreshing = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        let observed = observe(shown)

        await refreshing.refresh()
        await observed.waitForChanges(1)

        #expect(
            observed.states == [
                Shown(.loaded, articles("one"), .memory(.fresh)),
                Shown(.loaded, articles("two"), .memory(.fresh)),
            ])
        #expect(origin.callCount == 2)
        #expect(transport.statistics.decodes == 2)
    }

    @Test("a change heard while another caller decodes the new entry shows its value once, with no fetch shown")
    func changeHeardDuringAnotherDecode() async throws {
        let origin = ScriptedOrigin()
        origin.respond(
            to: articlesURL, with: .init(headers: fresh, body: articlesJSON("one")),
            .init(headers: fresh, body: articlesJSON("two")))
        let waiting = try await QueryWaitingForAnotherDecode(origin)

        #expect(waiting.releaseTheOtherDecode() == articles("two"))
        await waiting.observed.waitForChanges(1)

        #expect(
            waiting.observed.states == [
                Shown(.loaded, articles("one"), .memory(.fresh)),
                Shown(.loaded, articles("two"), .memory(.fresh)),
            ])
        #expect(origin.callCount == 2)
        #expect(waiting.transport.statistics.decodes == 2)
    }

    @Test("a value waited for from another caller's decode never replaces a newer one the query fetched")
    func olderWaitedValueIsNotShown() async throws {
        let origin = ScriptedOrigin()
        origin.respond(
            to: articlesURL, with: .init(headers: fresh, body: articlesJSON("one")),
            .init(headers: fresh, body: articlesJSON("two")), .init(headers: fresh, body: articlesJSON("three")))
        let waiting = try await QueryWaitingForAnotherDecode(origin)

        // The query refreshes while it waits for "two": "three" is shown, and "two" must not follow.
        await waiting.query.refresh()
        #expect(waiting.releaseTheOtherDecode() == articles("two"))
        await waiting.query.waitForFetches()

        #expect(
            waiting.observed.states == [
                Shown(.loaded, articles("one"), .memory(.fresh)),
                Shown(.loaded, articles("one"), fetching: true, .memory(.fresh)),
                Shown(.loaded, articles("three"), .network(.refresh)),
            ])
        #expect(origin.callCount == 3)
    }

    @Test("an optimistic update shows at once, and its rollback restores the value: two changes")
    func optimisticUpdateAndRollback() async throws {
        let (origin, transport) = try await transportHoldingOne()
        let query = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        let observed = observe(query)

        var thrown: (any Error)?
        do {
            _ = try await transport.optimisticUpdate(
                [try ProvisionalAnswer(for: URLRequest(url: articlesURL), value: articles("one", "draft"))],
                write: {
                    await observed.waitForChanges(1)
                    throw URLError(.timedOut)
                })
        } catch {
            thrown = error
        }
        await observed.waitForChanges(2)

        #expect((thrown as? URLError)?.code == .timedOut)
        #expect(
            observed.states == [
                Shown(.loaded, articles("one"), .memory(.fresh)),
                Shown(.loaded, articles("one", "draft"), .memory(.fresh)),
                Shown(.loaded, articles("one"), .memory(.fresh)),
            ])
        #expect(origin.callCount == 1)
    }

    @Test("a local write shows in the query: one change")
    func localWriteShows() async throws {
        let (_, transport) = try await transportHoldingOne()
        let query = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        let observed = observe(query)

        try transport.store(ProvisionalAnswer(for: URLRequest(url: articlesURL), value: articles("written")))
        await observed.waitForChanges(1)

        #expect(observed.states.map(\.value) == [articles("one"), articles("written")])
    }

    @Test("an invalidation makes an observed query fetch again: two changes")
    func invalidationRefetches() async throws {
        let origin = ScriptedOrigin(gated: true)
        origin.respond(
            to: articlesURL, with: .init(headers: fresh, body: articlesJSON("one")),
            .init(headers: fresh, body: articlesJSON("two")))
        origin.release(1)
        let transport = makeTransport(origin)
        _ = try await transport.data(from: articlesURL)
        let query = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        let observed = observe(query)

        transport.invalidate(URLRequest(url: articlesURL))
        await origin.waitForCalls(2)
        origin.release(2)
        await observed.waitForChanges(2)

        #expect(
            observed.states == [
                Shown(.loaded, articles("one"), .memory(.fresh)),
                Shown(.loaded, articles("one"), fetching: true, .memory(.fresh)),
                Shown(.loaded, articles("two"), .network(.invalidated)),
            ])
    }

    @Test("a query released while its first fetch is in flight cancels it and stops following")
    func releaseCancelsTheFetch() async throws {
        let origin = ScriptedOrigin(gated: true)
        origin.respond(to: articlesURL, with: .init(headers: fresh, body: articlesJSON("one")))
        let transport = makeTransport(origin)
        var query: CachedQuery<[Article]>? = CachedQuery(
            [Article].self, for: URLRequest(url: articlesURL), in: transport)
        weak let released = query
        await origin.waitForCalls(1)
        await transport.waitForChangeSubscribers(1)

        query = nil

        await origin.waitForCancelledCalls(1)
        await transport.waitForChangeSubscribers(0)
        #expect(released == nil)
        #expect(origin.cancelledCalls == 1)
    }

    @Test("stop cancels the first fetch and leaves the query idle: one change")
    func stopLeavesIdle() async throws {
        let origin = ScriptedOrigin(gated: true)
        origin.respond(to: articlesURL, with: .init(headers: fresh, body: articlesJSON("one")))
        let transport = makeTransport(origin)
        let query = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        let observed = observe(query)
        await origin.waitForCalls(1)

        query.stop()
        await origin.waitForCancelledCalls(1)
        await transport.waitForChangeSubscribers(0)

        #expect(observed.states == [Shown(.loading, nil, fetching: true, nil), Shown(.idle, nil, nil)])
        #expect(!query.isFollowingChanges)
    }

    @Test("refresh on a query stopped before its first answer sends one request, the refresh's")
    func refreshAfterStopSendsOneRequest() async throws {
        let origin = ScriptedOrigin(gated: true)
        origin.respond(to: articlesURL, with: .init(headers: fresh, body: articlesJSON("one")))
        let transport = makeTransport(origin)
        let query = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        await origin.waitForCalls(1)
        query.stop()
        await origin.waitForCancelledCalls(1)
        let observed = observe(query)

        origin.openGate()
        await query.refresh()
        // Any other fetch the refresh started ends here too, and would have reached the origin.
        await query.waitForFetches()

        #expect(
            observed.states == [
                Shown(.idle, nil, nil), Shown(.loading, nil, fetching: true, nil),
                Shown(.loaded, articles("one"), .network(.refresh)),
            ])
        #expect(query.isFollowingChanges)
        #expect(origin.callCount == 2)
    }
}
