import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Following HTTP caching (conformsToHTTPCaching)")
struct HTTPCachingTests {
    let url = "https://api.example.com/doc"

    func setUp(_ headers: @escaping @Sendable () -> [String: String]) -> (CachedTransport, ScriptedOrigin, TestClock) {
        let loader = ScriptedOrigin { request, call in
            ScriptedOrigin.Reply(status: 200, headers: headers(), body: Data("call=\(call)".utf8))
        }
        let clock = TestClock()
        let transport = makeTransport(loader: loader, clock: clock) { $0.freshness.conformsToHTTPCaching = true }
        return (transport, loader, clock)
    }

    @Test("max-age sets freshness: a hit within it, a fetch after it")
    func maxAge() async throws {
        let (transport, loader, clock) = setUp { ["Cache-Control": "max-age=60"] }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(59))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 1)
        clock.advance(by: .seconds(2))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 2)
    }

    @Test("Expires against Date sets freshness when there is no max-age")
    func expires() async throws {
        let (transport, loader, clock) = setUp { ["Date": httpDate(), "Expires": httpDate(100)] }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(90))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 1)
        clock.advance(by: .seconds(20))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 2)
    }

    @Test("an unreadable Expires, or one in the past, is stale at once", arguments: ["0", "yesterday", httpDate(-10)])
    func badExpires(expires: String) async throws {
        let (transport, loader, _) = setUp { ["Date": httpDate(), "Expires": expires] }
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 2)
    }

    @Test("without explicit freshness, a tenth of the time since Last-Modified is the heuristic lifetime")
    func heuristic() async throws {
        let (transport, loader, clock) = setUp { ["Date": httpDate(), "Last-Modified": httpDate(-10 * 3600)] }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(3500))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 1)
        clock.advance(by: .seconds(200))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 2)
    }

    @Test("a response with no freshness information is revalidated on every request")
    func noFreshness() async throws {
        let (transport, loader, _) = setUp { [:] }
        for _ in 0..<3 { _ = try await transport.data(for: request(url)) }
        #expect(loader.callCount == 3)
    }

    @Test("a received Age counts against max-age")
    func receivedAge() async throws {
        let (transport, loader, clock) = setUp { ["Cache-Control": "max-age=60", "Age": "50"] }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(9))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 1)
        clock.advance(by: .seconds(2))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 2)
    }

    @Test("answers from memory carry a generated Age")
    func generatedAge() async throws {
        let (transport, _, clock) = setUp { ["Cache-Control": "max-age=600", "Age": "5"] }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(30))
        let (_, response) = try await transport.data(for: request(url))
        let age = try #require((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Age").flatMap(Int.init))
        #expect((35...36).contains(age))
    }

    @Test("s-maxage is for shared caches and ignored")
    func sharedMaxAge() async throws {
        let (transport, loader, _) = setUp { ["Cache-Control": "s-maxage=600"] }
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 2)
    }

    @Test("a no-cache response is stored but revalidated before every use, with no header override")
    func noCacheResponse() async throws {
        let origin = ValidatingOrigin()
        origin.setHeader("Cache-Control", "no-cache, max-age=600")
        let loader = ScriptedOrigin(respond: origin.responder)
        let transport = makeTransport(loader: loader) { $0.freshness.conformsToHTTPCaching = true }
        let (stored, _) = try await transport.data(for: request(url))
        origin.setHeader("X-Generation", "2")
        let (again, response) = try await transport.data(for: request(url))
        #expect(again == stored)
        #expect(loader.callCount == 2)
        #expect(origin.notModifiedAnswers == 1)
        #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Control") == "no-cache, max-age=600")
        // The 304's headers updated the stored response.
        #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Generation") == "2")
    }

    @Test("must-revalidate: never answered stale, not in a window and not when the network fails")
    func mustRevalidate() async throws {
        let failing = Locked(false)
        let loader = ScriptedOrigin { request, call in
            if failing.withLock({ $0 }) { throw URLError(.notConnectedToInternet) }
            return ScriptedOrigin.Reply(
                headers: ["Cache-Control": "max-age=10, must-revalidate"], body: Data("call=\(call)".utf8))
        }
        let clock = TestClock()
        let transport = makeTransport(loader: loader, clock: clock) {
            $0.freshness.conformsToHTTPCaching = true
            $0.freshness.staleWhileRevalidate = .seconds(600)
            $0.freshness.staleIfError = true
        }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(11))
        failing.withLock { $0 = true }
        let error = await thrownError { try await transport.data(for: request(url)) }
        #expect((error as? URLError)?.code == .notConnectedToInternet)
        #expect(transport.statistics.staleWindowAnswers == 0)
    }

    @Test("a response's stale-while-revalidate opens a window for it")
    func responseStaleWhileRevalidate() async throws {
        let (transport, loader, clock) = setUp { ["Cache-Control": "max-age=10, stale-while-revalidate=60"] }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(30))
        let (data, response) = try await transport.data(for: request(url))
        #expect(data.text == "call=1")
        #expect(response.isRevalidatingAnswer)
        await loader.waitForCalls(2)
    }

    @Test("a request's max-age, min-fresh and max-stale are honoured")
    func requestDirectives() async throws {
        let (transport, loader, clock) = setUp { ["Cache-Control": "max-age=100"] }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(50))
        _ = try await transport.data(for: request(url, headers: ["Cache-Control": "max-age=60"]))
        #expect(loader.callCount == 1)
        _ = try await transport.data(for: request(url, headers: ["Cache-Control": "max-age=40"]))
        #expect(loader.callCount == 2)
        // The refetched entry has 100 s left: enough for min-fresh=90, not for 110.
        _ = try await transport.data(for: request(url, headers: ["Cache-Control": "min-fresh=90"]))
        #expect(loader.callCount == 2)
        _ = try await transport.data(for: request(url, headers: ["Cache-Control": "min-fresh=110"]))
        #expect(loader.callCount == 3)
        clock.advance(by: .seconds(150))
        _ = try await transport.data(for: request(url, headers: ["Cache-Control": "max-stale=100"]))
        #expect(loader.callCount == 3)
        _ = try await transport.data(for: request(url, headers: ["Cache-Control": "max-stale=10"]))
        #expect(loader.callCount == 4)
    }

    @Test("only-if-cached with max-age=0 or no-cache still never reaches the network")
    func onlyIfCachedWithRevalidation() async throws {
        let (transport, loader, clock) = setUp { ["Cache-Control": "max-age=100"] }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(1))
        // The entry is fresh but a second old, and neither request may use it unvalidated.
        for directives in ["only-if-cached, max-age=0", "only-if-cached, no-cache"] {
            let (_, response) = try await transport.data(for: request(url, headers: ["Cache-Control": directives]))
            #expect((response as? HTTPURLResponse)?.statusCode == 504)
        }
        #expect(loader.callCount == 1)
    }

    @Test("Pragma: no-cache counts only without Cache-Control, even one with no directive the cache reads")
    func pragmaBesideUnreadCacheControl() async throws {
        // `public` alone gives no lifetime, so the heuristic (a tenth of the time since
        // Last-Modified, here 10 days) decides; `Pragma` must not make it stale at once.
        let (transport, loader, _) = setUp {
            [
                "Cache-Control": "public", "Pragma": "no-cache",
                "Date": httpDate(), "Last-Modified": httpDate(-100 * 86_400),
            ]
        }
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 1)
    }

    @Test("only-if-cached answers 504 without the network when nothing usable is stored")
    func onlyIfCached() async throws {
        let (transport, loader, _) = setUp { ["Cache-Control": "max-age=100"] }
        let (_, missing) = try await transport.data(for: request(url, headers: ["Cache-Control": "only-if-cached"]))
        #expect((missing as? HTTPURLResponse)?.statusCode == 504)
        #expect(loader.callCount == 0)
        _ = try await transport.data(for: request(url))
        let (data, stored) = try await transport.data(for: request(url, headers: ["Cache-Control": "only-if-cached"]))
        #expect((stored as? HTTPURLResponse)?.statusCode == 200)
        #expect(data.text == "call=1")
        #expect(loader.callCount == 1)
    }

    @Test(
        "any final status with explicit freshness may be stored; without it, only the storable ones",
        arguments: [(404, true), (500, true), (201, true)])
    func explicitFreshnessStatuses(status: Int, stored: Bool) async throws {
        let loader = ScriptedOrigin { request, call in
            ScriptedOrigin.Reply(
                status: status, headers: ["Cache-Control": "max-age=60"], body: Data("call=\(call)".utf8))
        }
        let transport = makeTransport(loader: loader) { $0.freshness.conformsToHTTPCaching = true }
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == (stored ? 1 : 2))
        let plain = ScriptedOrigin(respond: ScriptedOrigin.status(status))
        let other = makeTransport(loader: plain) { $0.freshness.conformsToHTTPCaching = true }
        _ = try await other.data(for: request(url))
        _ = try await other.data(for: request(url))
        #expect(plain.callCount == 2)
    }

    @Test("requests with another policy keep the default behaviour")
    func otherPolicies() async throws {
        let (transport, loader, _) = setUp { ["Cache-Control": "no-cache"] }
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(url, policy: .returnCacheDataElseLoad))
        #expect(loader.callCount == 1)
    }
}
