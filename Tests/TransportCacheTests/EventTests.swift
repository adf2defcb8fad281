import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Events", .timeLimit(.minutes(1)))
struct EventTests {
    let url = "https://api.example.com/feed"

    /// The next `count` events of `iterator`.
    func next(_ count: Int, of iterator: inout CacheEvents.AsyncIterator) async -> [CacheEvent] {
        var events: [CacheEvent] = []
        for _ in 0..<count {
            guard let event = await iterator.next() else { break }
            events.append(event)
        }
        return events
    }

    /// The kinds' names, to compare sequences.
    func names(_ events: [CacheEvent]) -> [String] {
        events.map(\.kind.name)
    }

    @Test("a miss reports its fetch, its store and its answer in that order; a hit its answer")
    func missThenHit() async throws {
        let transport = makeTransport(loader: echoOrigin())
        var events = transport.events().makeAsyncIterator()
        let (data, _) = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(url))
        let seen = await next(5, of: &events)
        #expect(names(seen) == ["fetchStarted", "fetchEnded", "stored", "answered", "answered"])
        #expect(seen.allSatisfy { $0.url.absoluteString == url })
        if case .fetchStarted(let reason, let conditional) = seen[0].kind {
            #expect(reason == .noEntry)
            #expect(!conditional)
        }
        if case .fetchEnded(let status, let bytes, _) = seen[1].kind {
            #expect(status == 200)
            #expect(bytes == data.count)
        }
        if case .stored(let bytes, let changedBytes) = seen[2].kind {
            #expect(bytes == data.count)
            #expect(changedBytes)
        }
        if case .answered(let outcome) = seen[3].kind { #expect(outcome.source == .network(.noEntry)) }
        if case .answered(let outcome) = seen[4].kind { #expect(outcome == CacheOutcome(source: .memory(.fresh))) }
    }

    @Test("failures, refusals to store, invalidations, evictions and decodes are reported")
    func otherKinds() async throws {
        struct Item: Decodable, Sendable { let name: String }
        let origin = ScriptedOrigin { request, call in
            switch request.url?.path {
            case "/fail": .failure(.cannotConnectToHost)
            case "/cookie": .init(headers: ["Set-Cookie": "s=1"], text: "cookie")
            case "/item": .init(text: #"{"name":"one"}"#)
            default: .init(body: Data(repeating: 0x61, count: 300))
            }
        }
        let transport = makeTransport(loader: origin) {
            $0.storage.memoryCapacity = 2_000
            $0.storage.maximumEntryShare = 1
        }
        var events = transport.events().makeAsyncIterator()

        _ = try? await transport.data(for: request("https://api.example.com/fail"))
        let failure = await next(3, of: &events)
        #expect(names(failure) == ["fetchStarted", "fetchEnded", "failed"])
        if case .failed(let outcome, let error) = failure[2].kind {
            #expect(outcome?.source == .network(.noEntry))
            #expect((error as? URLError)?.code == .cannotConnectToHost)
        }

        _ = try await transport.data(for: request("https://api.example.com/cookie"))
        let refused = await next(4, of: &events)
        #expect(names(refused) == ["fetchStarted", "fetchEnded", "notStored", "answered"])
        if case .notStored(let reason) = refused[2].kind { #expect(reason == .setsCookie) }

        _ = try await transport.value(Item.self, for: request("https://api.example.com/item"))
        let decoded = await next(5, of: &events)
        #expect(names(decoded) == ["fetchStarted", "fetchEnded", "stored", "answered", "decoded"])
        if case .decoded(let type) = decoded[4].kind { #expect(type == "Item") }

        transport.invalidate(request("https://api.example.com/item"))
        let invalidated = await next(1, of: &events)
        #expect(names(invalidated) == ["invalidated"])
        #expect(invalidated.first?.url.absoluteString == "https://api.example.com/item")

        // Each entry is charged about 600 bytes: the fourth evicts the first.
        for index in 0..<4 { _ = try await transport.data(for: request("https://api.example.com/big/\(index)")) }
        let filling = await next(17, of: &events)
        #expect(names(filling).filter { $0 == "evicted" }.count == 1)
        #expect(filling.first { names([$0]) == ["evicted"] }?.url.absoluteString == "https://api.example.com/big/0")
    }

    @Test("a revalidation confirmed by a 304 reports the conditional fetch and the entry it kept")
    func notModified() async throws {
        let origin = ValidatingOrigin()
        let clock = TestClock()
        let transport = makeTransport(loader: ScriptedOrigin(respond: origin.responder), clock: clock) {
            $0.freshness.maximumAge = .seconds(60)
        }
        _ = try await transport.data(for: request(url))
        var events = transport.events().makeAsyncIterator()
        clock.advance(by: .seconds(61))
        _ = try await transport.data(for: request(url))
        let seen = await next(4, of: &events)
        #expect(names(seen) == ["fetchStarted", "fetchEnded", "stored", "answered"])
        if case .fetchStarted(let reason, let conditional) = seen[0].kind {
            #expect(reason == .expired)
            #expect(conditional)
        }
        if case .fetchEnded(let status, let bytes, _) = seen[1].kind {
            #expect(status == 304)
            #expect(bytes == 0)
        }
        if case .stored(_, let changedBytes) = seen[2].kind { #expect(!changedBytes) }
    }

    @Test("with no stream registered the store is not observed; a stream observes it until dropped")
    func observedOnlyWhileRegistered() async throws {
        let transport = makeTransport(loader: echoOrigin())
        let observed = { transport.store.state.withLock { $0.isObserved } }
        #expect(!observed())
        // The stream goes away when this returns: its last reference is released there.
        func registerAndDrop() {
            let stream = transport.events()
            _ = stream
            #expect(observed())
        }
        registerAndDrop()
        #expect(!observed())
        _ = try await transport.data(for: request(url))
        #expect(!observed())
    }

    @Test("a consumer waiting for an event ends with nil when its task is cancelled, and unregisters")
    func cancelledConsumerEnds() async throws {
        let transport = makeTransport(loader: echoOrigin())
        let observed = { transport.store.state.withLock { $0.isObserved } }
        let events = transport.events()
        let waiting = Gate()
        let consumer = Task {
            var iterator = events.makeAsyncIterator()
            waiting.open()
            return await iterator.next()
        }
        try await waiting.wait()
        #expect(observed())
        consumer.cancel()
        #expect(await consumer.value == nil)
        #expect(!observed())
        // Nothing more reaches it, and a request no longer makes events for it.
        _ = try await transport.data(for: request(url))
        var after = events.makeAsyncIterator()
        #expect(await after.next() == nil)
    }

    @Test("a waiting consumer is handed each event as it happens, in order, across many requests")
    func waitingConsumerGetsEachEvent() async throws {
        // Room for every event, so that none is dropped while the consumer runs behind.
        let transport = makeTransport(loader: echoOrigin()) { $0.stayingCurrent.changeBufferLimit = 1_000 }
        let events = transport.events()
        let consumer = Task {
            var seen: [String] = []
            for await event in events {
                seen.append(event.kind.name)
                if seen.count == 203 { break }
            }
            return seen
        }
        _ = try await transport.data(for: request(url))
        for _ in 0..<200 { _ = try await transport.data(for: request(url)) }
        let seen = await consumer.value
        #expect(seen.prefix(4) == ["fetchStarted", "fetchEnded", "stored", "answered"])
        #expect(seen.dropFirst(4) == ArraySlice(Array(repeating: "answered", count: 199)))
    }

    @Test("when the transport goes away a stream ends after the events it holds")
    func endsWithTheTransport() async throws {
        var transport: CachedTransport? = makeTransport(loader: echoOrigin())
        var iterator = transport!.events().makeAsyncIterator()
        _ = try await transport!.data(for: request(url))
        transport = nil
        let held = await next(10, of: &iterator)
        #expect(names(held) == ["fetchStarted", "fetchEnded", "stored", "answered"])
        #expect(await iterator.next() == nil)
    }

    @Test("a stream nobody reads keeps only the newest events and never blocks a request")
    func boundedBuffer() async throws {
        let transport = makeTransport(loader: echoOrigin()) { $0.stayingCurrent.changeBufferLimit = 5 }
        var slow = transport.events().makeAsyncIterator()
        _ = try await transport.data(for: request(url))
        for _ in 0..<100 { _ = try await transport.data(for: request(url)) }
        _ = try await transport.data(for: request(url, policy: .reloadIgnoringLocalCacheData))
        // The newest five: the last hit, then the reload's fetch, store and answer.
        let kept = await next(5, of: &slow)
        #expect(names(kept) == ["answered", "fetchStarted", "fetchEnded", "stored", "answered"])
    }

    @Test("a non-HTTP answer, which cannot carry its outcome, is reported as passed through")
    func notHTTPAnswer() async throws {
        // The scripted origin answers HTTP only; this answers as URLSession does a `file:` URL.
        struct FileLoader: NetworkLoading {
            func load(_ request: URLRequest) async throws -> (Data, URLResponse) {
                (
                    Data("file".utf8),
                    URLResponse(url: request.url!, mimeType: nil, expectedContentLength: 4, textEncodingName: nil)
                )
            }
        }
        let transport = CachedTransport(configuration: .init(), loader: FileLoader())
        var events = transport.events().makeAsyncIterator()
        let (_, response) = try await transport.data(for: request("file:///tmp/feed.json"))
        #expect(response.cacheOutcome == nil)
        let seen = await next(1, of: &events)
        if case .answered(let outcome) = seen.first?.kind {
            #expect(outcome.source == .passedThrough(.notHTTP))
        } else {
            Issue.record("expected an answered event, got \(seen)")
        }
    }

    @Test("an event reads as one line")
    func description() {
        let url = URL(string: "https://api.example.com/feed")!
        #expect(
            CacheEvent(url: url, kind: .answered(CacheOutcome(source: .memory(.fresh)))).description
                == "answered https://api.example.com/feed: memory (fresh)")
        #expect(
            CacheEvent(url: url, kind: .notStored(.status(404))).description
                == "not stored https://api.example.com/feed: status 404")
    }
}
