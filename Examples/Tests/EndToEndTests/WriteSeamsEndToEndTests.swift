import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache
import TransportCacheTesting

// Where a write meets a fetch, a revalidation, a tag or another refresh, against a real origin.
//
// An origin answer is held with the origin's gate: the request carries `X-Origin-Query: gate=1`,
// which is not part of the cache key, so the held request and a plain one share a key. Every wait
// is for a state the origin or the transport reports (a request arriving, an event, a stream's next
// value), never for time to pass.

@Suite("Optimistic writes keep the newest truth", .timeLimit(.minutes(1)))
struct OptimisticWritesKeepTheNewestTruth {
    @Test("a refresh that ends while an update is pending is what the update rolls back to, never shown over it")
    func refreshEndingDuringUpdateBecomesTheRollback() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/item?stable=1")
            let item = URLRequest(url: url)
            var shown = transport.values(String.self, for: item, decoder: TextDecoder()).makeAsyncIterator()
            #expect(try await shown.next() == originBody("/item", version: 0))

            // The origin's item changes; a refresh of it is sent and held at the origin.
            await origin.bumpVersion(of: "/item")
            await origin.closeGate()
            let refreshing = Task { try await transport.refresh(held(url)) }
            await origin.waitForHits("/item?stable=1", count: 2)

            let provisional = ProvisionalAnswer(for: item, data: Data("provisional".utf8))
            let failure = await thrownError {
                try await transport.optimisticUpdate([provisional]) { () async throws -> Void in
                    #expect(try await shown.next() == "provisional")
                    await origin.openGate()
                    let (refreshed, response) = try await refreshing.value
                    #expect(refreshed.text == originBody("/item", version: 1))
                    // Stored under the update: it differs from what the key held before it.
                    #expect(response.cacheOutcome?.storage == .stored(changedBytes: true))
                    let (data, _, outcome) = try await transport.response(for: item)
                    #expect(data.text == "provisional")
                    #expect(outcome.source == .memory(.fresh))
                    throw WriteRefused()
                }
            }
            #expect(failure is WriteRefused)

            // Rolled back to what the refresh brought, not to what the key held before the update.
            #expect(try await shown.next() == originBody("/item", version: 1))
            let (data, _, outcome) = try await transport.response(for: item)
            #expect(data.text == originBody("/item", version: 1))
            #expect(outcome.source == .memory(.fresh))
            #expect(await origin.hits("/item?stable=1") == 2)
        }
    }

    /// Why the store refuses a `confirmed` answer.
    enum Refusal: String, CaseIterable, Sendable {
        case tooLarge
        case variesOnEverything
    }

    @Test(
        "a confirmed answer that cannot be stored is refetched as if confirmed had said nothing for it, and reported",
        arguments: Refusal.allCases)
    func unstorableConfirmedAnswer(_ refusal: Refusal) async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            // Entries of at most 1,000 bytes, and `Vary: *` taken at its word.
            configuration.storage.memoryCapacity = 10_000
            configuration.network.cacheOverride = nil
            let transport = CachedTransport(configuration: configuration)
            let urlA = origin.url("/a?stable=1")
            let urlB = origin.url("/b?stable=1")
            let a = URLRequest(url: urlA)
            let b = URLRequest(url: urlB)
            _ = try await transport.data(for: a)
            var shownB = transport.values(String.self, for: b, decoder: TextDecoder()).makeAsyncIterator()
            #expect(try await shownB.next() == originBody("/b", version: 0))
            // The origin's B changes: a refetch of it brings version 1.
            await origin.bumpVersion(of: "/b")

            let confirmedA = ProvisionalAnswer(for: a, data: Data("a confirmed".utf8))
            let confirmedB =
                switch refusal {
                case .tooLarge: ProvisionalAnswer(for: b, data: Data(repeating: UInt8(ascii: "b"), count: 2_000))
                case .variesOnEverything:
                    ProvisionalAnswer(
                        for: b, data: Data("b confirmed".utf8),
                        response: HTTPURLResponse(
                            url: urlB, statusCode: 200, httpVersion: nil, headerFields: ["Vary": "*"]))
                }
            let failure = await thrownError {
                try await transport.optimisticUpdate(
                    [
                        ProvisionalAnswer(for: a, data: Data("a provisional".utf8)),
                        ProvisionalAnswer(for: b, data: Data("b provisional".utf8)),
                    ],
                    write: { () async throws -> Void in #expect(try await shownB.next() == "b provisional") },
                    confirmed: { _ in [confirmedA, confirmedB] })
            }
            let expected: LocalWriteError =
                switch refusal {
                case .tooLarge: .tooLarge(urlB)
                case .variesOnEverything: .notCacheable(urlB)
                }
            #expect(failure as? LocalWriteError == expected)

            // Settled before the error was thrown: A on its confirmed answer, B on the origin's.
            let (dataA, _, outcomeA) = try await transport.response(for: a)
            #expect(dataA.text == "a confirmed")
            #expect(outcomeA.source == .memory(.fresh))
            #expect(await origin.hits("/b?stable=1") == 2)
            let (dataB, _, outcomeB) = try await transport.response(for: b)
            #expect(dataB.text == originBody("/b", version: 1))
            #expect(outcomeB.isFromMemory)
            // Never back to the bytes B held before the write.
            #expect(try await shownB.next() == originBody("/b", version: 1))
            #expect(await origin.hits("/b?stable=1") == 2)
        }
    }

    @Test("reads of a stale-while-revalidate entry under a pending update start one background revalidation")
    func staleReadsUnderAnUpdateRevalidateOnce() async throws {
        try await withOrigin { origin in
            let clock = ManualCacheClock()
            var configuration = CachedTransport.Configuration()
            configuration.clock = clock.cacheClock
            configuration.freshness.maximumAge = .seconds(60)
            configuration.freshness.staleWhileRevalidate = .seconds(600)
            let transport = CachedTransport(configuration: configuration)
            let url = origin.url("/feed?stable=1")
            let feed = URLRequest(url: url)
            _ = try await transport.data(for: feed)

            let provisional = ProvisionalAnswer(for: feed, data: Data("provisional".utf8))
            let failure = await thrownError {
                try await transport.optimisticUpdate([provisional]) { () async throws -> Void in
                    // The provisional answer is now within its stale-while-revalidate window.
                    clock.advance(by: .seconds(61))
                    let marker = URLRequest(url: origin.url("/marker"))
                    try transport.store(ProvisionalAnswer(for: marker, data: Data("marker".utf8)))
                    var events = transport.events().makeAsyncIterator()
                    var revalidations = 0
                    for _ in 0..<5 {
                        let (data, _) = try await transport.data(for: feed)
                        #expect(data == provisional.data)
                        revalidations += await fetchesEnded(of: url, afterReading: marker, on: transport, &events)
                    }
                    #expect(revalidations <= 1)
                    throw WriteRefused()
                }
            }
            #expect(failure is WriteRefused)
            #expect(await origin.hits("/feed?stable=1") <= 2)
        }
    }
}

