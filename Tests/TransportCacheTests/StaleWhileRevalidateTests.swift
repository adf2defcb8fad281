import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Stale-while-revalidate")
struct StaleWhileRevalidateTests {
    let url = "https://api.example.com/feed"

    /// A transport whose entries are fresh for 60 s and then answer for 30 s more while they are
    /// revalidated; the loader holds every call after the first at its gate.
    func setUp(respond: @escaping ScriptedOrigin.Responder = ScriptedOrigin.ok()) -> (
        CachedTransport, ScriptedOrigin, TestClock
    ) {
        let first = Locked(true)
        let loader = ScriptedOrigin(
            gated: true, respond: respond,
            holding: { _ in
                first.withLock { isFirst in
                    defer { isFirst = false }
                    return !isFirst
                }
            })
        let clock = TestClock()
        let transport = makeTransport(loader: loader, clock: clock) {
            $0.freshness.maximumAge = .seconds(60)
            $0.freshness.staleWhileRevalidate = .seconds(30)
        }
        return (transport, loader, clock)
    }

    @Test(
        "20 concurrent requests in the window return at once while the origin is held, with one background fetch, then updated"
    )
    func twentyInTheWindow() async throws {
        let (transport, loader, clock) = setUp()
        let (stored, _) = try await transport.data(for: request(url))
        var changes = transport.changes().makeAsyncIterator()
        clock.advance(by: .seconds(70))

        let answers = try await withThrowingTaskGroup(of: (Data, URLResponse).self) { group in
            for _ in 0..<20 { group.addTask { try await transport.data(for: request(url)) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        // Every caller returned while the background fetch is still held at the gate.
        #expect(answers.count == 20)
        for (data, response) in answers {
            #expect(data == stored)
            #expect(response.isRevalidatingAnswer)
            #expect(response.isStaleAnswer)
        }
        await loader.waitForCalls(2)
        #expect(loader.callCount == 2)
        #expect(transport.statistics.backgroundRevalidations == 1)
        #expect(transport.statistics.staleWindowAnswers == 20)

        loader.openGate()
        #expect(await changes.next() == .updated(URL(string: url)!))
        let (fresh, response) = try await transport.data(for: request(url))
        #expect(fresh.text.hasSuffix("call=2"))
        #expect(!response.isStaleAnswer)
        #expect(loader.callCount == 2)
        #expect(transport.pendingWork == (0, 0, 0))
    }

    @Test("past the window a request waits for the new body")
    func pastTheWindow() async throws {
        let (transport, loader, clock) = setUp()
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(91))
        let waiting = Task { try await transport.data(for: request(url)) }
        await loader.waitForCalls(2)
        #expect(transport.pendingWork.waiters == 1)
        loader.openGate()
        let (data, response) = try await waiting.value
        #expect(data.text.hasSuffix("call=2"))
        #expect(!response.isStaleAnswer)
        #expect(transport.statistics.staleWindowAnswers == 0)
    }

    @Test("a fresh entry is not marked and starts no revalidation")
    func freshIsNotStale() async throws {
        let (transport, loader, clock) = setUp()
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(59))
        let (_, response) = try await transport.data(for: request(url))
        #expect(!response.isStaleAnswer)
        #expect(loader.callCount == 1)
    }

    @Test("the background revalidation is conditional, and a 304 restarts the entry's age without updated")
    func conditionalBackgroundRevalidation() async throws {
        let origin = ValidatingOrigin()
        let (transport, loader, clock) = setUp(respond: origin.responder)
        let (stored, _) = try await transport.data(for: request(url))
        clock.advance(by: .seconds(70))
        _ = try await transport.data(for: request(url))
        await loader.waitForCalls(2)
        #expect(loader.calls[1].value(forHTTPHeaderField: "If-None-Match") == ValidatingOrigin.entityTag(version: 1))
        loader.openGate()
        await loader.waitForDeliveredAnswers(2)
        #expect(transport.statistics.notModified == 1)
        let (data, response) = try await transport.data(for: request(url))
        #expect(data == stored)
        #expect(!response.isStaleAnswer)
        #expect(loader.callCount == 2)
    }

    @Test("a failed background revalidation keeps the entry, is counted, and reaches no caller")
    func failedRevalidation() async throws {
        let failing = Locked(false)
        let (transport, loader, clock) = setUp { request, call in
            if failing.withLock({ $0 }) { throw URLError(.notConnectedToInternet) }
            return try ScriptedOrigin.ok()(request, call)
        }
        let (stored, _) = try await transport.data(for: request(url))
        failing.withLock { $0 = true }
        clock.advance(by: .seconds(70))
        let (answer, _) = try await transport.data(for: request(url))
        #expect(answer == stored)
        loader.openGate()
        await loader.waitForDeliveredAnswers(2)
        #expect(transport.statistics.failedBackgroundRevalidations == 1)
        #expect(transport.pendingWork == (0, 0, 0))
        // The entry is kept: the next request in the window is answered from it again.
        let (again, response) = try await transport.data(for: request(url))
        #expect(again == stored)
        #expect(response.isRevalidatingAnswer)
    }

    @Test("an invalidation while the background revalidation is in flight stops it from writing")
    func invalidationStopsWriting() async throws {
        let (transport, loader, clock) = setUp()
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(70))
        _ = try await transport.data(for: request(url))
        await loader.waitForCalls(2)
        transport.invalidate(request(url))
        loader.openGate()
        await loader.waitForDeliveredAnswers(2)
        #expect(transport.pendingWork.fetches == 0)
        #expect(transport.statistics.entries == 0)
        #expect(transport.statistics.failedBackgroundRevalidations == 0)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("a caller that joins the background revalidation and leaves does not cancel it")
    func joinedCallerLeaves() async throws {
        let (transport, loader, clock) = setUp()
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(70))
        _ = try await transport.data(for: request(url))
        await loader.waitForCalls(2)
        let reload = startCall { try await transport.data(for: request(url, policy: .reloadIgnoringLocalCacheData)) }
        #expect(transport.statistics.coalescedJoins == 1)
        reload.cancel()
        #expect(await thrownError { try await reload.value } is CancellationError)
        #expect(loader.cancelledCalls == 0)
        loader.openGate()
        await loader.waitForDeliveredAnswers(2)
        #expect(transport.pendingWork.fetches == 0)
        #expect(try await transport.data(for: request(url)).0.text.hasSuffix("call=2"))
    }

