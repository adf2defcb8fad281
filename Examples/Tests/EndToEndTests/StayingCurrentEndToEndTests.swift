import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache
import TransportCacheTesting

/// Keeping what is held current, against a real origin over TCP: retries of failed fetches, the
/// polling of watched endpoints, and revalidation on demand.
///
/// Serialized, so that the timing printed for a thousand revalidations is not shared with the
/// suite's other tests.
@Suite("Staying current against a real origin", .serialized)
struct StayingCurrentEndToEndTests {
    static func transport(_ configure: (inout CachedTransport.Configuration) -> Void) -> CachedTransport {
        var configuration = CachedTransport.Configuration()
        configure(&configuration)
        return CachedTransport(configuration: configuration)
    }

    /// How the origin fails an attempt: the value of its `failwith=` parameter.
    enum Fault: String, Sendable, CaseIterable {
        /// `503 Service Unavailable`.
        case unavailable = "503"
        /// The connection reset (TCP RST) without an answer.
        case reset
        /// The connection closed in the middle of the body.
        case drop
    }

    /// Returns once `clock` has `count` sleeps waiting: the transport has reached the wait the test
    /// is to end with `advance(by:)`. Stops the test if it never does.
    static func sleeping(
        _ clock: ManualCacheClock, _ count: Int = 1, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let slept = await ending(within: .seconds(20), sourceLocation: sourceLocation) {
            await clock.waitForSleepers(count)
        }
        try #require(slept != nil, "the transport never waited on the clock", sourceLocation: sourceLocation)
    }

    // MARK: - Retries

