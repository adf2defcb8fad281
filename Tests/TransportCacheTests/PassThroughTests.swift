import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Requests that are not cached")
struct PassThroughTests {
    let url = "https://api.example.com/items/7"

    @Test("POST is never coalesced or stored")
    func postIsNotCoalesced() async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let posts = (0..<3).map { _ in Task { try await transport.data(for: request(url, method: "POST")) } }
        await loader.waitForCalls(3)
        loader.openGate()
        var bodies = Set<Data>()
        for post in posts { bodies.insert(try await post.value.0) }
        #expect(bodies.count == 3)
        #expect(transport.statistics.coalescedJoins == 0)
        #expect(transport.statistics.stores == 0)
    }

    @Test("a successful POST invalidates the stored GET of its URL, for every identity")
    func postInvalidatesGet() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(url, headers: ["Authorization": "Bearer alice"]))
        _ = try await transport.data(for: request("https://api.example.com/items/8"))
        _ = try await transport.data(for: request(url, method: "POST"))
        #expect(transport.statistics.entries == 1)
        let refetched = try await transport.data(for: request(url)).0
        #expect(refetched.text.contains("call=5"))
        _ = try await transport.data(for: request("https://api.example.com/items/8"))
        #expect(loader.callCount == 5)
    }

    @Test("a POST answered with an error status invalidates nothing")
    func failedPostKeepsEntries() async throws {
        let loader = ScriptedOrigin { request, call in
            if request.httpMethod == "POST" { return try ScriptedOrigin.status(500)(request, call) }
            return try ScriptedOrigin.ok()(request, call)
        }
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(url, method: "POST"))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 2)
    }

    @Test("Location and Content-Location of a successful PUT are invalidated when on the same origin")
    func locationInvalidation() async throws {
        let loader = ScriptedOrigin { request, call in
            if request.httpMethod == "PUT" {
                return ScriptedOrigin.Reply(
                    status: 201,
                    headers: [
                        "Location": "/items/8",
                        "Content-Location": "https://other.example.com/items/9",
                    ])
            }
            return try ScriptedOrigin.ok()(request, call)
        }
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request("https://api.example.com/items/8"))
        _ = try await transport.data(for: request("https://other.example.com/items/9"))
        _ = try await transport.data(for: request("https://api.example.com/items", method: "PUT"))
        _ = try await transport.data(for: request("https://api.example.com/items/8"))
        _ = try await transport.data(for: request("https://other.example.com/items/9"))
        #expect(loader.callCount(for: "https://api.example.com/items/8") == 2)
        #expect(loader.callCount(for: "https://other.example.com/items/9") == 1)
    }

    @Test("a GET in flight when a POST succeeds still answers but does not refill the store")
    func getInFlightAcrossPost() async throws {
        let loader = ScriptedOrigin(gated: true, respond: ScriptedOrigin.ok(), holding: { $0.httpMethod == "GET" })
        let transport = makeTransport(loader: loader)
        let get = Task { try await transport.data(for: request(url)) }
        await loader.waitForCalls(1)
        _ = try await transport.data(for: request(url, method: "POST"))
        loader.openGate()
        #expect(try await get.value.0.text.contains("call=1"))
        #expect(transport.statistics.stores == 0)
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 3)
    }

    @Test("a file: URL passes through to URLSession and its error reaches the caller")
    func fileScheme() async throws {
        let transport = CachedTransport()
        let error = await thrownError { try await transport.data(from: URL(fileURLWithPath: "/etc/hostname")) }
        #if canImport(FoundationNetworking)
        #expect((error as? URLError)?.code == .unsupportedURL)
        #else
        #expect(error == nil)
        #endif
        #expect(transport.statistics.stores == 0)
    }

    @Test("a data: URL passes through and is not stored")
    func dataScheme() async throws {
        let transport = CachedTransport()
        let (data, _) = try await transport.data(from: URL(string: "data:text/plain;base64,aGVsbG8=")!)
        #expect(data.text == "hello")
        #expect(transport.statistics.stores == 0)
        #expect(transport.statistics.networkFetches == 1)
    }

    @Test("a request without a URL throws badURL")
    func noURL() async throws {
        let transport = makeTransport(loader: echoOrigin())
        var empty = URLRequest(url: URL(string: "https://example.com")!)
        empty.url = nil
        let error = await thrownError { try await transport.data(for: empty) }
        #expect((error as? URLError)?.code == .badURL)
    }
}
