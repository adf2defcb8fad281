import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Revalidating what is held: on request, while watched, by polling")
struct RevalidateTests {
    static let base = "https://api.example.com"

    /// An origin whose resources each have a version, answering 200 with an `ETag` or a `304` to
    /// a matching `If-None-Match`.
    final class VersionedOrigin: Sendable {
        let versions = Locked([String: Int]())
        let origin: ScriptedOrigin

        init(gated: Bool = false) {
            let versions = versions
            origin = ScriptedOrigin(gated: gated) { request, _ in
                let path = request.url!.path
                let version = versions.withLock { $0[path, default: 1] }
                let tag = "\"\(path)-\(version)\""
                if request.value(forHTTPHeaderField: "If-None-Match") == tag {
                    return .init(status: 304, headers: ["ETag": tag])
                }
                return .init(headers: ["ETag": tag], text: "\(path) version \(version)")
            }
        }

        func bump(_ path: String) { versions.withLock { $0[path, default: 1] += 1 } }

        var conditionalCalls: [String] {
            origin.calls.filter { $0.value(forHTTPHeaderField: "If-None-Match") != nil }.map { $0.url!.path }
        }
    }

    func load(_ transport: CachedTransport, _ paths: [String]) async throws {
        for path in paths { _ = try await transport.data(for: request(Self.base + path)) }
    }

    @Test("revalidate(_:) asks the origin to confirm the endpoint's entries only, and announces only changed bytes")
    func revalidateEndpoint() async throws {
        let versioned = VersionedOrigin()
        let transport = makeTransport(loader: versioned.origin) {
            $0.stayingCurrent.minimumRevalidationInterval = .zero
        }
        try await load(transport, ["/articles/1", "/articles/2", "/users/1"])
        let changes = transport.changes()
        versioned.bump("/articles/2")

        let summary = await transport.revalidate(.pathPrefix("/articles"))

        #expect(summary == RevalidationSummary(revalidated: 2, changed: 1))
        #expect(Set(versioned.conditionalCalls) == ["/articles/1", "/articles/2"])
        #expect(transport.statistics.notModified == 1)
        #expect(transport.statistics.revalidations == 2)
        transport.invalidateAll()
        var iterator = changes.makeAsyncIterator()
        #expect(await iterator.next() == .updated(URL(string: Self.base + "/articles/2")!))
        #expect(await iterator.next() == .cleared)
        #expect(try await transport.data(for: request(Self.base + "/users/1")).0.text == "/users/1 version 1")
    }

    @Test("revalidate(_:) asks about exactly the entries an invalidation of the same endpoint drops")
    func revalidateSelectsAsInvalidation() async throws {
        let versioned = VersionedOrigin()
        let transport = makeTransport(loader: versioned.origin) {
            $0.stayingCurrent.minimumRevalidationInterval = .zero
        }
        let urls = [
            "https://api.example.com/articles", "https://api.example.com/articles/1",
            "https://api.example.com/articles/1?page=2", "https://api.example.com/articles/",
            "https://api.example.com/articlesets",
            "https://api.example.com/caf%C3%A9/menu", "https://api.example.com/",
            "https://other.example.com/articles/1",
            "https://other.example.com:8443/articles/2",
        ]
        for url in urls { _ = try await transport.data(for: request(url)) }
        let endpoints: [Endpoint] = [
            .pathPrefix("/articles"), .pathPrefix("/articles/"), .pathPrefix("/articles", host: "other.example.com"),
            .pathPrefix("/café"), .pathPrefix("/"), .host("OTHER.example.com"), .host("none.example.com"),
            .url(URL(string: "https://api.example.com/articles/1?page=2")!),
            .url(URL(string: "https://api.example.com/x")!),
            .matching { $0.path.hasSuffix("/1") },
        ]
        for endpoint in endpoints {
            let before = versioned.origin.calls.count
            let summary = await transport.revalidate(endpoint)
            let asked = versioned.origin.calls[before...].map { URLNormalization.normalized($0.url!)! }
            let expected = urls.filter { endpoint.matches(URL(string: $0)!) }.map {
                URLNormalization.normalized(URL(string: $0)!)!
            }
            #expect(asked.sorted() == expected.sorted(), "\(endpoint)")
            #expect(summary.revalidated == expected.count)
        }
    }

    @Test("a revalidation sends the request that fetched the entry, every header included, made conditional")
    func sendsTheOriginalRequest() async throws {
        let versioned = VersionedOrigin()
        let transport = makeTransport(loader: versioned.origin) {
            $0.stayingCurrent.minimumRevalidationInterval = .zero
        }
        _ = try await transport.data(
            for: request(Self.base + "/me", headers: ["X-Api-Key": "k1", "Authorization": "Bearer a"]))
        await transport.revalidateAll()
        let sent = try #require(versioned.origin.calls.last)
        #expect(sent.value(forHTTPHeaderField: "X-Api-Key") == "k1")
        #expect(sent.value(forHTTPHeaderField: "Authorization") == "Bearer a")
        #expect(sent.value(forHTTPHeaderField: "If-None-Match") == "\"/me-1\"")
    }

