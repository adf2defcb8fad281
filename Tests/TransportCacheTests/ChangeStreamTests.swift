import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Change notifications")
struct ChangeStreamTests {
    let url = "https://api.example.com/items/1"

    /// A loader whose body is the current value of `version`.
    static func versioned(_ version: Locked<Int>) -> ScriptedOrigin {
        ScriptedOrigin { request, _ in
            ScriptedOrigin.Reply(status: 200, body: Data("version=\(version.withLock { $0 })".utf8))
        }
    }

    @Test("a subscriber hears stores, invalidations and clears in the order they happened")
    func orderedEvents() async throws {
        let transport = makeTransport(loader: echoOrigin())
        let other = "https://api.example.com/other"
        var changes = transport.changes().makeAsyncIterator()
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(other))
        transport.invalidate(request(url))
        transport.invalidateAll()
        #expect(await changes.next() == .updated(URL(string: url)!))
        #expect(await changes.next() == .updated(URL(string: other)!))
        #expect(await changes.next() == .invalidated(urls: [URL(string: url)!], endpoint: nil))
        #expect(await changes.next() == .cleared)
    }

    @Test("an endpoint invalidation names the dropped URLs and the endpoint")
    func endpointEvent() async throws {
        let transport = makeTransport(loader: echoOrigin())
        _ = try await transport.data(for: request("https://api.example.com/items/2"))
        _ = try await transport.data(for: request("https://api.example.com/items/1"))
        var changes = transport.changes().makeAsyncIterator()
        transport.invalidate(.pathPrefix("/items"))
        guard case let .invalidated(urls, endpoint)? = await changes.next() else {
            Issue.record("expected an invalidation")
            return
        }
        #expect(urls.map(\.absoluteString) == ["https://api.example.com/items/1", "https://api.example.com/items/2"])
        #expect(endpoint?.matches(URL(string: "https://x.example/items/9")!) == true)
    }

    @Test("changes compare everything they carry: an invalidation's endpoint too")
    func changeEquality() async throws {
        let transport = makeTransport(loader: echoOrigin())
        let items = Endpoint.pathPrefix("/items")
        let predicate = Endpoint.matching { $0.path.hasPrefix("/items") }
        let item = URL(string: "https://api.example.com/items/1")!
        _ = try await transport.data(for: request(item.absoluteString))
        var changes = transport.changes().makeAsyncIterator()
        transport.invalidate(items)
        let first = await changes.next()
        _ = try await transport.data(for: request(item.absoluteString))
        #expect(await changes.next() == .updated(item))
        transport.invalidate(predicate)
        let second = await changes.next()
        #expect(first == .invalidated(urls: [item], endpoint: .pathPrefix("/items")))
        #expect(first != .invalidated(urls: [item], endpoint: .pathPrefix("/other")))
        #expect(first != .invalidated(urls: [item], endpoint: nil))
        // A predicate endpoint equals itself and its copies only: closures cannot be compared.
        #expect(second == .invalidated(urls: [item], endpoint: predicate))
        #expect(second != .invalidated(urls: [item], endpoint: .matching { $0.path.hasPrefix("/items") }))
    }

    @Test("a filtered subscriber hears only its endpoint's changes")
    func filteredSubscriber() async throws {
        let transport = makeTransport(loader: echoOrigin())
        var mine = transport.changes(for: .url(URL(string: url)!)).makeAsyncIterator()
        _ = try await transport.data(for: request("https://api.example.com/other"))
        transport.invalidate(request("https://api.example.com/other"))
        _ = try await transport.data(for: request(url))
        #expect(await mine.next() == .updated(URL(string: url)!))
    }

    @Test("1,000 subscribers all hear one invalidation")
    func thousandSubscribers() async throws {
        let transport = makeTransport(loader: echoOrigin())
        _ = try await transport.data(for: request(url))
        let streams = (0..<1_000).map { _ in transport.changes() }
        #expect(transport.statistics.subscribers == 1_000)
        transport.invalidate(request(url))
        var heard = 0
        for stream in streams {
            var iterator = stream.makeAsyncIterator()
            if case .invalidated? = await iterator.next() { heard += 1 }
        }
        #expect(heard == 1_000)
    }

    @Test(
        "streams that end in any order leave every other stream hearing each change once", .timeLimit(.minutes(1)),
        arguments: 0..<8)
    func streamsEndingInAnyOrder(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let transport = makeTransport(loader: echoOrigin())
        var streams: [AsyncStream<CacheChange>?] = []
        for round in 0..<4 {
            streams += (0..<Int.random(in: 1...60, using: &random)).map { _ in transport.changes() }
            // Dropped one at a time, in no order: each leaves as its last reference goes.
            let dropped = Int.random(in: 0...streams.count, using: &random)
            for index in streams.indices.shuffled(using: &random).prefix(dropped) { streams[index] = nil }
            let listening = streams.compactMap { $0 }
            #expect(transport.statistics.subscribers == listening.count)
            let changed = URL(string: "\(url)?round=\(round)")!
            _ = try await transport.data(for: request(changed.absoluteString))
            transport.invalidate(request(changed.absoluteString))
            for stream in listening {
                var iterator = stream.makeAsyncIterator()
                #expect(await iterator.next() == .updated(changed))
                #expect(await iterator.next() == .invalidated(urls: [changed], endpoint: nil))
            }
        }
        streams.removeAll()
        #expect(transport.statistics.subscribers == 0)
    }

    @Test("updated is announced only when the bytes changed")
    func updatedOnlyOnChange() async throws {
        let version = Locked(1)
        let transport = makeTransport(loader: Self.versioned(version))
        _ = try await transport.data(for: request(url))
        var changes = transport.changes().makeAsyncIterator()
        _ = try await transport.refresh(request(url))  // same bytes: no event
        version.withLock { $0 = 2 }
        _ = try await transport.refresh(request(url))  // new bytes: updated
        transport.invalidateAll()
        #expect(await changes.next() == .updated(URL(string: url)!))
        #expect(await changes.next() == .cleared)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("a cancelled subscriber leaves no registration behind")
    func cancelledSubscriber() async throws {
        let transport = makeTransport(loader: echoOrigin())
        let listening = startCall {
            for await _ in transport.changes() {}
        }
        #expect(transport.statistics.subscribers == 1)
        listening.cancel()
        try await listening.value
        #expect(transport.statistics.subscribers == 0)
    }

    @Test("a dropped stream leaves no registration behind")
    func droppedStream() async throws {
        let transport = makeTransport(loader: echoOrigin())
        // The stream goes away when this returns: its last reference is released there.
        func registerAndDrop() {
            let stream = transport.changes()
            _ = stream
            #expect(transport.statistics.subscribers == 1)
        }
        registerAndDrop()
        #expect(transport.statistics.subscribers == 0)
    }

    @Test("a slow subscriber keeps only the newest changes and never blocks the transport")
    func boundedBuffer() async throws {
        let transport = makeTransport(loader: echoOrigin()) { $0.stayingCurrent.changeBufferLimit = 3 }
        let requests = (0..<10).map { request("https://example.com/\($0)") }
        for stored in requests { try transport.store(ProvisionalAnswer(for: stored, data: Data("x".utf8))) }
        var slow = transport.changes().makeAsyncIterator()
        for stored in requests.dropLast() { transport.invalidate(stored) }
        // Empties a store that still holds the last entry.
        transport.invalidateAll()
        #expect(await slow.next() == .invalidated(urls: [URL(string: "https://example.com/7")!], endpoint: nil))
        #expect(await slow.next() == .invalidated(urls: [URL(string: "https://example.com/8")!], endpoint: nil))
        #expect(await slow.next() == .cleared)
    }

    @Test("a successful POST announces the URLs it invalidated")
    func postEvent() async throws {
        let transport = makeTransport(loader: echoOrigin())
        _ = try await transport.data(for: request(url))
        var changes = transport.changes().makeAsyncIterator()
        _ = try await transport.data(for: request(url, method: "POST"))
        #expect(await changes.next() == .invalidated(urls: [URL(string: url)!], endpoint: nil))
    }
}
