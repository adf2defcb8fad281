import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Invalidation and pull-to-refresh")
struct InvalidationTests {
    let url = "https://api.example.com/items/1"

    @Test("invalidate, then a GET fetches anew")
    func invalidateThenGet() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request(url))
        transport.invalidate(request(url))
        let (data, _) = try await transport.data(for: request(url))
        #expect(data.text.contains("call=2"))
        #expect(transport.statistics.invalidations == 1)
    }

    @Test("an endpoint drops every method, query and identity below it, and nothing else")
    func endpointInvalidation() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        let dropped = [
            request("https://api.example.com/items"),
            request("https://api.example.com/items/1?expand=true"),
            request("https://api.example.com/items/2", headers: ["Authorization": "Bearer alice"]),
            request("https://api.example.com/items/2", method: "HEAD"),
        ]
        let kept = [request("https://api.example.com/itemsets"), request("https://other.example.com/items/1")]
        for request in dropped + kept { _ = try await transport.data(for: request) }
        transport.invalidate(.pathPrefix("/items", host: "api.example.com"))
        #expect(transport.statistics.entries == kept.count)
        for request in kept { _ = try await transport.data(for: request) }
        #expect(loader.callCount == dropped.count + kept.count)
    }

    @Test("invalidateAll drops everything")
    func invalidateAll() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        for index in 0..<5 { _ = try await transport.data(for: request("https://example.com/\(index)")) }
        transport.invalidateAll()
        #expect(transport.statistics.entries == 0)
        #expect(transport.statistics.bytesHeld == 0)
    }

    @Test("a fetch in flight across an invalidation answers its callers but does not refill the store")
    func inFlightAcrossInvalidation() async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let early = Task { try await transport.data(for: request(url)) }
        await loader.waitForCalls(1)
        transport.invalidate(request(url))
        loader.openGate()
        #expect(try await early.value.0.text.contains("call=1"))
        #expect(transport.statistics.stores == 0)
        let (data, _) = try await transport.data(for: request(url))
        #expect(data.text.contains("call=2"))
    }

    @Test("a request after an invalidation does not join the fetch that started before it")
    func noJoinAcrossInvalidation() async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let early = Task { try await transport.refresh(request(url)) }
        await loader.waitForCalls(1)
        transport.invalidate(request(url))
        let late = Task { try await transport.refresh(request(url)) }
        await loader.waitForCalls(2)
        loader.openGate()
        #expect(try await early.value.0.text.contains("call=1"))
        #expect(try await late.value.0.text.contains("call=2"))
        // Only the later answer was stored.
        #expect(try await transport.data(for: request(url)).0.text.contains("call=2"))
        #expect(loader.callCount == 2)
    }

    @Test("refreshes made while a refresh is in flight share the next fetch: each answer is fetched after its call")
    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    func concurrentRefreshes() async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let first = startCall { try await transport.refresh(request(url)) }
        await loader.waitForCalls(1)
        let later = startCalls(3) { try await transport.refresh(request(url)) }
        // They wait for the fetch after the one in flight, which was sent before they were made:
        // the first of them starts it, the others join it.
        #expect(transport.pendingWork.waiters == 4)
        #expect(transport.statistics.coalescedJoins == 2)
        #expect(loader.callCount == 1)
        loader.release(1)
        #expect(try await first.value.0.text.hasSuffix("call=1"))
        await loader.waitForCalls(2)
        loader.openGate()
        for refresh in later { #expect(try await refresh.value.0.text.hasSuffix("call=2")) }
        #expect(try await transport.data(for: request(url)).0.text.hasSuffix("call=2"))
        #expect(loader.callCount == 2)
        #expect(transport.statistics.networkFetches == 2)
    }

    @Test("a refresh cancelled while it waits for the next fetch leaves at once; the others still share it")
    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    func cancelledWaitingRefresh() async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let first = startCall { try await transport.refresh(request(url)) }
        await loader.waitForCalls(1)
        let cancelled = startCall { try await transport.refresh(request(url)) }
        let kept = startCall { try await transport.refresh(request(url)) }
        #expect(transport.pendingWork.waiters == 3)
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        loader.release(1)
        #expect(try await first.value.0.text.hasSuffix("call=1"))
        await loader.waitForCalls(2)
        loader.openGate()
        #expect(try await kept.value.0.text.hasSuffix("call=2"))
        #expect(loader.callCount == 2)
        #expect(transport.pendingWork == (0, 0, 0))
    }

    @Test("when the first refresh's caller leaves, the refreshes waiting behind it are sent at once")
    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    func abandonedRefreshSendsTheNext() async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let first = startCall { try await transport.refresh(request(url)) }
        await loader.waitForCalls(1)
        let waiting = startCall { try await transport.refresh(request(url)) }
        #expect(transport.pendingWork.waiters == 2)
        first.cancel()
        await #expect(throws: CancellationError.self) { try await first.value }
        await loader.waitForCalls(2)
        loader.openGate()
        #expect(try await waiting.value.0.text.hasSuffix("call=2"))
        #expect(transport.pendingWork == (0, 0, 0))
    }

    @Test("a refresh made after an invalidation joins the refreshes already waiting for the next fetch")
    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    func invalidationWhileRefreshesWait() async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let first = startCall { try await transport.refresh(request(url)) }
        await loader.waitForCalls(1)
        let waiting = startCall { try await transport.refresh(request(url)) }
        transport.invalidate(request(url))
        let afterwards = startCall { try await transport.refresh(request(url)) }
        #expect(transport.statistics.coalescedJoins == 1)
        loader.release(1)
        #expect(try await first.value.0.text.hasSuffix("call=1"))
        await loader.waitForCalls(2)
        loader.openGate()
        #expect(try await waiting.value.0.text.hasSuffix("call=2"))
        #expect(try await afterwards.value.0.text.hasSuffix("call=2"))
        // Sent after the invalidation, the next fetch stored its answer.
        #expect(try await transport.data(for: request(url)).0.text.hasSuffix("call=2"))
        #expect(loader.callCount == 2)
    }

    @Test("a refresh does not join an ordinary fetch already in flight; it fetches after it was asked")
    func refreshDoesNotJoinOrdinaryFetch() async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let ordinary = Task { try await transport.data(for: request(url)) }
        await loader.waitForCalls(1)
        let refresh = Task { try await transport.refresh(request(url)) }
        await loader.waitForCalls(2)
        loader.openGate()
        #expect(try await ordinary.value.0.text.contains("call=1"))
        #expect(try await refresh.value.0.text.contains("call=2"))
        // The older ordinary fetch did not overwrite the refresh's answer.
        #expect(try await transport.data(for: request(url)).0.text.contains("call=2"))
    }

    @Test("a refresh reloads a stored entry and stores the new answer")
    func refreshReplaces() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request(url))
        let (fresh, _) = try await transport.refresh(request(url))
        #expect(fresh.text.contains("call=2"))
        #expect(try await transport.data(for: request(url)).0 == fresh)
        #expect(loader.callCount == 2)
    }
}
