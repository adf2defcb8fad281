import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Typed change streams")
struct ValueStreamTests {
    let url = "https://api.example.com/feed"

    @Test("the stream yields the current value, then each changed value in order")
    func currentThenChanges() async throws {
        let version = Locked(1)
        let loader = feedLoader(version)
        let transport = makeTransport(loader: loader)
        var values = transport.values(Feed.self, for: request(url)).makeAsyncIterator()
        #expect(try await values.next()?.version == 1)
        version.withLock { $0 = 2 }
        _ = try await transport.refresh(request(url))
        #expect(try await values.next()?.version == 2)
        // Identical bytes are not a change; the next element is the next change.
        _ = try await transport.refresh(request(url))
        version.withLock { $0 = 3 }
        _ = try await transport.refresh(request(url))
        #expect(try await values.next()?.version == 3)
        #expect(loader.callCount == 4)
        #expect(transport.statistics.decodes == 3)
    }

    @Test("two streams on one URL share each decode")
    func streamsShareDecodes() async throws {
        let version = Locked(1)
        let transport = makeTransport(loader: feedLoader(version))
        var one = transport.values(Feed.self, for: request(url)).makeAsyncIterator()
        var other = transport.values(Feed.self, for: request(url)).makeAsyncIterator()
        let a = try await one.next()
        let b = try await other.next()
        #expect(a === b)
        version.withLock { $0 = 2 }
        _ = try await transport.refresh(request(url))
        let c = try await one.next()
        let d = try await other.next()
        #expect(c === d)
        #expect(c?.version == 2)
        #expect(transport.statistics.decodes == 2)
    }

    @Test("after an invalidation the stream fetches again and yields the new value")
    func invalidationRefetches() async throws {
        let version = Locked(1)
        let loader = feedLoader(version)
        let transport = makeTransport(loader: loader)
        var values = transport.values(Feed.self, for: request(url)).makeAsyncIterator()
        #expect(try await values.next()?.version == 1)
        version.withLock { $0 = 2 }
        transport.invalidate(request(url))
        #expect(try await values.next()?.version == 2)
        version.withLock { $0 = 3 }
        transport.invalidateAll()
        #expect(try await values.next()?.version == 3)
        #expect(loader.callCount == 3)
    }

    @Test("a failure of the first value ends the stream with that error")
    func firstFailureEnds() async throws {
        let transport = makeTransport(loader: ScriptedOrigin(respond: ScriptedOrigin.failing(.notConnectedToInternet)))
        var values = transport.values(Feed.self, for: request(url)).makeAsyncIterator()
        let error = await thrownError { try await values.next() }
        #expect((error as? URLError)?.code == .notConnectedToInternet)
        #expect(transport.statistics.decodes == 0)
    }

    @Test("a later failure is skipped and the stream keeps listening")
    func laterFailureSkipped() async throws {
        let version = Locked(1)
        // The refetch after the invalidation (call 2) fails; the others answer.
        let loader = ScriptedOrigin { request, call in
            if call == 2 { throw URLError(.notConnectedToInternet) }
            return ScriptedOrigin.Reply(status: 200, body: feedBody(version.withLock { $0 }))
        }
        let transport = makeTransport(loader: loader)
        var values = transport.values(Feed.self, for: request(url)).makeAsyncIterator()
        #expect(try await values.next()?.version == 1)
        transport.invalidate(request(url))
        await loader.waitForCalls(2)
        version.withLock { $0 = 3 }
        _ = try await transport.refresh(request(url))
        #expect(try await values.next()?.version == 3)
        #expect(loader.callCount == 3)
    }

    @Test("a stream that decodes badly at first ends with the decoding error")
    func firstDecodingFailureEnds() async throws {
        let transport = makeTransport(loader: feedLoader(Locked(1)))
        var values = transport.values([Item].self, for: request(url)).makeAsyncIterator()
        let error = await thrownError { try await values.next() }
        #expect((error as? ValueDecodingError)?.code == .decodingFailed)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("a stream whose consumer stops releases its subscription")
    func stoppedStreamUnregisters() async throws {
        let transport = makeTransport(loader: feedLoader(Locked(1)))
        let log = CacheEventLog(transport)
        let consumer = startCall {
            for try await _ in transport.values(Feed.self, for: request(url)) {}
        }
        #expect(transport.statistics.subscribers == 1)
        await log.wait(for: 1, "decoded")
        #expect(transport.statistics.decodes == 1)
        consumer.cancel()
        _ = await consumer.result
        await transport.waitForChangeSubscribers(0)
        #expect(transport.statistics.subscribers == 0)
    }
}
