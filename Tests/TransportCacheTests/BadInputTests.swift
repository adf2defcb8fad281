import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Bad input: odd URLs, headers and settings")
struct BadInputTests {
    // MARK: - URLs

    @Test(
        "other schemes pass through: never coalesced, never stored",
        arguments: [
            "ftp://files.example.com/report.txt",
            "myapp://open/items/7",
            "ws://socket.example.com/feed",
        ])
    func otherSchemes(url: String) async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let callers = (0..<3).map { _ in Task { try await transport.data(for: request(url)) } }
        await loader.waitForCalls(3)
        loader.openGate()
        for caller in callers { _ = try await caller.value }
        #expect(loader.callCount == 3)
        #expect(transport.statistics.coalescedJoins == 0)
        #expect(transport.statistics.stores == 0)
        #expect(transport.statistics.entries == 0)
    }

    @Test("a custom scheme reaches the caller as URLSession's error, and nothing is stored")
    func customSchemeThroughURLSession() async throws {
        let transport = CachedTransport()
        let url = try #require(URL(string: "myapp://open/items/7"))
        for _ in 0..<2 {
            let error = await thrownError { try await transport.data(from: url) }
            #expect((error as? URLError)?.code == .unsupportedURL)
        }
        #expect(transport.statistics.stores == 0)
        #expect(transport.statistics.networkFetches == 2)
    }

    @Test("a relative URL is never stored and reaches the caller as an error")
    func relativeURL() async throws {
        let transport = CachedTransport()
        let url = try #require(URL(string: "/items?page=1"))
        for _ in 0..<2 {
            let error = await thrownError { try await transport.data(from: url) }
            #expect(error is URLError)
        }
        #expect(transport.statistics.stores == 0)
        #expect(transport.statistics.entries == 0)
    }

    @Test("a relative URL given to the loader is not coalesced or stored")
    func relativeURLIsNotKeyed() async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let callers = (0..<2).map { _ in Task { try await transport.data(for: request("items/7")) } }
        await loader.waitForCalls(2)
        loader.openGate()
        for caller in callers { _ = try await caller.value }
        #expect(transport.statistics.coalescedJoins == 0)
        #expect(transport.statistics.stores == 0)
    }

    @Test(
        "malformed http URLs end in an error and store nothing",
        arguments: [
            "http:///no-host",
            "http://",
            "http://127.0.0.1:0/items",
            "http://:80/items",
        ])
    func malformedURL(string: String) async throws {
        let session = URLSessionConfiguration.ephemeral
        session.timeoutIntervalForRequest = 5
        let transport = CachedTransport(sessionConfiguration: session)
        let url = try #require(URL(string: string))
        let error = await thrownError { try await transport.data(from: url) }
        #expect(error is URLError)
        #expect(transport.statistics.stores == 0)
        #expect(transport.statistics.entries == 0)
    }

    @Test("the path keeps its case: /Items and /items are two entries")
    func pathCase() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        let upper = try await transport.data(for: request("HTTPS://API.EXAMPLE.COM/Items")).0
        let lower = try await transport.data(for: request("https://api.example.com/items")).0
        #expect(upper != lower)
        #expect(try await transport.data(for: request("https://api.example.com/Items")).0 == upper)
        #expect(loader.callCount == 2)
    }

    @Test("credentials in the URL's user info are part of the key")
    func userInfo() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        let alice = try await transport.data(for: request("https://alice:secret@api.example.com/me")).0
        let bob = try await transport.data(for: request("https://bob:secret@api.example.com/me")).0
        let nobody = try await transport.data(for: request("https://api.example.com/me")).0
        #expect(Set([alice, bob, nobody]).count == 3)
        #expect(loader.callCount == 3)
    }

    @Test("a 64 KB query is keyed whole, stored and charged against the budget")
    func hugeQuery() async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.body(size: 10))
        let transport = makeTransport(loader: loader)
        let query = String(repeating: "a", count: 64 * 1024)
        _ = try await transport.data(for: request("https://api.example.com/search?q=\(query)"))
        _ = try await transport.data(for: request("https://api.example.com/search?q=\(query)"))
        _ = try await transport.data(for: request("https://api.example.com/search?q=\(query)b"))
        #expect(loader.callCount == 2)
        #expect(transport.statistics.bytesHeld > 2 * 64 * 1024)
    }

    // MARK: - Bodies and capacities

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("a body larger than the whole capacity reaches every coalesced caller intact and evicts nothing")
    func bodyBeyondCapacity() async throws {
        let loader = ScriptedOrigin(
            gated: true,
            respond: { request, call in
                if request.url?.path == "/huge" { return try ScriptedOrigin.body(size: 300_000)(request, call) }
                return try ScriptedOrigin.ok()(request, call)
            }, holding: { $0.url?.path == "/huge" })
        let transport = makeTransport(loader: loader) {
            $0.storage.memoryCapacity = 100_000
            $0.storage.maximumEntryShare = 1
        }
        _ = try await transport.data(for: request("https://api.example.com/small"))
        let callers = startCalls(20) { try await transport.data(for: request("https://api.example.com/huge")) }
        #expect(transport.statistics.coalescedJoins == 19)
        await loader.waitForCalls(2)
        loader.openGate()
        for caller in callers { #expect(try await caller.value.0 == Data(repeating: 0x61, count: 300_000)) }
        #expect(transport.statistics.rejectedTooLarge == 1)
        #expect(transport.statistics.entries == 1)
        #expect(transport.statistics.evictions == 0)
        #expect(transport.statistics.bytesHeld <= 100_000)
        _ = try await transport.data(for: request("https://api.example.com/small"))
        #expect(loader.callCount == 2)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test(
        "zero, negative and absurd capacities and shares store nothing and still answer",
        arguments: [
            (0, 0.1), (-1, 0.1), (Int.min, 1.0), (100_000, 0.0), (100_000, -3.0), (100_000, Double.nan),
        ])
    func degenerateCapacity(capacity: Int, share: Double) async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader) {
            $0.storage.memoryCapacity = capacity
            $0.storage.maximumEntryShare = share
        }
        let callers = startCalls(10) { try await transport.data(for: request("https://api.example.com/a")) }
        #expect(transport.statistics.coalescedJoins == 9)
        await loader.waitForCalls(1)
        loader.openGate()
        var bodies = Set<Data>()
        for caller in callers { bodies.insert(try await caller.value.0) }
        #expect(bodies.count == 1)
        _ = try await transport.data(for: request("https://api.example.com/a"))
        #expect(loader.callCount == 2)
        #expect(transport.statistics.entries == 0)
        #expect(transport.statistics.bytesHeld == 0)
    }

    @Test("a share above one is capped at the capacity")
    func shareAboveOne() async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.body(size: 150_000))
        let transport = makeTransport(loader: loader) {
            $0.storage.memoryCapacity = 100_000
            $0.storage.maximumEntryShare = 5
        }
        _ = try await transport.data(for: request("https://api.example.com/a"))
        #expect(transport.statistics.entries == 0)
        #expect(transport.statistics.rejectedTooLarge == 1)
    }

    @Test("a change buffer of zero or less still delivers the newest change", arguments: [0, -5])
    func degenerateChangeBuffer(limit: Int) async throws {
        let transport = makeTransport(loader: echoOrigin()) { $0.stayingCurrent.changeBufferLimit = limit }
        _ = try await transport.data(for: request("https://api.example.com/items"))
        var changes = transport.changes().makeAsyncIterator()
        transport.invalidateAll()
        #expect(await changes.next() == .cleared)
    }

    // MARK: - Headers

    @Test("key header names in any case select the same entry; other values a different one")
    func headerNameCase() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        let first = try await transport.data(
            for: request("https://api.example.com/me", headers: ["AUTHORIZATION": "Bearer alice"])
        ).0
        let same = try await transport.data(
            for: request("https://api.example.com/me", headers: ["aUtHoRiZaTiOn": "Bearer alice"])
        ).0
        let other = try await transport.data(
            for: request("https://api.example.com/me", headers: ["authorization": "Bearer bob"])
        ).0
        #expect(first == same)
        #expect(other.text.contains("auth=Bearer bob"))
        #expect(loader.callCount == 2)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("key header values that differ only in case never share an entry or a fetch")
    func headerValueCase() async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let tokens = ["Bearer abc", "Bearer ABC", "bearer abc"]
        let callers = tokens.flatMap { token in
            startCalls(10) {
                (
                    token,
                    try await transport.data(
                        for: request("https://api.example.com/me", headers: ["Authorization": token])
                    ).0
                )
            }
        }
        #expect(transport.statistics.coalescedJoins == 27)
        await loader.waitForCalls(3)
        loader.openGate()
        for caller in callers {
            let (token, body) = try await caller.value
            #expect(body.text.contains("auth=\(token) "))
        }
        for token in tokens {
            let body = try await transport.data(
                for: request("https://api.example.com/me", headers: ["Authorization": token])
            ).0
            #expect(body.text.contains("auth=\(token) "))
        }
        #expect(loader.callCount == 3)
    }

    @Test("repeated header values are one value: they never match a request with only one of them")
    func repeatedValues() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        let url = URL(string: "https://api.example.com/me")!
        var alice = URLRequest(url: url)
        alice.setValue("Bearer alice", forHTTPHeaderField: "Authorization")
        var bob = URLRequest(url: url)
        bob.setValue("Bearer bob", forHTTPHeaderField: "Authorization")
        var both = URLRequest(url: url)
        both.addValue("Bearer alice", forHTTPHeaderField: "Authorization")
        both.addValue("Bearer bob", forHTTPHeaderField: "authorization")
        var twice = URLRequest(url: url)
        twice.addValue("Bearer alice", forHTTPHeaderField: "Authorization")
        twice.addValue("Bearer alice", forHTTPHeaderField: "Authorization")
        let aliceBody = try await transport.data(for: alice).0
        let bobBody = try await transport.data(for: bob).0
        let bothBody = try await transport.data(for: both).0
        let twiceBody = try await transport.data(for: twice).0
        #expect(Set([aliceBody, bobBody, bothBody, twiceBody]).count == 4)
        #expect(loader.callCount == 4)
        #expect(try await transport.data(for: alice).0 == aliceBody)
        #expect(try await transport.data(for: bob).0 == bobBody)
    }

    @Test("a Vary header names fields in any case and with odd spacing")
    func varyCase() async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.ok(headers: ["Vary": " x-ToKeN ,  ACCEPT-encoding "]))
        let transport = makeTransport(loader: loader) { $0.network.cacheOverride = nil }
        let one = try await transport.data(for: request("https://api.example.com/v", headers: ["X-Token": "1"])).0
        let again = try await transport.data(for: request("https://api.example.com/v", headers: ["x-token": "1"])).0
        let other = try await transport.data(for: request("https://api.example.com/v", headers: ["X-TOKEN": "2"])).0
        #expect(one == again)
        #expect(one != other)
        #expect(loader.callCount == 2)
    }

    @Test(
        "malformed and contradictory cache headers never stop an answer, and with the override on it is stored",
        arguments: [
            ["Cache-Control": "max-age=abc"],
            ["Cache-Control": "max-age=-5, no-store, max-age=600"],
            ["Cache-Control": "public, private, no-cache=\"Set-Cookie\""],
            ["Cache-Control": ",,,;;="],
            ["Expires": "not a date"],
            ["Expires": "Thu, 01 Jan 1970 00:00:00 GMT", "Cache-Control": "max-age=600"],
            ["Pragma": "no-cache", "Cache-Control": "max-age=600"],
            ["Vary": ""],
            ["Vary": ",,"],
        ])
    func oddCacheHeaders(headers: [String: String]) async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.ok(headers: headers))
        let transport = makeTransport(loader: loader)
        let first = try await transport.data(for: request("https://api.example.com/odd")).0
        let second = try await transport.data(for: request("https://api.example.com/odd")).0
        #expect(first.text.contains("call=1"))
        #expect(second == first)
        #expect(loader.callCount == 1)
    }

    @Test("with the override off, a no-store among contradictory directives wins")
    func contradictoryNoStore() async throws {
        let loader = ScriptedOrigin(
            respond: ScriptedOrigin.ok(headers: ["Cache-Control": "max-age=600, NO-STORE , public"]))
        let transport = makeTransport(loader: loader) { $0.network.cacheOverride = nil }
        _ = try await transport.data(for: request("https://api.example.com/odd"))
        _ = try await transport.data(for: request("https://api.example.com/odd"))
        #expect(loader.callCount == 2)
        #expect(transport.statistics.stores == 0)
    }
}
