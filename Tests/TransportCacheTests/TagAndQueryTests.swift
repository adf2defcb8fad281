import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Tags and cacheable query POSTs")
struct TagAndQueryTests {
    static let base = "https://api.example.com"

    func post(_ path: String, body: String?) -> URLRequest {
        var request = URLRequest(url: URL(string: Self.base + path)!)
        request.httpMethod = "POST"
        request.httpBody = body.map { Data($0.utf8) }
        return request
    }

    @Test("invalidate(tag:) drops every entry given the tag, across URLs, and announces them; other tags stay")
    func invalidateByTag() async throws {
        let origin = echoOrigin()
        let transport = makeTransport(loader: origin)
        _ = try await transport.data(for: request(Self.base + "/articles"), tags: ["articles"])
        _ = try await transport.data(for: request(Self.base + "/users/1/articles"), tags: ["articles", "user:1"])
        _ = try await transport.data(for: request(Self.base + "/users/1"), tags: ["user:1"])
        let changes = transport.changes()

        #expect(transport.invalidate(tag: "articles") == 2)
        #expect(transport.invalidate(tag: "articles") == 0)
        #expect(transport.invalidate(tag: "nothing") == 0)
        transport.invalidateAll()

        var iterator = changes.makeAsyncIterator()
        #expect(
            await iterator.next()
                == .invalidated(
                    urls: [URL(string: Self.base + "/articles")!, URL(string: Self.base + "/users/1/articles")!],
                    endpoint: nil))
        #expect(await iterator.next() == .cleared)
        // Tags never reach the origin.
        #expect(
            origin.calls.allSatisfy {
                $0.allHTTPHeaderFields?.keys.contains { $0.lowercased().contains("tag") } != true
            })
    }

    @Test("a tag given to a request in flight stops that fetch from storing when invalidated")
    func tagInFlight() async throws {
        let origin = echoOrigin(gated: true)
        let transport = makeTransport(loader: origin)
        let url = Self.base + "/slow"
        let loading = Task { try await transport.data(for: request(url), tags: ["slow"]) }
        await origin.waitForCalls(1)
        transport.invalidate(tag: "slow")
        origin.openGate()
        _ = try await loading.value
        #expect(transport.statistics.entries == 0)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("a query POST is keyed by its body: the same body is coalesced and answered from memory, another is not")
    func queryPosts() async throws {
        let origin = echoOrigin(gated: true)
        let transport = makeTransport(loader: origin) { $0.network.queryEndpoints = [.pathPrefix("/graphql")] }
        let query = post("/graphql", body: #"{"query":"{ articles { id } }"}"#)
        let callers = startCalls(10) { try await transport.data(for: query).0 }
        #expect(transport.statistics.coalescedJoins == 9)
        await origin.waitForCalls(1)
        origin.openGate()
        var bodies = Set<Data>()
        for caller in callers { bodies.insert(try await caller.value) }
        #expect(bodies.count == 1)
        #expect(origin.callCount == 1)
        #expect(origin.calls.first?.httpMethod == "POST")

        let (_, _, again) = try await transport.response(for: query)
        #expect(again.source == .memory(.fresh))
        _ = try await transport.data(for: post("/graphql", body: #"{"query":"{ users { id } }"}"#))
        #expect(origin.callCount == 2)
        // A query POST invalidates nothing: the first query is still answered from memory.
        #expect(try await transport.response(for: query).2.source == .memory(.fresh))
        transport.invalidate(query)
        _ = try await transport.data(for: query)
        #expect(origin.callCount == 3)
    }

    @Test("a query POST is never retried")
    func queryNotRetried() async throws {
        let origin = ScriptedOrigin(respond: ScriptedOrigin.status(503))
        let transport = makeTransport(loader: origin) {
            $0.network.queryEndpoints = [.pathPrefix("/graphql")]
            $0.retryQuickly()
        }
        _ = try await transport.data(for: post("/graphql", body: "{}"))
        #expect(origin.callCount == 1)
        _ = try await transport.data(for: request(Self.base + "/graphql"))
        #expect(origin.callCount == 4)
    }

    @Test("every other POST behaves as before, and a query body over the bound passes through, invalidating nothing")
    func otherPosts() async throws {
        let origin = echoOrigin()
        let transport = makeTransport(loader: origin) {
            $0.network.queryEndpoints = [.pathPrefix("/search")]
            $0.network.maximumQueryBodySize = 16
        }
        _ = try await transport.data(for: request(Self.base + "/search"))
        let large = post("/search", body: String(repeating: "q", count: 17))
        let (_, _, outcome) = try await transport.response(for: large)
        #expect(outcome.source == .passedThrough(.queryBodyTooLarge))
        _ = try await transport.response(for: large)
        #expect(origin.callCount == 3)
        #expect(try await transport.response(for: request(Self.base + "/search")).2.source == .memory(.fresh))

        let (_, _, write) = try await transport.response(for: post("/articles", body: "new"))
        #expect(write.source == .passedThrough(.unsafeMethod))
        _ = try await transport.data(for: post("/articles", body: "new"))
        #expect(origin.callCount == 5)
    }
}