    @Test("entries stored or confirmed within the minimum interval are skipped")
    func throttle() async throws {
        let clock = TestClock()
        let versioned = VersionedOrigin()
        let transport = makeTransport(loader: versioned.origin, clock: clock) {
            $0.stayingCurrent.minimumRevalidationInterval = .seconds(5)
        }
        try await load(transport, ["/a", "/b"])

        #expect(await transport.revalidateAll() == RevalidationSummary(skipped: 2))
        clock.advance(by: .seconds(5))
        #expect(await transport.revalidateAll() == RevalidationSummary(revalidated: 2))
        // The 304s restarted both entries' age.
        #expect(await transport.revalidateAll() == RevalidationSummary(skipped: 2))
        #expect(versioned.origin.callCount == 4)
    }

    @Test("at most the configured number run at once, and every entry is revalidated once")
    func concurrencyLimit() async throws {
        let versioned = VersionedOrigin()
        let transport = makeTransport(loader: versioned.origin) {
            $0.stayingCurrent.minimumRevalidationInterval = .zero
            $0.stayingCurrent.maximumConcurrentRevalidations = 3
        }
        let paths = (1...10).map { "/item/\($0)" }
        try await load(transport, paths)
        versioned.origin.closeGate()

        let revalidation = Task { await transport.revalidateAll() }
        await versioned.origin.waitForCalls(13)
        #expect(transport.pendingWork.fetches == 3)
        for call in 11...20 {
            versioned.origin.release(call)
            await versioned.origin.waitForCalls(min(call + 3, 20))
            #expect(transport.pendingWork.fetches <= 3)
        }
        #expect(await revalidation.value == RevalidationSummary(revalidated: 10))
        #expect(versioned.conditionalCalls.sorted() == paths.sorted())
    }

    @Test("the limit holds over every revalidation under way, not per call")
    func limitAcrossCalls() async throws {
        let versioned = VersionedOrigin()
        let transport = makeTransport(loader: versioned.origin) {
            $0.stayingCurrent.minimumRevalidationInterval = .zero
            $0.stayingCurrent.maximumConcurrentRevalidations = 2
        }
        try await load(transport, (1...3).map { "/a/\($0)" } + (1...3).map { "/b/\($0)" })
        versioned.origin.closeGate()

        let first = Task { await transport.revalidate(.pathPrefix("/a")) }
        let second = Task { await transport.revalidate(.pathPrefix("/b")) }
        await versioned.origin.waitForCalls(8)
        #expect(transport.pendingWork.fetches == 2)
        for call in 7...12 {
            versioned.origin.release(call)
            await versioned.origin.waitForCalls(min(call + 2, 12))
            #expect(transport.pendingWork.fetches <= 2)
        }
        #expect(await first.value == RevalidationSummary(revalidated: 3))
        #expect(await second.value == RevalidationSummary(revalidated: 3))
    }

    @Test("with staleIfError, a revalidation that cannot reach the origin still counts as failed")
    func failureWithStaleIfError() async throws {
        let origin = ScriptedOrigin()
        let url = URL(string: Self.base + "/offline")!
        origin.respond(
            to: url, with: .init(headers: ["ETag": "\"1\""], text: "kept"), .failure(.notConnectedToInternet))
        let transport = makeTransport(loader: origin) {
            $0.stayingCurrent.minimumRevalidationInterval = .zero
            $0.freshness.staleIfError = true
        }
        _ = try await transport.data(from: url)
        #expect(await transport.revalidateAll() == RevalidationSummary(revalidated: 1, failed: 1))
        #expect(transport.statistics.staleAnswers == 0)
    }

    @Test("a revalidation shares a fetch of its key already in flight")
    func sharesFetchInFlight() async throws {
        let versioned = VersionedOrigin()
        let transport = makeTransport(loader: versioned.origin) {
            $0.stayingCurrent.minimumRevalidationInterval = .zero
        }
        try await load(transport, ["/shared"])
        versioned.origin.closeGate()
        let reload = Task {
            try await transport.data(for: request(Self.base + "/shared", policy: .reloadIgnoringLocalCacheData))
        }
        await versioned.origin.waitForCalls(2)

        let revalidation = Task { await transport.revalidateAll() }
        // A revalidation reaches the fetch in a child task of its own: wait for its join.
        await transport.waitForCoalescedJoins(1)
        versioned.origin.openGate()

        #expect(await revalidation.value == RevalidationSummary(revalidated: 1))
        _ = try await reload.value
        #expect(versioned.origin.callCount == 2)
    }