@Suite("Tags name only what a fetch may store", .timeLimit(.minutes(1)))
struct TagsNameOnlyWhatAFetchMayStore {
    @Test("a tag given to a key whose fetch is in flight survives a pruning of the tag index until the fetch ends")
    func tagOfAFetchInFlightSurvivesPruning() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/tagged")
            await origin.closeGate()
            let fetching = Task { try await transport.data(for: held(url), tags: ["feed"]) }
            await origin.waitForHits("/tagged", count: 1)

            // More tagged keys than the index keeps for an empty store, none of them ever stored:
            // each is asked for from memory only, and is not there.
            for index in 0..<1_100 {
                var other = URLRequest(url: origin.url("/other/\(index)"))
                other.cachePolicy = .returnCacheDataDontLoad
                _ = try? await transport.data(for: other, tags: ["others"])
            }
            #expect(await origin.totalHits == 1)

            transport.invalidate(tag: "feed")
            await origin.openGate()
            let (data, response) = try await fetching.value
            #expect(data.text.hasPrefix("path=/tagged "))
            #expect(response.cacheOutcome?.storage == .notStored(.invalidatedInFlight))
            let (_, _, outcome) = try await transport.response(for: URLRequest(url: url))
            #expect(!outcome.isFromMemory)
            #expect(await origin.hits("/tagged") == 2)
        }
    }

    @Test(
        "a request that passes through the store tags nothing",
        arguments: [["If-None-Match": "\"other\""], ["Range": "bytes=0-3"], ["Cache-Control": "no-store"]])
    func passingThroughTagsNothing(_ headers: [String: String]) async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/item?stable=1")
            let (_, passed) = try await transport.data(for: request(url, headers: headers), tags: ["items"])
            guard case .passedThrough = passed.cacheOutcome?.source else {
                Issue.record("expected an answer sent past the store, got \(String(describing: passed.cacheOutcome))")
                return
            }

            // The same key, stored by a plain GET that gives no tag.
            _ = try await transport.data(for: URLRequest(url: url))
            #expect(transport.invalidate(tag: "items") == 0)
            let (_, _, outcome) = try await transport.response(for: URLRequest(url: url))
            #expect(outcome.source == .memory(.fresh))
            #expect(await origin.hits("/item?stable=1") == 2)
        }
    }
}