    @Test("per-endpoint windows take precedence over the global one")
    func perEndpointWindow() async throws {
        let loader = echoOrigin()
        let clock = TestClock()
        let transport = makeTransport(loader: loader, clock: clock) {
            $0.freshness.maximumAge = .seconds(60)
            $0.freshness.staleWhileRevalidateWindows = [EndpointSetting(.pathPrefix("/feed"), .seconds(600))]
        }
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request("https://api.example.com/other"))
        clock.advance(by: .seconds(300))
        #expect(try await transport.data(for: request(url)).1.isRevalidatingAnswer)
        #expect(try await !transport.data(for: request("https://api.example.com/other")).1.isStaleAnswer)
    }

    @Test("a window given by the app's predicate is read with no lock held when the revalidation starts")
    func predicateWindowRevalidation() async throws {
        let loader = echoOrigin()
        let clock = TestClock()
        let asked = Locked(0)
        let transport = makeTransport(loader: loader, clock: clock) {
            $0.freshness.maximumAge = .seconds(60)
            // Debug builds stop when a predicate is asked under one of the transport's locks.
            $0.freshness.staleWhileRevalidateWindows = [
                EndpointSetting(
                    .matching { url in
                        asked.withLock { $0 += 1 }
                        return url.path.hasPrefix("/feed")
                    }, .seconds(600))
            ]
        }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(300))
        let before = asked.withLock { $0 }
        #expect(try await transport.data(for: request(url)).1.isRevalidatingAnswer)
        await loader.waitForCalls(2)
        #expect(asked.withLock { $0 } > before)
        await loader.waitForDeliveredAnswers(2)
        #expect(try await transport.data(for: request(url)).0.text.hasSuffix("call=2"))
    }

    @Test("value(_:for:) in the window answers at once and revalidates in the background")
    func valuesInTheWindow() async throws {
        struct Payload: Decodable, Sendable { let call: Int }
        let (transport, loader, clock) = setUp { request, call in
            ScriptedOrigin.Reply(status: 200, body: Data(#"{"call":\#(call)}"#.utf8))
        }
        #expect(try await transport.value(Payload.self, for: request(url)).call == 1)
        clock.advance(by: .seconds(70))
        #expect(try await transport.value(Payload.self, for: request(url)).call == 1)
        await loader.waitForCalls(2)
        loader.openGate()
        await loader.waitForDeliveredAnswers(2)
        #expect(transport.pendingWork.fetches == 0)
        #expect(try await transport.value(Payload.self, for: request(url)).call == 2)
    }

    @Test("a background revalidation is reported with its own reason; a caller that joins it keeps its own")
    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    func backgroundReason() async throws {
        let (transport, loader, clock) = setUp()
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(70))
        var events = transport.events().makeAsyncIterator()
        let (_, stale) = try await transport.data(for: request(url))
        #expect(stale.cacheOutcome?.source == .memory(.staleWhileRevalidate))
        await loader.waitForCalls(2)
        var started: CacheOutcome.FetchReason?
        while started == nil, let event = await events.next() {
            if case .fetchStarted(let reason, _) = event.kind { started = reason }
        }
        #expect(started == .backgroundRevalidation)
        // A reload joins the background revalidation, and says why it went to the network itself.
        let reload = startCall {
            try await transport.response(for: request(url, policy: .reloadIgnoringLocalCacheData))
        }
        #expect(transport.statistics.coalescedJoins == 1)
        loader.openGate()
        let outcome = try await reload.value.2
        #expect(outcome.source == .network(.reloadPolicy))
        #expect(outcome.joinedFetch)
        #expect(loader.callCount == 2)
    }
}