    @Test("a failed revalidation keeps the entry and is counted as failed")
    func failureKeepsEntry() async throws {
        let origin = ScriptedOrigin()
        let url = URL(string: Self.base + "/flaky")!
        origin.respond(
            to: url, with: .init(headers: ["ETag": "\"1\""], text: "kept"), .failure(.notConnectedToInternet))
        let transport = makeTransport(loader: origin) { $0.stayingCurrent.minimumRevalidationInterval = .zero }
        _ = try await transport.data(from: url)
        #expect(await transport.revalidateAll() == RevalidationSummary(revalidated: 1, failed: 1))
        #expect(try await transport.data(from: url).0.text == "kept")
        #expect(origin.callCount == 2)
    }

    @Test("revalidateWatched() revalidates what changes(for:) and values streams watch, nothing else")
    func watched() async throws {
        let versioned = VersionedOrigin()
        let transport = makeTransport(loader: versioned.origin) {
            $0.stayingCurrent.minimumRevalidationInterval = .zero
        }
        try await load(transport, ["/watched", "/listed/1", "/other"])
        #expect(await transport.revalidateWatched() == RevalidationSummary())

        let all = transport.changes()
        let byURL = transport.changes(for: .url(URL(string: Self.base + "/watched")!))
        let byPrefix = transport.changes(for: .pathPrefix("/listed"))
        let summary = await transport.revalidateWatched()

        #expect(summary == RevalidationSummary(revalidated: 2))
        #expect(Set(versioned.conditionalCalls) == ["/watched", "/listed/1"])
        _ = (all, byURL, byPrefix)
    }

    // MARK: - Polling

    @Test("a watched endpoint with an interval is revalidated each interval; polling stops with the last watcher")
    func polling() async throws {
        let clock = TestClock()
        let versioned = VersionedOrigin()
        let url = URL(string: Self.base + "/live")!
        let transport = makeTransport(loader: versioned.origin, clock: clock) {
            $0.stayingCurrent.refreshIntervals = [EndpointSetting(.pathPrefix("/live"), .seconds(1))]
        }
        _ = try await transport.data(from: url)
        var first: AsyncStream<CacheChange>? = transport.changes(for: .url(url))
        var second: AsyncStream<CacheChange>? = transport.changes(for: .url(url))
        #expect(transport.poller.polledEndpoints == 1)

        for tick in 1...10 {
            await clock.waitForSleepers(1)
            clock.advance(by: .seconds(1))
            await versioned.origin.waitForCalls(1 + tick)
        }
        await clock.waitForSleepers(1)
        // Two watchers, one poll per tick; every one conditional and unchanged.
        #expect(versioned.origin.callCount == 11)
        #expect(versioned.conditionalCalls.count == 10)
        #expect(transport.statistics.notModified == 10)

        first = nil
        #expect(transport.poller.polledEndpoints == 1)
        second = nil
        _ = (first, second)
        #expect(transport.poller.polledEndpoints == 0)
        // Dropping the last stream cancelled its polling, and the wait with it.
        #expect(clock.sleepers == 0)
        clock.advance(by: .seconds(10))
        #expect(versioned.origin.callCount == 11)
    }

    @Test("a poll that brings new bytes reaches a values stream")
    func pollUpdatesValues() async throws {
        let clock = TestClock()
        let versioned = VersionedOrigin()
        let url = URL(string: Self.base + "/score")!
        let transport = makeTransport(loader: versioned.origin, clock: clock) {
            $0.stayingCurrent.refreshIntervals = [EndpointSetting(.url(url), .seconds(30))]
        }
        let decoder = TextDecoder()
        var values = transport.values(String.self, for: URLRequest(url: url), decoder: decoder).makeAsyncIterator()
        #expect(try await values.next() == "/score version 1")
        versioned.bump("/score")
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(30))
        #expect(try await values.next() == "/score version 2")
    }

    @Test("streams of endpoints without an interval, and streams of every change, poll nothing")
    func noIntervalNoPolling() async throws {
        let transport = makeTransport(loader: echoOrigin()) {
            $0.stayingCurrent.refreshIntervals = [EndpointSetting(.host("other.example.com"), .seconds(1))]
        }
        let streams = [transport.changes(), transport.changes(for: .url(URL(string: Self.base + "/x")!))]
        #expect(transport.poller.polledEndpoints == 0)
        _ = streams
    }

    @Test("a manual clock's sleep ends when the clock passes its deadline, or throws when cancelled")
    func manualClockSleeps() async throws {
        let clock = TestClock()
        let sleeper = Task { try await clock.sleep(for: .seconds(2)) }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(1))
        #expect(clock.sleepers == 1)
        clock.advance(by: .seconds(1))
        try await sleeper.value
        #expect(clock.sleepers == 0)

        let cancelled = Task { try await clock.sleep(for: .seconds(1)) }
        await clock.waitForSleepers(1)
        cancelled.cancel()
        #expect(await thrownError { try await cancelled.value } is CancellationError)
        #expect(clock.sleepers == 0)
    }
}

/// Decodes a body as its UTF-8 text.
final class TextDecoder: ResponseDecoding {
    func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        String(decoding: data, as: UTF8.self) as! T
    }
}