@Suite("Concurrent refreshes share the next fetch", .timeLimit(.minutes(1)))
struct ConcurrentRefreshesShareTheNextFetch {
    @Test("20 concurrent refreshes reach the origin twice, each answered by a fetch sent after it was called")
    func twentyRefreshesReachTheOriginTwice() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/counter")
            let (first, later) = await startRefreshes(19, of: url, whileOneIsHeldAt: origin, on: transport)

            await origin.openGate()
            let (firstBody, _) = try await first.value
            #expect(firstBody.text == counterBody(hit: 1))
            for refresh in later {
                let (body, _) = try await refresh.value
                #expect(body.text == counterBody(hit: 2))
            }
            #expect(await origin.hits("/counter") == 2)
        }
    }

    @Test("a refresh cancelled while it waits for the next fetch ends at once; the others get their answers")
    func cancelledRefreshLeavesTheOthers() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/counter")
            let (first, later) = await startRefreshes(19, of: url, whileOneIsHeldAt: origin, on: transport)

            // Ends while the first refresh's answer is still held at the origin.
            later[0].cancel()
            let ended = await ending(within: .seconds(20)) {
                await thrownError { try await later[0].value } is CancellationError
            }
            #expect((try? ended?.get()) == true)

            await origin.openGate()
            let (firstBody, _) = try await first.value
            #expect(firstBody.text == counterBody(hit: 1))
            for refresh in later.dropFirst() {
                let (body, _) = try await refresh.value
                #expect(body.text == counterBody(hit: 2))
            }
            #expect(await origin.hits("/counter") == 2)
        }
    }

    /// Starts a refresh of `url` held at the origin, then `count` more refreshes of it, and returns
    /// once each of those has been called.
    ///
    /// The later refreshes run on the main actor, whose tasks start in the order they were made: once
    /// a main-actor task made after them has run, each of them has called `refresh` and is waiting.
    private func startRefreshes(
        _ count: Int, of url: URL, whileOneIsHeldAt origin: LoopbackOrigin, on transport: CachedTransport
    ) async -> (first: Task<(Data, URLResponse), any Error>, later: [Task<(Data, URLResponse), any Error>]) {
        await origin.closeGate()
        let first = Task { try await transport.refresh(held(url)) }
        await origin.waitForHits(url.path, count: 1)
        let later = (0..<count).map { _ in Task { @MainActor in try await transport.refresh(held(url)) } }
        await Task { @MainActor in }.value
        return (first, later)
    }

    /// The origin's answer to the `hit`-th request for `/counter`.
    private func counterBody(hit: Int) -> String {
        "path=/counter query= version=0 auth=- hit=\(hit)"
    }
}

// MARK: - Helpers

/// A write the origin refused.
private struct WriteRefused: Error {}

/// The origin's body for `path` with `?stable=1` at `version` of the path.
private func originBody(_ path: String, version: Int) -> String {
    "path=\(path) query=stable=1 version=\(version) auth=-"
}

/// A GET of `url` whose answer the origin holds at its gate; the same key as a plain GET of `url`.
private func held(_ url: URL) -> URLRequest {
    request(url, headers: ["X-Origin-Query": "gate=1"])
}

/// Reads `marker` (a fresh entry) after a read of `url`, then consumes `events` until that read
/// of `marker` is reported and every fetch of `url` started meanwhile has ended and been stored
/// (or not).
/// - Returns: how many fetches of `url` ended.
private func fetchesEnded(
    of url: URL, afterReading marker: URLRequest, on transport: CachedTransport,
    _ events: inout CacheEvents.AsyncIterator
) async -> Int {
    _ = try? await transport.data(for: marker)
    let markerURL = marker.url!
    var markerAnswered = false
    var started = 0
    var ended = 0
    while !markerAnswered || ended < started, let event = await events.next() {
        switch (event.url, event.kind) {
        case (markerURL, .answered): markerAnswered = true
        case (url, .fetchStarted): started += 1
        // Stored or not, under the store's lock: the fetch is over for the next read.
        case (url, .stored), (url, .notStored), (url, .fetchEnded(status: nil, bytes: _, duration: _)): ended += 1
        default: break
        }
    }
    return ended
}

/// Reads a body as text, whatever its content type.
private final class TextDecoder: ResponseDecoding {
    struct NotText: Error {}

    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        guard let text = data.text as? Value else { throw NotText() }
        return text
    }
}
