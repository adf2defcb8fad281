import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Outcomes")
struct OutcomeTests {
    let url = "https://api.example.com/feed"

    /// The outcome of `request` on `transport`, through `response(for:)`.
    func outcome(_ transport: CachedTransport, _ request: URLRequest) async throws -> CacheOutcome {
        let (_, response, outcome) = try await transport.response(for: request)
        // The response says the same to `data(for:)` callers.
        #expect(response.cacheOutcome == outcome)
        return outcome
    }

    // MARK: - From memory

    @Test("a second request is a fresh answer from memory, with no network time")
    func fresh() async throws {
        let transport = makeTransport(loader: echoOrigin())
        let first = try await outcome(transport, request(url))
        #expect(first.source == .network(.noEntry))
        #expect(first.storage == .stored(changedBytes: true))
        #expect(first.networkDuration != nil)
        #expect(!first.joinedFetch)
        let second = try await outcome(transport, request(url))
        #expect(second == CacheOutcome(source: .memory(.fresh)))
        #expect(second.isFromMemory)
        #expect(!first.isFromMemory)
    }

    @Test("a stale entry a policy accepts, and one in the stale-while-revalidate window, say so")
    func staleAnswers() async throws {
        let clock = TestClock()
        let transport = makeTransport(loader: echoOrigin(), clock: clock) {
            $0.freshness.maximumAge = .seconds(60)
            $0.freshness.staleWhileRevalidate = .seconds(30)
        }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(70))
        let accepted = try await outcome(transport, request(url, policy: .returnCacheDataDontLoad))
        #expect(accepted.source == .memory(.staleAccepted))
        let window = try await outcome(transport, request(url))
        #expect(window.source == .memory(.staleWhileRevalidate))
        #expect(window.networkDuration == nil)
    }

    @Test("an entry answering after a failed fetch carries the error and the time the fetch took")
    func staleAfterFailure() async throws {
        let failing = Locked(false)
        let origin = ScriptedOrigin { request, call in
            if failing.withLock({ $0 }) { return .failure(.notConnectedToInternet) }
            return try ScriptedOrigin.ok()(request, call)
        }
        let clock = TestClock()
        let transport = makeTransport(loader: origin, clock: clock) {
            $0.freshness.maximumAge = .seconds(60)
            $0.freshness.staleIfError = true
        }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(70))
        failing.withLock { $0 = true }
        let stale = try await outcome(transport, request(url))
        #expect(stale.source == .memory(.staleAfterFailure(.notConnectedToInternet)))
        #expect(stale.networkDuration != nil)
        #expect(stale.storage == nil)
        #expect(!stale.isFromMemory)
    }

    // MARK: - From the network, and why

    @Test("an expired entry confirmed by a 304 is revalidated; a changed one is fetched as expired")
    func revalidatedAndExpired() async throws {
        let origin = ValidatingOrigin()
        let clock = TestClock()
        let transport = makeTransport(loader: ScriptedOrigin(respond: origin.responder), clock: clock) {
            $0.freshness.maximumAge = .seconds(60)
        }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(61))
        let confirmed = try await outcome(transport, request(url))
        #expect(confirmed.source == .revalidated(.expired))
        #expect(confirmed.storage == .stored(changedBytes: false))
        #expect(confirmed.networkDuration != nil)
        clock.advance(by: .seconds(61))
        origin.bump()
        let changed = try await outcome(transport, request(url))
        #expect(changed.source == .network(.expired))
        #expect(changed.storage == .stored(changedBytes: true))
    }

    @Test("a request whose entry was invalidated, evicted, or held for other field values says so")
    func whyTheEntryWasMissing() async throws {
        let transport = makeTransport(loader: echoOrigin()) {
            $0.storage.memoryCapacity = 4_000
            $0.storage.maximumEntryShare = 1
        }
        _ = try await transport.data(for: request(url))
        transport.invalidate(request(url))
        #expect(try await outcome(transport, request(url)).source == .network(.invalidated))

        // Each entry is charged a few hundred bytes: twenty others push the first one out.
        for index in 0..<20 { _ = try await transport.data(for: request("https://api.example.com/other/\(index)")) }
        #expect(transport.statistics.evictions > 0)
        #expect(try await outcome(transport, request(url)).source == .network(.evicted))

        let varying = makeTransport(loader: ScriptedOrigin(respond: ScriptedOrigin.ok(headers: ["Vary": "X-Flavor"])))
        _ = try await varying.data(for: request(url, headers: ["X-Flavor": "plain"]))
        let other = try await outcome(varying, request(url, headers: ["X-Flavor": "spicy"]))
        #expect(other.source == .network(.noMatchingVariant))
    }

    @Test("once a fetch of an invalidated key is answered, a later miss no longer blames the invalidation")
    func departureForgotten() async throws {
        let transport = makeTransport(
            loader: ScriptedOrigin(respond: ScriptedOrigin.ok(headers: ["Set-Cookie": "s=1"])))
        let stored = makeTransport(loader: echoOrigin())
        _ = try await stored.data(for: request(url))
        stored.invalidate(request(url))
        #expect(try await outcome(stored, request(url)).source == .network(.invalidated))
        _ = try await transport.data(for: request(url))
        transport.invalidate(request(url))
        // Never stored (it sets a cookie), yet answered: the next miss is a plain one.
        #expect(try await outcome(transport, request(url)).source == .network(.noEntry))
        #expect(try await outcome(transport, request(url)).source == .network(.noEntry))
    }

    @Test("a key recorded as departed again keeps its newest reason when the oldest departures are forgotten")
    func departuresRing() {
        var departures = Departures()
        let key = { (index: Int) in CacheKey(method: "GET", url: "https://api.example.com/\(index)", identity: []) }
        departures.record(key(0), .invalidated)
        departures.forget(key(0))
        departures.record(key(0), .evicted)
        // The ring is full after these; the last one takes the first slot, whose key 0 has been
        // recorded again since and must keep its newer reason.
        for index in 1..<Departures.limit { departures.record(key(index), .invalidated) }
        #expect(departures.reason(for: key(0)) == .evicted)
        #expect(departures.reason(for: key(1)) == .invalidated)
        // One more takes the slot of key 0's newer record.
        departures.record(key(Departures.limit), .invalidated)
        #expect(departures.reason(for: key(0)) == nil)
    }

    @Test(
        "a reload policy, a request's own no-cache and refresh each name their reason",
        arguments: [
            (
                request("https://api.example.com/feed", policy: .reloadIgnoringLocalCacheData),
                CacheOutcome.FetchReason.reloadPolicy
            ),
            (request("https://api.example.com/feed", headers: ["Cache-Control": "no-cache"]), .requestRevalidates),
        ])
    func reloads(reload: URLRequest, reason: CacheOutcome.FetchReason) async throws {
        let transport = makeTransport(loader: echoOrigin())
        _ = try await transport.data(for: request(url))
        #expect(try await outcome(transport, reload).source == .network(reason))
        let (_, refreshed) = try await transport.refresh(request(url))
        #expect(refreshed.cacheOutcome?.source == .network(.refresh))
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("callers that joined another caller's fetch say so; the one that started it does not")
    func joined() async throws {
        let origin = echoOrigin(gated: true)
        let transport = makeTransport(loader: origin)
        let tasks = startCalls(5) { try await transport.response(for: request(url)) }
        #expect(transport.statistics.coalescedJoins == 4)
        await origin.waitForCalls(1)
        origin.openGate()
        var outcomes: [CacheOutcome] = []
        for task in tasks { outcomes.append(try await task.value.2) }
        #expect(outcomes.filter { !$0.joinedFetch }.count == 1)
        #expect(outcomes.filter(\.joinedFetch).count == 4)
        for outcome in outcomes {
            #expect(outcome.source == .network(.noEntry))
            #expect(outcome.storage == .stored(changedBytes: true))
        }
        #expect(origin.callCount == 1)
    }

    // MARK: - Passed through

    @Test(
        "a request that bypasses the store says why",
        arguments: [
            (
                request("https://api.example.com/feed", headers: ["If-None-Match": "\"x\""]),
                CacheOutcome.PassThroughReason.requestConditions
            ),
            (request("https://api.example.com/feed", headers: ["Range": "bytes=0-1"]), .requestConditions),
            (request("https://api.example.com/feed", headers: ["Cache-Control": "no-store"]), .requestNoStore),
            (request("https://api.example.com/feed", method: "POST"), .unsafeMethod),
        ])
    func passedThrough(sent: URLRequest, reason: CacheOutcome.PassThroughReason) async throws {
        let transport = makeTransport(loader: echoOrigin())
        let outcome = try await outcome(transport, sent)
        #expect(outcome.source == .passedThrough(reason))
        #expect(outcome.storage == nil)
        #expect(outcome.networkDuration != nil)
    }

    @Test("a request to another scheme passes through, and is never stored")
    func notHTTP() async throws {
        let origin = echoOrigin()
        let transport = makeTransport(loader: origin)
        let sent = request("ftp://files.example.com/feed")
        #expect(try await outcome(transport, sent).source == .passedThrough(.notHTTP))
        #expect(try await outcome(transport, sent).source == .passedThrough(.notHTTP))
        #expect(origin.callCount == 2)
    }

    // MARK: - Stored or not

    @Test(
        "a fetched answer that is not stored says why",
        arguments: [
            (ScriptedOrigin.status(404), CacheOutcome.NotStoredReason.status(404), true),
            (ScriptedOrigin.status(206), .partialContent, true),
            (ScriptedOrigin.ok(headers: ["Set-Cookie": "s=1"]), .setsCookie, true),
            (ScriptedOrigin.ok(headers: ["Cache-Control": "no-store"]), .noStore, false),
            (ScriptedOrigin.ok(headers: ["Vary": "*"]), .variesOnEverything, false),
            (ScriptedOrigin.body(size: 50_000), .tooLarge, true),
        ])
    func notStored(respond: @escaping ScriptedOrigin.Responder, reason: CacheOutcome.NotStoredReason, override: Bool)
        async throws
    {
        let transport = makeTransport(loader: ScriptedOrigin(respond: respond)) {
            $0.storage.memoryCapacity = 100_000
            if !override { $0.network.cacheOverride = nil }
        }
        let outcome = try await outcome(transport, request(url))
        #expect(outcome.source == .network(.noEntry))
        #expect(outcome.storage == .notStored(reason))
    }

    @Test("a refresh that brings the bytes already held is stored with the same bytes")
    func sameBytes() async throws {
        let transport = makeTransport(loader: ScriptedOrigin { _, _ in .init(text: "same") })
        _ = try await transport.data(for: request(url))
        let (_, response) = try await transport.refresh(request(url))
        #expect(response.cacheOutcome?.storage == .stored(changedBytes: false))
    }

    @Test("a fetch whose key is invalidated, or superseded by a refresh, while in flight says so")
    func inFlight() async throws {
        let origin = echoOrigin(gated: true)
        let transport = makeTransport(loader: origin)
        let invalidated = Task { try await transport.response(for: request(url)) }
        await origin.waitForCalls(1)
        transport.invalidate(request(url))
        origin.release(1)
        #expect(try await invalidated.value.2.storage == .notStored(.invalidatedInFlight))

        let superseded = Task { try await transport.response(for: request("https://api.example.com/other")) }
        await origin.waitForCalls(2)
        let refresh = Task { try await transport.refresh(request("https://api.example.com/other")) }
        await origin.waitForCalls(3)
        origin.release(2)
        #expect(try await superseded.value.2.storage == .notStored(.supersededInFlight))
        origin.release(3)
        #expect(try await refresh.value.1.cacheOutcome?.storage == .stored(changedBytes: true))
    }

    // MARK: - Nothing usable, and failures

    @Test("returnCacheDataDontLoad without an entry throws an error carrying a cache-only miss")
    func cacheOnlyMissThrows() async throws {
        let origin = echoOrigin()
        let transport = makeTransport(loader: origin)
        let error = await #expect(throws: URLError.self) {
            try await transport.data(for: request(url, policy: .returnCacheDataDontLoad))
        }
        #expect(error?.code == .resourceUnavailable)
        #expect(error?.cacheOutcome == CacheOutcome(source: .cacheOnlyMiss))
        #expect(origin.callCount == 0)
    }

    @Test("only-if-cached without an entry answers 504 with a cache-only miss")
    func cacheOnlyMissAnswers() async throws {
        let transport = makeTransport(loader: echoOrigin()) { $0.freshness.conformsToHTTPCaching = true }
        let (_, response, outcome) = try await transport.response(
            for: request(url, headers: ["Cache-Control": "only-if-cached"]))
        #expect(response.statusCode == 504)
        #expect(outcome.source == .cacheOnlyMiss)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("every caller of a failed fetch gets an error carrying its own outcome")
    func failureCarriesOutcome() async throws {
        let origin = ScriptedOrigin(gated: true, respond: ScriptedOrigin.failing(.cannotConnectToHost))
        let transport = makeTransport(loader: origin)
        let tasks = startCalls(3) { try await transport.data(for: request(url)) }
        #expect(transport.statistics.coalescedJoins == 2)
        await origin.waitForCalls(1)
        origin.openGate()
        var joined = 0
        for task in tasks {
            let error = await #expect(throws: URLError.self) { try await task.value }
            #expect(error?.code == .cannotConnectToHost)
            let outcome = try #require(error?.cacheOutcome)
            #expect(outcome.source == .network(.noEntry))
            #expect(outcome.storage == nil)
            #expect(outcome.networkDuration != nil)
            if outcome.joinedFetch { joined += 1 }
        }
        #expect(joined == 2)
    }

    @Test("a request without a URL throws badURL carrying an outcome")
    func badURL() async throws {
        let transport = makeTransport(loader: echoOrigin())
        var missing = URLRequest(url: URL(string: url)!)
        missing.url = nil
        let error = await #expect(throws: URLError.self) { try await transport.data(for: missing) }
        #expect(error?.code == .badURL)
        #expect(error?.cacheOutcome != nil)
    }

    @Test("the description says where, why, what was stored and how long the network took")
    func description() {
        let outcome = CacheOutcome(
            source: .network(.expired), joinedFetch: true, storage: .notStored(.setsCookie),
            networkDuration: .milliseconds(38))
        #expect(outcome.description == "network (expired), joined, not stored: sets a cookie, 38 ms")
        #expect(CacheOutcome(source: .memory(.fresh)).description == "memory (fresh)")
    }
}
