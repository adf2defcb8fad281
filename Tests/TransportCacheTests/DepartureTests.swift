import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

/// Whatever takes an entry or a variant out of the store, what left is counted, remembered and
/// reported the same way.
@Suite("Departures from the store")
struct DepartureTests {
    let url = "https://api.example.com/greeting"
    let marker = "https://api.example.com/marker"

    /// The events of `iterator` up to the invalidation of ``marker``, which the caller makes last.
    func events(untilMarker iterator: inout CacheEvents.AsyncIterator) async -> [CacheEvent] {
        var events: [CacheEvent] = []
        while let event = await iterator.next() {
            if case .invalidated = event.kind, event.url.absoluteString == marker { break }
            events.append(event)
        }
        return events
    }

    /// Ends what a test reads of the events: the invalidation of ``marker``, stored first.
    func endEvents(of transport: CachedTransport) async throws {
        _ = try await transport.data(for: request(marker))
        transport.invalidate(request(marker))
    }

    /// An origin whose body names the `X-Flavor` it was asked for, with `Vary: X-Flavor` and an
    /// entity tag; a conditional request is answered `304` with `no-store`.
    static func flavored() -> ScriptedOrigin {
        ScriptedOrigin { request, call in
            if request.value(forHTTPHeaderField: "If-None-Match") != nil {
                return .init(status: 304, headers: ["ETag": "\"1\"", "Cache-Control": "no-store", "Vary": "X-Flavor"])
            }
            let flavor = request.value(forHTTPHeaderField: "X-Flavor") ?? "-"
            return .init(headers: ["Vary": "X-Flavor", "ETag": "\"1\""], text: "flavor=\(flavor) call=\(call)")
        }
    }

    @Test("a variant a write drops to keep its key within the variants allowed is counted and reported as evicted")
    func droppedVariantReported() async throws {
        let transport = makeTransport(loader: Self.flavored()) { $0.storage.maximumVariants = 2 }
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "a"]))
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "b"]))
        var events = transport.events().makeAsyncIterator()

        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "c"]))  // drops a
        try await endEvents(of: transport)

        let evicted = await self.events(untilMarker: &events).filter { $0.kind.name == "evicted" }
        #expect(evicted.map(\.url.absoluteString) == [url])
        #expect(transport.statistics.evictions == 1)
        #expect(transport.statistics.entries == 1)
    }

    @Test("a variant a 304 takes out, while the key keeps others, counts as an invalidation")
    func removedVariantCounted() async throws {
        let transport = makeTransport(loader: Self.flavored()) { $0.network.cacheOverride = nil }
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "a"]))
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "b"]))
        let held = transport.statistics.bytesHeld
        var events = transport.events().makeAsyncIterator()

        let (data, response) = try await transport.refresh(request(url, headers: ["X-Flavor": "a"]))
        try await endEvents(of: transport)

        #expect(data.text == "flavor=a call=1")
        #expect(response.cacheOutcome?.storage == .notStored(.noStore))
        let invalidated = await self.events(untilMarker: &events).filter { $0.kind.name == "invalidated" }
        #expect(invalidated.map(\.url.absoluteString) == [url])
        // The marker's invalidation, and the variant's.
        #expect(transport.statistics.invalidations == 2)
        #expect(transport.statistics.entries == 1)
        #expect(transport.statistics.bytesHeld < held)
        // The other variant still answers from memory.
        let other = try await transport.response(for: request(url, headers: ["X-Flavor": "b"]))
        #expect(other.2.isFromMemory)
    }

    @Test("a 304 that takes out a key's last variant counts an invalidation; the next miss is a plain one")
    func removedLastVariantCounted() async throws {
        let transport = makeTransport(loader: Self.flavored()) { $0.network.cacheOverride = nil }
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "a"]))

        _ = try await transport.refresh(request(url, headers: ["X-Flavor": "a"]))

        #expect(transport.statistics.invalidations == 1)
        #expect(transport.statistics.entries == 0)
        #expect(transport.statistics.bytesHeld == 0)
        // The fetch that took it out was answered: the miss is no longer the removal's doing.
        let next = try await transport.response(for: request(url, headers: ["X-Flavor": "a"]))
        #expect(next.2.source == .network(.noEntry))
    }

    @Test("a provisional answer taken back from a key that held nothing counts an invalidation, and a miss says so")
    func rollbackCounted() async throws {
        struct Failed: Error {}
        let transport = makeTransport(loader: echoOrigin())
        await #expect(throws: Failed.self) {
            try await transport.optimisticUpdate([ProvisionalAnswer(for: request(url), value: ["b?"])]) {
                throw Failed()
            }
        }
        #expect(transport.statistics.entries == 0)
        #expect(transport.statistics.bytesHeld == 0)
        #expect(transport.statistics.invalidations == 1)
        let next = try await transport.response(for: request(url))
        #expect(next.2.source == .network(.invalidated))
    }

    @Test("a key evicted to make room for a decoded value is counted, reported, forgotten by the index and blamed")
    func decodeChargeEviction() async throws {
        let feed = "https://api.example.com/feed"
        let probe = makeTransport(loader: feedLoader(Locked(1)))
        _ = try await probe.data(for: request(feed + "/0"))
        _ = try await probe.data(for: request(feed + "/1"))
        // Room for the two entries, not for a value decoded from one of them as well.
        let capacity = probe.statistics.bytesHeld + AnyDecodedValue.overhead
        let transport = makeTransport(loader: feedLoader(Locked(1))) {
            $0.storage.memoryCapacity = capacity
            $0.storage.maximumEntryShare = 1
        }
        _ = try await transport.data(for: request(feed + "/0"))
        _ = try await transport.data(for: request(feed + "/1"))
        let before = transport.statistics.evictions
        var events = transport.events().makeAsyncIterator()

        _ = try await transport.value(Feed.self, for: request(feed + "/1"))
        let evictions = transport.statistics.evictions - before
        try await endEvents(of: transport)

        #expect(evictions == 1)
        // The marker's own store may make room too, after.
        let evicted = await self.events(untilMarker: &events).filter { $0.kind.name == "evicted" }
        #expect(evicted.first?.url.absoluteString == feed + "/0")
        #expect(transport.statistics.bytesHeld <= capacity)
        #expect(!transport.store.index.withLock { $0.keys }.contains { $0.url == feed + "/0" })
        let next = try await transport.response(for: request(feed + "/0"))
        #expect(next.2.source == .network(.evicted))
    }
}
