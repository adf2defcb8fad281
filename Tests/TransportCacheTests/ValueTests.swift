import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

/// A decoded body; a class, so a test can tell whether two calls got the very same decoded value.
final class Feed: Decodable, Sendable {
    let items: [Item]
    var version: Int { items.first?.id ?? -1 }
}

struct Item: Decodable, Sendable, Equatable {
    let id: Int
    let name: String
}

/// Another type decoded from the same bytes.
struct FeedNames: Decodable, Sendable {
    struct Named: Decodable, Sendable { let name: String }
    let items: [Named]
}

/// A JSON decoder that counts its decodes and, when holding, keeps each decode waiting until
/// ``release()``.
///
/// A held decode blocks a thread of the cooperative pool, which has only as many threads as the
/// machine has cores: one holding decoder exists at a time (``holding()``), so that two tests
/// never hold every thread of a two-core machine and stall each other until the holds time out.
final class CountingDecoder: ResponseDecoding {
    private let inner = JSONDecoder()
    private let decodes = Locked(0)
    /// Tests waiting until this many decodes have begun.
    private let watchers = Locked([(count: Int, continuation: CheckedContinuation<Void, Never>)]())
    private let holding: Bool
    private let released = DispatchSemaphore(value: 0)
    /// Whether this decoder still has the permit to hold (``holding()``).
    private let holdsPermit: Locked<Bool>

    /// The permit to hold decodes: taken by ``holding()``, given back by ``release()``.
    private static let holdPermit = Permit()

    init() {
        holding = false
        holdsPermit = Locked(false)
    }

    private init(holdingWithPermit: Void) {
        holding = true
        holdsPermit = Locked(true)
    }

    /// A decoder that holds each decode until ``release()``, once no other holding decoder is left
    /// unreleased.
    static func holding() async -> CountingDecoder {
        await holdPermit.acquire()
        return CountingDecoder(holdingWithPermit: ())
    }

    deinit {
        if holdsPermit.withLock({ $0 }) { Self.holdPermit.release() }
    }