    @available(macOS 26.0, *)
    @Test(
        "100 callers of one fetch; the origin fails twice, then answers: 3 requests, 2 retries, every caller gets the body",
        arguments: Fault.allCases)
    func retriedForEveryCaller(fault: Fault) async throws {
        try await withOrigin { origin in
            let transport = Self.transport {
                $0.network.retryPolicy = RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(1))
            }
            // The first attempt waits at the gate until every caller has joined the fetch. An
            // attempt that fails with the connection leaves none to reuse, so the next arrives on a
            // new one and the HTTP client never repeats a request on its own.
            let query = "gate=1&fail=2&failwith=\(fault.rawValue)"
            let path = "/flaky?\(query)"
            let url = origin.url(path)
            let callers = await startHeldCallers(100, of: path, on: transport, origin: origin)
            await origin.openGate()

            // The body of the third request.
            let answer = "path=/flaky query=\(query) version=0 auth=- hit=3"
            var answered = 0
            for caller in callers {
                let (data, response) = try await caller.value
                if data.text == answer, (response as? HTTPURLResponse)?.statusCode == 200 { answered += 1 }
            }
            #expect(answered == 100)
            #expect(await origin.hits(path) == 3)
            #expect(transport.statistics.retries == 2)
            // Each attempt that reached the origin is counted as a request sent.
            #expect(transport.statistics.networkFetches == 3)
            #expect(transport.statistics.coalescedJoins == 99)
            #expect(transport.statistics.stores == 1)
            // Stored: the next caller is answered from memory.
            #expect(try await transport.data(from: url).0.text == answer)
            #expect(await origin.hits(path) == 3)
        }
    }

    @available(macOS 26.0, *)
    @Test("a caller that cancels during the wait before a retry leaves at once; another caller still gets the answer")
    func cancelDuringRetryWait() async throws {
        try await withOrigin { origin in
            let clock = ManualCacheClock()
            let transport = Self.transport {
                $0.clock = clock.cacheClock
                $0.network.retryPolicy = RetryPolicy(maximumAttempts: 3, initialDelay: .seconds(1))
            }
            let eventStream = transport.events()
            let path = "/flaky?gate=1&fail=2"
            let callers = await startHeldCallers(2, of: path, on: transport, origin: origin)
            let (leaving, staying) = (callers[0], callers[1])
            await origin.openGate()

            // The first attempt got a 503: the fetch now waits before the second.
            try await Self.sleeping(clock)
            // A retry is counted when it is sent, not while it waits.
            #expect(transport.statistics.retries == 0)
            leaving.cancel()
            let left = await ending(within: .seconds(10)) {
                await thrownError { try await leaving.value } is CancellationError
            }
            #expect((try? left?.get()) == true)
            // It left while the fetch still waited: the clock has not moved, nothing more was sent.
            #expect(clock.sleepers == 1)
            #expect(await origin.hits(path) == 1)

            clock.advance(by: .seconds(1))
            await origin.waitForHits(path, count: 2)
            #expect(await origin.hits(path) == 2)
            #expect(transport.statistics.retries == 1)
            try await Self.sleeping(clock)
            clock.advance(by: .seconds(2))
            let (data, response) = try await staying.value
            #expect(data.text.hasSuffix("hit=3"))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(await origin.hits(path) == 3)
            #expect(transport.statistics.retries == 2)

            // Each retry was announced, with the attempt to come and a wait within the backoff.
            var events: [CacheEvent] = []
            for await event in eventStream {
                events.append(event)
                if case .answered = event.kind { break }
            }
            let retries = events.compactMap { event -> (Int, Duration)? in
                if case .retrying(let attempt, let delay) = event.kind { return (attempt, delay) }
                return nil
            }
            #expect(retries.map(\.0) == [2, 3])
            #expect(retries.count == 2 && retries[0].1 <= .seconds(1) && retries[1].1 <= .seconds(2))
        }
    }

    @Test("a POST answered with 503 is never retried; a GET to the same origin is")
    func postNotRetried() async throws {
        try await withOrigin { origin in
            let transport = Self.transport {
                $0.network.retryPolicy = RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(1))
            }
            let (_, posted) = try await transport.data(
                for: request(
                    origin.url("/orders?status=503"), method: "POST", headers: ["Content-Type": "text/plain"]))
            #expect((posted as? HTTPURLResponse)?.statusCode == 503)
            #expect(await origin.hits("/orders?status=503") == 1)
            // Only a POST changes the path's version.
            #expect(await origin.version(of: "/orders") == 1)
            #expect(transport.statistics.retries == 0)

            let (_, got) = try await transport.data(from: origin.url("/orders/1?status=503"))
            #expect((got as? HTTPURLResponse)?.statusCode == 503)
            #expect(await origin.hits("/orders/1?status=503") == 3)
            #expect(transport.statistics.retries == 2)
        }
    }

    @Test("after the last attempt fails, stale-if-error answers with the stored entry")
    func staleIfErrorAfterRetries() async throws {
        try await withOrigin { origin in
            let clock = ManualCacheClock()
            let transport = Self.transport {
                $0.clock = clock.cacheClock
                $0.freshness.maximumAge = .seconds(60)
                $0.freshness.staleIfError = true
                $0.network.retryPolicy = RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(100))
            }
            let path = "/profile"
            let url = origin.url(path)
            let (stored, _) = try await transport.data(from: url)
            clock.advance(by: .seconds(61))

            // The same key, but every attempt is cut short. Each has received part of an answer, so
            // the HTTP client never repeats one on its own, though the first reuses a connection.
            let caller = Task { try await transport.data(for: request(url, headers: ["X-Origin-Query": "drop=1"])) }
            try await Self.sleeping(clock)
            #expect(await origin.hits(path) == 2)
            clock.advance(by: .milliseconds(100))
            try await Self.sleeping(clock)
            #expect(await origin.hits(path) == 3)
            clock.advance(by: .milliseconds(200))
            let (data, response) = try await caller.value

            #expect(data == stored)
            #expect(response.isStaleAnswer)
            let code = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: CachedTransport.staleHeaderField)
            #expect(code == String(URLError.Code.networkConnectionLost.rawValue))
            #expect(await origin.hits(path) == 4)
            #expect(transport.statistics.retries == 2)
            #expect(transport.statistics.staleAnswers == 1)
            #expect(transport.statistics.stores == 1)
        }
    }

    // MARK: - Polling

    @Test("a watched URL is revalidated every interval with a 304 and no body, and polling stops with the stream")
    func pollingWhileWatched() async throws {
        try await withOrigin { origin in
            let clock = ManualCacheClock()
            let path = "/poll?stable=1"
            let url = origin.url(path)
            let transport = Self.transport {
                $0.clock = clock.cacheClock
                $0.stayingCurrent.refreshIntervals = [EndpointSetting(.url(url), .seconds(1))]
            }
            var all = transport.changes().makeAsyncIterator()
            let (stored, _) = try await transport.data(from: url)
            // Once a stream has heard the first store, a stream made later cannot (a caller may be
            // answered before its fetch's change has gone out).
            #expect(await all.next() == .updated(url))
            let bytesAfterLoad = await origin.bodyBytesSent
            #expect(clock.sleepers == 0)

            let watcher = Task {
                var seen: [CacheChange] = []
                for await change in transport.changes(for: .url(url)) { seen.append(change) }
                return seen
            }
            // A 304 is reported stored once it is counted in `notModified`.
            let events = CacheEventLog(transport)
            for tick in 1...10 {
                try await Self.sleeping(clock)
                clock.advance(by: .seconds(1))
                await origin.waitForHits(path, count: 1 + tick)
                #expect(await origin.hits(path) == 1 + tick)
            }
            await events.wait(for: 10, "stored", url: url)
            #expect(transport.statistics.notModified == 10)
            #expect(await origin.hits(path) == 11)
            #expect(await origin.notModifiedAnswers(path) == 10)
            #expect(await origin.bodyBytesSent == bytesAfterLoad)
            #expect(await origin.lastRequestHeader("If-None-Match", for: path) != nil)
            #expect(transport.statistics.revalidations == 10)
            #expect(transport.statistics.conditionalRequests == 10)
            #expect(try await transport.data(from: url).0 == stored)

            // The stream ends: its polling stops, and the clock may run on without a request.
            watcher.cancel()
            #expect(await watcher.value == [])
            // The stream let go when the watcher ended, and stopped the polling and its wait.
            #expect(clock.sleepers == 0)
            for _ in 0..<10 { clock.advance(by: .seconds(1)) }
            #expect(clock.sleepers == 0)
            #expect(await origin.hits(path) == 11)
            #expect(transport.statistics.revalidations == 10)
        }
    }

    // MARK: - Revalidation on demand

    @Test("revalidateAll over 1,000 entries: each once, conditionally, at most 4 at a time")
    func revalidateAllBounded() async throws {
        try await withOrigin { origin in
            let transport = Self.transport {
                $0.stayingCurrent.maximumConcurrentRevalidations = 4
                $0.stayingCurrent.minimumRevalidationInterval = .zero
            }
            let count = 1_000
            // The same body, and so the same ETag, on every request for an item; a little time at
            // the origin, so that revalidations overlap when they may.
            let items = (0..<count).map { "/item/\($0)?stable=1&delay=3" }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for lane in 0..<8 {
                    group.addTask {
                        for index in stride(from: lane, to: count, by: 8) {
                            _ = try await transport.data(from: origin.url(items[index]))
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(transport.statistics.entries == count)
            #expect(await origin.totalHits == count)
            let bytesBefore = await origin.bodyBytesSent
            await origin.resetMaximumConcurrentRequests()

            let started = ContinuousClock.now
            let summary = await transport.revalidateAll()
            let elapsed = (ContinuousClock.now - started).components
            let milliseconds = Double(elapsed.seconds) * 1_000 + Double(elapsed.attoseconds) / 1e15

            #expect(summary.revalidated == count)
            #expect(summary.changed == 0)
            #expect(summary.failed == 0)
            #expect(summary.skipped == 0)
            var revalidatedOnce = 0
            for item in items {
                let conditional = await origin.lastRequestHeader("If-None-Match", for: item) != nil
                if conditional, await origin.hits(item) == 2, await origin.notModifiedAnswers(item) == 1 {
                    revalidatedOnce += 1
                }
            }
            #expect(revalidatedOnce == count)
            #expect(await origin.totalNotModifiedAnswers == count)
            #expect(await origin.bodyBytesSent == bytesBefore)
            #expect(await origin.totalHits == 2 * count)
            let peak = await origin.maximumConcurrentRequests
            print(
                "revalidateAll over 1000 entries: \(Int(milliseconds.rounded())) ms "
                    + "(3 ms at the origin per request, at most \(peak) at once)")
            #expect(peak <= 4, "the origin answered \(peak) revalidations at once")
            #expect(peak >= 2, "the revalidations never overlapped")
            #expect(transport.statistics.revalidations == count)
            #expect(transport.statistics.notModified == count)
        }
    }

    @Test("revalidateWatched asks only for watched URLs, and announces .updated only where the bytes changed")
    func revalidateWatchedOnly() async throws {
        try await withOrigin { origin in
            let transport = Self.transport { $0.stayingCurrent.minimumRevalidationInterval = .zero }
            let changedPath = "/a?stable=1"
            let samePath = "/b?stable=1"
            let unwatchedPath = "/c?stable=1"
            let changed = origin.url(changedPath)
            let same = origin.url(samePath)
            let unwatched = origin.url(unwatchedPath)
            var all = transport.changes().makeAsyncIterator()
            for url in [changed, same, unwatched] { _ = try await transport.data(from: url) }
            // The first stores are announced; once a stream has heard them, a stream made later
            // cannot (a caller may be answered before its fetch's change has gone out).
            for url in [changed, same, unwatched] { #expect(await all.next() == .updated(url)) }

            // Nothing watched yet: nothing to do.
            #expect(await transport.revalidateWatched() == RevalidationSummary())
            #expect(await origin.totalHits == 3)

            var changedWatch = transport.changes(for: .url(changed)).makeAsyncIterator()
            var sameWatch = transport.changes(for: .url(same)).makeAsyncIterator()
            await origin.bumpVersion(of: "/a")
            await origin.bumpVersion(of: "/c")

            let summary = await transport.revalidateWatched()
            #expect(summary.revalidated == 2)
            #expect(summary.changed == 1)
            #expect(summary.failed == 0)
            #expect(summary.skipped == 0)
            #expect(await origin.hits(changedPath) == 2)
            #expect(await origin.notModifiedAnswers(changedPath) == 0)
            #expect(await origin.hits(samePath) == 2)
            #expect(await origin.notModifiedAnswers(samePath) == 1)
            #expect(await origin.hits(unwatchedPath) == 1)

            // A marker after the revalidation: every change announced before it is in the streams.
            transport.invalidate(URLRequest(url: same))
            let marker = CacheChange.invalidated(urls: [same], endpoint: nil)
            #expect(await all.next() == .updated(changed))
            #expect(await all.next() == marker)
            #expect(await changedWatch.next() == .updated(changed))
            #expect(await sameWatch.next() == marker)

            #expect(try await transport.data(from: changed).0.text.contains("version=1"))
            #expect(try await transport.data(from: unwatched).0.text.contains("version=0"))
            #expect(await origin.hits(unwatchedPath) == 1)
        }
    }
}
