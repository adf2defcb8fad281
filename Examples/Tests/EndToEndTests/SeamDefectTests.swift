import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache
import TransportCacheTesting

@Suite("HTTP decisions at the seams")
struct SeamDefectTests {
    @Test("a 304's Set-Cookie reaches its caller but never the stored entry")
    func notModifiedSetCookie() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let path = "/session?stable=1"
            let url = origin.url(path)
            let (stored, first) = try await transport.data(from: url)
            #expect(field("Set-Cookie", of: first) == nil)

            // The revalidation's 304 sets a cookie: it belongs to that exchange alone.
            let (data, refreshed) = try await transport.refresh(
                request(url, headers: ["X-Origin-Query": "setcookie=1"]))
            #expect(await origin.notModifiedAnswers(path) == 1)
            #expect(data == stored)
            #expect(field("Set-Cookie", of: refreshed) == "session=2")

            // A later answer from memory must not hand that session to whoever asks next.
            let (again, later) = try await transport.data(from: url)
            #expect(again == stored)
            #expect(await origin.hits(path) == 2)
            #expect(field("Set-Cookie", of: later) == nil)
        }
    }

    @Test("a 304 that names another Vary makes the stored entry answer only the request it was validated for")
    func notModifiedVary() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let path = "/flavor?stable=1"
            let url = origin.url(path)
            let (stored, _) = try await transport.data(for: request(url, headers: ["X-Flavor": "a"]))

            // The origin now selects by X-Flavor: the entry is the representation for "a".
            let (data, _) = try await transport.refresh(
                request(url, headers: ["X-Flavor": "a", "X-Origin-Query": "vary=X-Flavor"]))
            #expect(data == stored)
            #expect(await origin.notModifiedAnswers(path) == 1)

            let (same, _) = try await transport.data(for: request(url, headers: ["X-Flavor": "a"]))
            #expect(same == stored)
            #expect(await origin.hits(path) == 2)
            // Another flavor is another representation, which memory does not hold.
            _ = try await transport.data(for: request(url, headers: ["X-Flavor": "b"]))
            #expect(await origin.hits(path) == 3)
        }
    }

    @available(macOS 26.0, *)
    @Test("coalesced callers each get an answer that matches their request's Vary")
    func coalescedCallersMatchVary() async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            configuration.network.cacheOverride = nil
            let transport = CachedTransport(configuration: configuration)

            // The answer for "a" cannot serve "b": one request per flavor.
            let flavored = "/flavored?gate=1&vary=X-Flavor"
            let flavors = try await heldAnswers(
                ["a", "b"].map { request(origin.url(flavored), headers: ["X-Flavor": $0]) },
                of: flavored, on: transport, origin: origin
            ).map { try $0.get().0 }
            #expect(await origin.hits(flavored) == 2)
            #expect(flavors.count == 2 && flavors[0] != flavors[1])

            // Vary: * matches no other request: each caller needs a request of its own.
            let anything = "/anything?gate=1&vary=*"
            let callers = 3
            let bodies = try await heldAnswers(
                (0..<callers).map { _ in request(origin.url(anything)) },
                of: anything, on: transport, origin: origin
            ).map { try $0.get().0 }
            #expect(await origin.hits(anything) == callers)
            #expect(Set(bodies).count == callers)
        }
    }

    @Test("following HTTP caching, value(_:for:) revalidates a stale entry as data(for:) does")
    func valueRevalidatesStaleEntry() async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            configuration.freshness.conformsToHTTPCaching = true
            let transport = CachedTransport(configuration: configuration)
            // max-age=0: stale the moment it is stored, with no stale-while-revalidate window.
            let path = "/decoded?stable=1&cc=maxage0"
            let url = origin.url(path)
            let decoder = PlainTextDecoder()

            let first = try await transport.value(PlainText.self, for: URLRequest(url: url), decoder: decoder)
            #expect(first.text.hasPrefix("path=/decoded "))
            let second = try await transport.value(PlainText.self, for: URLRequest(url: url), decoder: decoder)
            #expect(second == first)
            // A stale entry is not used without asking the origin (a 304 counts).
            #expect(await origin.hits(path) == 2)

            // The data path does the same with the same entry.
            let before = await origin.hits(path)
            _ = try await transport.data(from: url)
            #expect(await origin.hits(path) == before + 1)
        }
    }

    @available(macOS 26.0, *)
    @Test("a refresh sends its own request even while a background revalidation that began before it is in flight")
    func refreshDoesNotJoinEarlierRevalidation() async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            configuration.freshness.maximumAge = .zero
            configuration.freshness.staleWhileRevalidate = .seconds(600)
            let transport = CachedTransport(configuration: configuration)
            let path = "/feed?stable=1"
            let url = origin.url(path)
            let (stored, _) = try await transport.data(from: url)

            // Stale at once: answered from memory while a background revalidation waits at the gate.
            await origin.closeGate()
            let held = request(url, headers: ["X-Origin-Query": "gate=1"])
            let (stale, staleResponse) = try await transport.data(for: held)
            #expect(stale == stored)
            #expect(staleResponse.isRevalidatingAnswer)
            await origin.waitForHits(path, count: 2)
            #expect(transport.statistics.backgroundRevalidations == 1)

            // The refresh began after that revalidation: its answer must come from a request of its own.
            let joinsBefore = transport.statistics.coalescedJoins
            let refresh = startCall { try await transport.refresh(held) }
            // Checked before waiting for its request: had it joined, none would ever arrive.
            try #require(transport.statistics.coalescedJoins == joinsBefore)
            await origin.waitForHits(path, count: 3)
            #expect(await origin.hits(path) == 3)

            await origin.openGate()
            let (data, response) = try await refresh.value
            #expect(data == stored)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
        }
    }

    @Test("past the byte bound of a URL's variants the least recently used one goes and the newest is kept")
    func variantsWithinBound() async throws {
        try await withOrigin { origin in
            let capacity = 10_000
            var configuration = CachedTransport.Configuration()
            configuration.storage.memoryCapacity = capacity
            configuration.storage.maximumEntryShare = 1
            configuration.storage.maximumVariants = 4
            let transport = CachedTransport(configuration: configuration)
            let path = "/variants?size=4000&vary=X-Flavor"
            let url = origin.url(path)
            var changes = transport.changes().makeAsyncIterator()
            func get(_ flavor: String) async throws {
                _ = try await transport.data(for: request(url, headers: ["X-Flavor": flavor]))
            }

            for (fetched, flavor) in ["a", "b", "c"].enumerated() {
                try await get(flavor)
                #expect(await origin.hits(path) == fetched + 1)
                // What is announced as updated is held: the same flavor is answered from memory.
                #expect(await changes.next() == .updated(url))
                try await get(flavor)
                #expect(await origin.hits(path) == fetched + 1, "flavor \(flavor) was announced but not kept")
                if flavor == "a" {
                    // Two variants fit within the largest entry (share 1 of the capacity), three do not.
                    let one = transport.statistics.bytesHeld
                    try #require(2 * one <= capacity && 3 * one > capacity, "one variant costs \(one)")
                }
            }
            #expect(transport.statistics.stores == 3)
            #expect(transport.statistics.entries == 1)
            #expect(transport.statistics.bytesHeld <= capacity)

            // The newest two are kept, and the least recently used one was dropped.
            try await get("c")
            try await get("b")
            #expect(await origin.hits(path) == 3)
            try await get("a")
            #expect(await origin.hits(path) == 4)
            #expect(transport.statistics.bytesHeld <= capacity)
        }
    }
}

