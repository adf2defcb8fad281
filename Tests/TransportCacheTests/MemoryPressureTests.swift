import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Memory pressure")
struct MemoryPressureTests {
    let url = "https://api.example.com/feed"

    static func item(_ index: Int) -> String { "https://api.example.com/items/\(index)" }

    @Test(
        "a warning drops every decoded value and trims the store to half its capacity, least recently used first, announcing what it dropped"
    )
    func warningTrims() async throws {
        let loader = feedLoader(Locked(1))
        let transport = makeTransport(loader: loader) {
            $0.storage.memoryCapacity = 5_000
            $0.storage.maximumEntryShare = 1
        }
        for index in 0..<10 {
            _ = try await transport.value(Feed.self, for: request(Self.item(index)))
        }
        #expect(transport.statistics.entries == 10)
        #expect(await transport.decodedValuesHeld == 10)
        #expect(transport.statistics.bytesHeld > 2_500)
        var changes = transport.changes().makeAsyncIterator()
        var watched = transport.changes(for: .url(URL(string: Self.item(0))!)).makeAsyncIterator()

        transport.trim(for: .warning)

        let kept = transport.statistics.entries
        #expect(kept > 0 && kept < 10)
        #expect(transport.statistics.bytesHeld <= 2_500)
        #expect(await transport.decodedValuesHeld == 0)
        #expect(transport.statistics.evictions == 10 - kept)
        #expect(transport.statistics.decodedEvictions == 10)
        #expect(transport.statistics.trims == 1)
        let dropped = (0..<(10 - kept)).map { URL(string: Self.item($0))! }
        #expect(
            await changes.next()
                == .invalidated(urls: dropped.sorted { $0.absoluteString < $1.absoluteString }, endpoint: nil))
        #expect(await watched.next() == .invalidated(urls: [URL(string: Self.item(0))!], endpoint: nil))
        // The most recently used entries stayed: they answer without a fetch, decoding again.
        for index in (10 - kept)..<10 {
            _ = try await transport.value(Feed.self, for: request(Self.item(index)))
        }
        #expect(loader.callCount == 10)
        #expect(transport.statistics.decodes == 10 + kept)
    }

    @Test("a critical trim empties the store and announces a clear")
    func criticalEmpties() async throws {
        let transport = makeTransport(loader: feedLoader(Locked(1)))
        for index in 0..<3 {
            _ = try await transport.value(Feed.self, for: request(Self.item(index)))
        }
        var changes = transport.changes().makeAsyncIterator()
        transport.trim(for: .critical)
        #expect(transport.statistics.entries == 0)
        #expect(transport.statistics.bytesHeld == 0)
        #expect(transport.statistics.evictions == 3)
        #expect(transport.statistics.decodedEvictions == 3)
        #expect(await changes.next() == .cleared)
    }

    @Test("a trim that removes no entry announces nothing")
    func nothingToAnnounce() async throws {
        let transport = makeTransport(loader: feedLoader(Locked(1)))
        _ = try await transport.value(Feed.self, for: request(url))
        var changes = transport.changes().makeAsyncIterator()
        transport.trim(for: .warning)  // far below half the capacity: only the value goes
        transport.invalidateAll()
        #expect(await transport.decodedValuesHeld == 0)
        #expect(await changes.next() == .cleared)
    }

    @Test("after a trim, requests refetch and decode again")
    func refetchAfterTrim() async throws {
        let version = Locked(1)
        let loader = feedLoader(version)
        let transport = makeTransport(loader: loader)
        let before = try await transport.value(Feed.self, for: request(url))
        version.withLock { $0 = 2 }
        transport.trim(for: .critical)
        let after = try await transport.value(Feed.self, for: request(url))
        let (data, _) = try await transport.data(for: request(url))
        #expect(before.version == 1)
        #expect(after.version == 2)
        #expect(data == feedBody(2))
        #expect(loader.callCount == 2)
        #expect(transport.statistics.decodes == 2)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("a trim never disturbs a fetch in flight: its callers get the answer, which is stored")
    func fetchInFlightAnswers() async throws {
        let loader = feedLoader(Locked(1), gated: true)
        let transport = makeTransport(loader: loader)
        let first = startCall { try await transport.value(Feed.self, for: request(url)) }
        let second = startCall { try await transport.data(for: request(url)) }
        #expect(transport.statistics.coalescedJoins == 1)
        await loader.waitForCalls(1)
        transport.trim(for: .critical)
        transport.trim(for: .warning)
        loader.openGate()
        let (feed, (data, _)) = (try await first.value, try await second.value)
        #expect(feed.version == 1)
        #expect(data == feedBody(1))
        #expect(transport.pendingWork == (0, 0, 0))
        // Stored as usual: the next call is a hit.
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 1)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("a trim leaves callers waiting on a decode with their value")
    func decodeInProgressAnswers() async throws {
        let transport = makeTransport(loader: feedLoader(Locked(1)))
        _ = try await transport.data(for: request(url))
        let decoder = await CountingDecoder.holding()
        let first = Task { try await transport.value(Feed.self, for: request(url), decoder: decoder) }
        await decoder.waitForDecodes(1)
        // The first is decoding: the second finds the decode claimed and waits for it before it
        // first suspends.
        let second = startCall { try await transport.value(Feed.self, for: request(url), decoder: decoder) }
        #expect(await transport.callersWaitingForDecode == 1)
        transport.trim(for: .critical)
        decoder.release()
        let (a, b) = (try await first.value, try await second.value)
        #expect(a === b)
        #expect(a.version == 1)
        #expect(decoder.count == 1)
        // The entry it came from is gone, so the value was not kept.
        #expect(transport.statistics.bytesHeld == 0)
    }

    @Test("a screen watching a trimmed URL reloads it")
    func watcherReloads() async throws {
        let version = Locked(1)
        let transport = makeTransport(loader: feedLoader(version))
        var values = transport.values(Feed.self, for: request(url)).makeAsyncIterator()
        #expect(try await values.next()?.version == 1)
        version.withLock { $0 = 2 }
        transport.trim(for: .critical)
        #expect(try await values.next()?.version == 2)
    }
}
