import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Identities never cross")
struct IdentityTests {
    let url = "https://api.example.com/session"

    @Test(
        "a response that sets a cookie is never stored, so no later request is handed it",
        arguments: [true, false])
    func setCookieIsNotStored(overrideOn: Bool) async throws {
        let loader = ScriptedOrigin(
            respond: ScriptedOrigin.ok(headers: [
                "Set-Cookie": "session=alice; HttpOnly", "Cache-Control": "public, max-age=600",
            ]))
        let transport = makeTransport(loader: loader) { if !overrideOn { $0.network.cacheOverride = nil } }
        let alice = try await transport.data(for: request(url)).0
        let next = try await transport.data(for: request(url)).0
        #expect(alice != next)
        #expect(next.text.contains("call=2"))
        #expect(loader.callCount == 2)
        #expect(transport.statistics.stores == 0)
        #expect(transport.statistics.entries == 0)
    }

    @Test("a Set-Cookie in any case of the name keeps the response out of the store")
    func setCookieNameCase() async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.ok(headers: ["set-COOKIE": "s=1"]))
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 2)
    }

    @Test("a Set-Cookie2 keeps the response out of the store as Set-Cookie does")
    func setCookie2() async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.ok(headers: ["Set-Cookie2": "s=1"]))
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 2)
    }

    @Test("a response that sets a cookie is not served stale to anyone either")
    func setCookieNotServedStale() async throws {
        let loader = ScriptedOrigin { request, call in
            if call > 1 { throw URLError(.notConnectedToInternet) }
            return try ScriptedOrigin.ok(headers: ["Set-Cookie": "session=alice"])(request, call)
        }
        let transport = makeTransport(loader: loader) { $0.freshness.staleIfError = true }
        _ = try await transport.data(for: request(url))
        let error = await thrownError { try await transport.data(for: request(url)) }
        #expect((error as? URLError)?.code == .notConnectedToInternet)
        #expect(transport.statistics.staleAnswers == 0)
    }

    @Test("responses without Set-Cookie on the same URL are still stored")
    func otherResponsesStored() async throws {
        let loader = ScriptedOrigin { request, call in
            let headers = request.url?.path == "/session" ? ["Set-Cookie": "s=1"] : [:]
            return try ScriptedOrigin.ok(headers: headers)(request, call)
        }
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request("https://api.example.com/profile"))
        _ = try await transport.data(for: request("https://api.example.com/profile"))
        #expect(loader.callCount == 1)
        #expect(transport.statistics.stores == 1)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("five identities, twenty concurrent callers each: every caller gets its own identity's body")
    func concurrentIdentities() async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let identities: [[String: String]] = [
            ["Authorization": "Bearer alice"],
            ["Authorization": "Bearer bob"],
            ["Cookie": "session=carol"],
            ["Cookie": "session=dave"],
            [:],
        ]
        let callers = identities.enumerated().flatMap { index, headers in
            startCalls(20) {
                (index, try await transport.data(for: request("https://api.example.com/me", headers: headers)))
            }
        }
        #expect(transport.statistics.coalescedJoins == 95)
        await loader.waitForCalls(5)
        loader.openGate()
        var bodies: [Int: Set<Data>] = [:]
        for caller in callers {
            let (index, (data, _)) = try await caller.value
            bodies[index, default: []].insert(data)
        }
        #expect(bodies.count == 5)
        #expect(bodies.values.allSatisfy { $0.count == 1 })
        #expect(Set(bodies.values.compactMap(\.first)).count == 5)
        // Each identity's body names the call that fetched it; that call carried its headers.
        let calls = loader.calls
        for (index, headers) in identities.enumerated() {
            let body = try #require(bodies[index]?.first).text
            let call = try #require(body.split(separator: "=").last.flatMap { Int($0) })
            #expect(calls[call - 1].value(forHTTPHeaderField: "Authorization") == headers["Authorization"])
            #expect(calls[call - 1].value(forHTTPHeaderField: "Cookie") == headers["Cookie"])
        }
        #expect(loader.callCount == 5)
    }
}