/// The value of the header field `name` of `response`.
private func field(_ name: String, of response: URLResponse) -> String? {
    (response as? HTTPURLResponse)?.value(forHTTPHeaderField: name)
}

/// Closes the origin's gate, sends `requests` (whose URL must carry `gate=1`) at once, waits until
/// each has either reached the origin or joined a fetch in flight, opens the gate, and returns
/// their outcomes in the order of `requests`.
@available(macOS 26.0, *)
private func heldAnswers(
    _ requests: [URLRequest],
    of pathAndQuery: String,
    on transport: CachedTransport,
    origin: LoopbackOrigin
) async -> [Result<(Data, URLResponse), any Error>] {
    await origin.closeGate()
    let joinsBefore = transport.statistics.coalescedJoins
    let hitsBefore = await origin.hits(pathAndQuery)
    // Each request has joined a fetch or started one when `startCall` returns: those that did
    // not join reach the origin.
    let tasks = requests.map { request in startCall { try await transport.data(for: request) } }
    let joined = transport.statistics.coalescedJoins - joinsBefore
    await origin.waitForHits(pathAndQuery, count: hitsBefore + requests.count - joined)
    await origin.openGate()
    var outcomes: [Result<(Data, URLResponse), any Error>] = []
    for task in tasks { outcomes.append(await task.result) }
    return outcomes
}

/// A body taken as UTF-8 text.
private struct PlainText: Decodable, Equatable, Sendable {
    let text: String
}

/// Decodes ``PlainText`` from any body.
private final class PlainTextDecoder: ResponseDecoding {
    struct Unsupported: Error {}

    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        guard let value = PlainText(text: String(decoding: data, as: UTF8.self)) as? Value else {
            throw Unsupported()
        }
        return value
    }
}