    var count: Int { decodes.withLock { $0 } }

    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        let count = decodes.withLock { count in
            count += 1
            return count
        }
        let ready = watchers.withLock { watchers in
            defer { watchers.removeAll { $0.count <= count } }
            return watchers.filter { $0.count <= count }.map(\.continuation)
        }
        for watcher in ready { watcher.resume() }
        // Bounded, so a broken test fails instead of hanging; long enough that a pool whose threads
        // other tests hold does not outlast it, since a hold that ends early lets the decode end
        // before the waits a test makes next.
        if holding { _ = released.wait(timeout: .now() + 60) }
        return try inner.decode(type, from: data)
    }

    func release() {
        released.signal()
        let gives = holdsPermit.withLock { holds in
            defer { holds = false }
            return holds
        }
        if gives { Self.holdPermit.release() }
    }

    /// Returns once at least `count` decodes have begun (and, when holding, wait to be released).
    func waitForDecodes(_ count: Int) async {
        await withCheckedContinuation { continuation in
            // Under the watchers' lock, which a decode takes after counting itself.
            let ready = watchers.withLock { watchers in
                guard self.count < count else { return true }
                watchers.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }
}

/// A loader answering `{"items":[{"id":<version>,"name":"version <version>"}]}`: the bytes
/// change only when the test changes `version`.
/// One holder at a time; the others wait, in turn.
final class Permit: Sendable {
    private let state = Locked((taken: false, waiting: [CheckedContinuation<Void, Never>]()))

    func acquire() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                guard state.taken else {
                    state.taken = true
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Hands the permit to the next waiting, or frees it.
    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiting.isEmpty else {
                state.taken = false
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}

func feedLoader(_ version: Locked<Int>, gated: Bool = false) -> ScriptedOrigin {
    ScriptedOrigin(gated: gated) { request, _ in
        ScriptedOrigin.Reply(status: 200, body: feedBody(version.withLock { $0 }))
    }
}

func feedBody(_ version: Int) -> Data {
    Data(#"{"items":[{"id":\#(version),"name":"version \#(version)"}]}"#.utf8)
}

/// A loader answering every request with `body`.
func fixedLoader(_ body: String) -> ScriptedOrigin {
    ScriptedOrigin { request, _ in ScriptedOrigin.Reply(status: 200, body: Data(body.utf8)) }
}

/// A `JSONDecoder` with `configure` applied.
func jsonDecoder(_ configure: (JSONDecoder) -> Void = { _ in }) -> JSONDecoder {
    let decoder = JSONDecoder()
    configure(decoder)
    return decoder
}

extension CachedTransport {
    /// Callers waiting for another caller's decode, over every stored entry.
    var callersWaitingForDecode: Int {
        store.state.withLock { state in
            var total = 0
            state.entries.forEachEntry { _, variants in
                for stored in variants.all { total += stored.decoded.waitingCallers }
            }
            return total
        }
    }

    /// Decoded values kept, over every stored entry.
    var decodedValuesHeld: Int {
        store.state.withLock { state in
            var total = 0
            state.entries.forEachEntry { _, variants in
                for stored in variants.all { total += stored.decoded.count }
            }
            return total
        }
    }
}

@Suite("Decoded values")
struct ValueTests {
    let url = "https://api.example.com/feed"

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("two concurrent value calls share one fetch and one decode, and get the same value")
    func concurrentCallsDecodeOnce() async throws {
        let loader = feedLoader(Locked(1), gated: true)
        let transport = makeTransport(loader: loader)
        let decoder = await CountingDecoder.holding()
        let first = startCall { try await transport.value(Feed.self, for: request(url), decoder: decoder) }
        let second = startCall { try await transport.value(Feed.self, for: request(url), decoder: decoder) }
        #expect(transport.statistics.coalescedJoins == 1)
        await loader.waitForCalls(1)
        loader.openGate()
        // One caller decodes (held by the decoder) while the other waits for its result.
        await decoder.waitForDecodes(1)
        // The other caller, resumed by the fetch's answer, starts waiting for the decode on its
        // own thread.
        await transport.store.waitForDecodeWaits(1)
        decoder.release()
        let (a, b) = (try await first.value, try await second.value)
        #expect(a === b)
        #expect(a.version == 1)
        #expect(decoder.count == 1)
        #expect(loader.callCount == 1)
        #expect(transport.statistics.decodes == 1)
    }

    @Test("a later call gets the decoded value from memory without decoding again")
    func laterCallsHit() async throws {
        let loader = feedLoader(Locked(1))
        let transport = makeTransport(loader: loader)
        let first = try await transport.value(Feed.self, for: request(url))
        let again = try await transport.value(Feed.self, from: URL(string: url)!)
        #expect(first === again)
        #expect(loader.callCount == 1)
        #expect(transport.statistics.decodes == 1)
        #expect(transport.statistics.decodedHits == 1)
        #expect(transport.statistics.memoryHits == 1)
    }

    @Test("two types on one entry decode separately, once each")
    func twoTypesDecodeSeparately() async throws {
        let loader = feedLoader(Locked(1))
        let transport = makeTransport(loader: loader)
        let decoder = CountingDecoder()
        let feed = try await transport.value(Feed.self, for: request(url), decoder: decoder)
        let names = try await transport.value(FeedNames.self, for: request(url), decoder: decoder)
        _ = try await transport.value(Feed.self, for: request(url), decoder: decoder)
        _ = try await transport.value(FeedNames.self, for: request(url), decoder: decoder)
        #expect(feed.items.map(\.name) == names.items.map(\.name))
        #expect(decoder.count == 2)
        #expect(loader.callCount == 1)
    }

    @Test("two decoders on one entry decode separately, since their settings shape the result")
    func twoDecodersDecodeSeparately() async throws {
        let transport = makeTransport(loader: feedLoader(Locked(1)))
        let one = CountingDecoder()
        let other = CountingDecoder()
        let a = try await transport.value(Feed.self, for: request(url), decoder: one)
        let b = try await transport.value(Feed.self, for: request(url), decoder: other)
        #expect(a !== b)
        #expect(one.count == 1)
        #expect(other.count == 1)
    }

    @Test("invalidating the entry drops its decoded value")
    func invalidationDrops() async throws {
        let loader = feedLoader(Locked(1))
        let transport = makeTransport(loader: loader)
        let decoder = CountingDecoder()
        let before = try await transport.value(Feed.self, for: request(url), decoder: decoder)
        transport.invalidate(request(url))
        let after = try await transport.value(Feed.self, for: request(url), decoder: decoder)
        #expect(before !== after)
        #expect(decoder.count == 2)
        #expect(loader.callCount == 2)
    }

    @Test("a refresh that brings new bytes drops the decoded value")
    func refreshWithNewBytesDrops() async throws {
        let version = Locked(1)
        let transport = makeTransport(loader: feedLoader(version))
        let decoder = CountingDecoder()
        let before = try await transport.value(Feed.self, for: request(url), decoder: decoder)
        version.withLock { $0 = 2 }
        _ = try await transport.refresh(request(url))
        let after = try await transport.value(Feed.self, for: request(url), decoder: decoder)
        #expect(before.version == 1)
        #expect(after.version == 2)
        #expect(decoder.count == 2)
    }

    @Test("a refresh that brings identical bytes keeps the decoded value, and its charge")
    func refreshWithSameBytesKeeps() async throws {
        let loader = feedLoader(Locked(1))
        let transport = makeTransport(loader: loader)
        let decoder = CountingDecoder()
        let before = try await transport.value(Feed.self, for: request(url), decoder: decoder)
        let held = transport.statistics.bytesHeld
        _ = try await transport.refresh(request(url))
        let after = try await transport.value(Feed.self, for: request(url), decoder: decoder)
        #expect(before === after)
        #expect(decoder.count == 1)
        #expect(loader.callCount == 2)
        #expect(transport.statistics.bytesHeld == held)
    }

    @Test("a reload policy decodes the fetched answer once and keeps it for later hits")
    func reloadPolicy() async throws {
        let version = Locked(1)
        let transport = makeTransport(loader: feedLoader(version))
        let decoder = CountingDecoder()
        _ = try await transport.value(Feed.self, for: request(url), decoder: decoder)
        version.withLock { $0 = 2 }
        let reloaded = try await transport.value(
            Feed.self, for: request(url, policy: .reloadIgnoringLocalCacheData), decoder: decoder)
        let hit = try await transport.value(Feed.self, for: request(url), decoder: decoder)
        #expect(reloaded.version == 2)
        #expect(reloaded === hit)
        #expect(decoder.count == 2)
    }

    @Test("evicting the entry drops its decoded value")
    func evictionDrops() async throws {
        let loader = feedLoader(Locked(1))
        // Room for the decoded entry and one more entry, not two.
        let transport = makeTransport(loader: loader) {
            $0.storage.memoryCapacity = 1_000
            $0.storage.maximumEntryShare = 1
        }
        let decoder = CountingDecoder()
        let before = try await transport.value(Feed.self, for: request(url), decoder: decoder)
        _ = try await transport.data(for: request("https://api.example.com/b"))
        _ = try await transport.data(for: request("https://api.example.com/c"))
        #expect(transport.statistics.evictions == 1)
        let after = try await transport.value(Feed.self, for: request(url), decoder: decoder)
        #expect(before !== after)
        #expect(decoder.count == 2)
        #expect(loader.callCount(for: url) == 2)
    }

    @Test("a decoded value is charged its body's bytes plus 64, and bytes held never pass the capacity")
    func chargedToTheBudget() async throws {
        let transport = makeTransport(loader: feedLoader(Locked(1))) {
            $0.storage.memoryCapacity = 3_000
            $0.storage.maximumEntryShare = 1
        }
        let (data, _) = try await transport.data(for: request(url))
        let stored = transport.statistics.bytesHeld
        _ = try await transport.value(Feed.self, for: request(url))
        #expect(transport.statistics.bytesHeld == stored + data.count + 64)
        for index in 0..<30 {
            _ = try await transport.value(Feed.self, for: request("https://api.example.com/feed/\(index)"))
            _ = try await transport.value(FeedNames.self, for: request("https://api.example.com/feed/\(index)"))
            #expect(transport.statistics.bytesHeld <= 3_000)
        }
        #expect(transport.statistics.evictions > 0)
    }

    @Test("entries evicted to make room for a decoded value are reported like every other eviction")
    func decodeEvictionsReported() async throws {
        // Room for two bare entries, not for two with their values.
        let transport = makeTransport(loader: feedLoader(Locked(1))) {
            $0.storage.memoryCapacity = 1_000
            $0.storage.maximumEntryShare = 1
            $0.stayingCurrent.changeBufferLimit = 10_000
        }
        var events = transport.events().makeAsyncIterator()
        var evictionsByDecodes = 0
        for index in 0..<30 {
            let feed = request("https://api.example.com/feed/\(index)")
            _ = try await transport.data(for: feed)
            // Memory hits: only the decodes charge the budget.
            let before = transport.statistics.evictions
            _ = try await transport.value(Feed.self, for: feed)
            _ = try await transport.value(FeedNames.self, for: feed)
            evictionsByDecodes += transport.statistics.evictions - before
        }
        #expect(evictionsByDecodes > 0)
        let marker = URL(string: "https://api.example.com/marker")!
        _ = try await transport.data(from: marker)
        var reported = 0
        while let event = await events.next() {
            if case .evicted = event.kind { reported += 1 }
            if case .answered = event.kind, event.url == marker { break }
        }
        #expect(reported == transport.statistics.evictions)
    }

    @Test("a decoding failure names the type and the URL, is not kept, and leaves the bytes usable")
    func decodingFailure() async throws {
        let loader = feedLoader(Locked(1))
        let transport = makeTransport(loader: loader)
        let error = await thrownError { try await transport.value([Item].self, for: request(url)) }
        let failure = try #require(error as? ValueDecodingError)
        #expect(failure.code == .decodingFailed)
        #expect(failure.typeName == "Swift.Array<TransportCacheTests.Item>")
        #expect(failure.url.absoluteString == url)
        #expect(failure.underlyingError is DecodingError)
        #expect(failure.description.contains(url) && failure.description.contains("Item"))
        // The bytes are still stored and serve other types and plain data.
        let feed = try await transport.value(Feed.self, for: request(url))
        #expect(feed.version == 1)
        let (data, _) = try await transport.data(for: request(url))
        #expect(data == feedBody(1))
        #expect(loader.callCount == 1)
        // The failure was not kept: the next call decodes again, and fails again.
        let again = await thrownError { try await transport.value([Item].self, for: request(url)) }
        #expect((again as? ValueDecodingError)?.code == .decodingFailed)
        #expect(transport.statistics.decodes == 3)
        #expect(loader.callCount == 1)
    }

    @Test("an answer outside 200-299 is an error naming its status, and is not decoded")
    func unacceptableStatus() async throws {
        let transport = makeTransport(loader: ScriptedOrigin(respond: ScriptedOrigin.status(404)))
        let error = await thrownError { try await transport.value(Feed.self, for: request(url)) }
        let failure = try #require(error as? ValueDecodingError)
        #expect(failure.code == .unacceptableStatus)
        #expect(failure.statusCode == 404)
        #expect(transport.statistics.decodes == 0)
    }

    @Test("returnCacheDataDontLoad answers a decoded value from memory or throws without loading")
    func dontLoad() async throws {
        let loader = feedLoader(Locked(1))
        let transport = makeTransport(loader: loader)
        let error = await thrownError {
            try await transport.value(Feed.self, for: request(url, policy: .returnCacheDataDontLoad))
        }
        #expect((error as? URLError)?.code == .resourceUnavailable)
        let fetched = try await transport.value(Feed.self, for: request(url))
        let remembered = try await transport.value(Feed.self, for: request(url, policy: .returnCacheDataDontLoad))
        #expect(fetched === remembered)
        #expect(loader.callCount == 1)
    }
}
