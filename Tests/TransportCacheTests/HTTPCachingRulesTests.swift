import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Following HTTP caching: parsing, heuristics, must-understand and stale-if-error")
struct HTTPCachingRulesTests {
    let url = "https://api.example.com/doc"

    func setUp(
        httpCaching: Bool = true, staleIfError: Bool = false,
        replies: @escaping @Sendable (Int) -> ScriptedOrigin.Reply
    ) -> (CachedTransport, ScriptedOrigin, TestClock) {
        let loader = ScriptedOrigin { _, call in replies(call) }
        let clock = TestClock()
        let transport = makeTransport(loader: loader, clock: clock) {
            $0.freshness.conformsToHTTPCaching = httpCaching
            $0.network.cacheOverride = nil
            $0.freshness.staleIfError = staleIfError
        }
        return (transport, loader, clock)
    }

    /// How many times the origin is asked for two requests ten seconds apart, the first answered
    /// with `status` and `headers`.
    func calls(status: Int = 200, _ headers: [String: String], httpCaching: Bool = true) async throws -> Int {
        let (transport, loader, clock) = setUp(httpCaching: httpCaching) { _ in
            ScriptedOrigin.Reply(status: status, headers: headers, text: "body")
        }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(10))
        _ = try await transport.data(for: request(url))
        return loader.callCount
    }

    @Test(
        "Cache-Control is read by its grammar: no spaces around =, integers only, the first of two max-age",
        arguments: [
            ("max-age=600", 1), ("max-age=\"600\"", 1), ("max-age=000600", 1), ("max-age =600", 2),
            ("max-age= 600", 2), ("max-age=600.0", 2), ("max-age=600a", 2), ("max-age=a600", 2),
            ("max-age=600, max-age=1", 1), ("max-age=1, max-age=600", 2), ("extension=\"max-age=600\", max-age=1", 2),
        ])
    func cacheControlGrammar(value: String, expectedCalls: Int) async throws {
        #expect(try await calls(["Cache-Control": value]) == expectedCalls)
    }

    @Test(
        "Age counts by its first integer, parameters aside; other values are ignored",
        arguments: [
            ("7200;foo=bar", 2), ("7200 ; foo=111", 2), ("7200", 2), ("7200.0", 1), ("-7200", 1), ("old, 7200", 1),
        ])
    func ageParsing(age: String, expectedCalls: Int) async throws {
        #expect(try await calls(["Cache-Control": "max-age=3600", "Age": age]) == expectedCalls)
    }

    @Test(
        "the heuristically cacheable statuses are stored and reused with heuristic freshness",
        arguments: [200, 203, 404, 405, 410, 414, 501])
    func heuristicStatuses(status: Int) async throws {
        let headers = ["Last-Modified": httpDate(-86_400), "Date": httpDate()]
        #expect(try await calls(status: status, headers) == 1)
    }

    @Test("the other statuses are not reused heuristically unless public", arguments: [201, 403, 502, 503, 599])
    func otherStatuses(status: Int) async throws {
        let headers = ["Last-Modified": httpDate(-86_400), "Date": httpDate()]
        #expect(try await calls(status: status, headers) == 2)
        #expect(try await calls(status: status, headers.merging(["Cache-Control": "public"]) { $1 }) == 1)
    }

    @Test("by default a 404 is not stored, whatever its heuristic freshness")
    func defaultModeKeepsStorableStatuses() async throws {
        let headers = ["Last-Modified": httpDate(-86_400), "Date": httpDate()]
        #expect(try await calls(status: 404, headers, httpCaching: false) == 2)
    }

    @Test("must-understand stores a status it knows in spite of no-store, and no other")
    func mustUnderstand() async throws {
        let cacheControl = ["Cache-Control": "max-age=600, no-store, must-understand"]
        #expect(try await calls(status: 200, cacheControl) == 1)
        #expect(try await calls(status: 404, cacheControl) == 1)
        #expect(try await calls(status: 599, cacheControl) == 2)
        #expect(try await calls(status: 599, ["Cache-Control": "max-age=600, must-understand"]) == 2)
        #expect(try await calls(status: 200, cacheControl, httpCaching: false) == 2)
    }

    /// The answer after the entry, stored with `cacheControl`, went stale `after` seconds ago and
    /// the origin then answered with `failure`.
    func answerAfterFailure(
        _ cacheControl: String, failure: ScriptedOrigin.Reply, after seconds: Int = 10, configured: Bool = false
    ) async throws -> (Data, URLResponse) {
        let (transport, _, clock) = setUp(staleIfError: configured) { call in
            call == 1 ? ScriptedOrigin.Reply(headers: ["Cache-Control": cacheControl], text: "stored") : failure
        }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(1 + seconds))
        return try await transport.data(for: request(url))
    }

    @Test("the response's own stale-if-error answers stale within its window after a failure or a server error")
    func ownStaleIfError() async throws {
        let unavailable = ScriptedOrigin.Reply(status: 503, text: "down")
        for failure in [ScriptedOrigin.Reply.failure(.networkConnectionLost), unavailable] {
            let (data, response) = try await answerAfterFailure("max-age=1, stale-if-error=60", failure: failure)
            #expect(data.text == "stored")
            #expect(response.isStaleAnswer)
        }
        let late = try await answerAfterFailure("max-age=1, stale-if-error=60", failure: unavailable, after: 120)
        #expect((late.1 as? HTTPURLResponse)?.statusCode == 503)
        await #expect(throws: URLError.self) {
            try await answerAfterFailure("max-age=1, stale-if-error=60", failure: .failure(.timedOut), after: 120)
        }
    }

    @Test("configured staleIfError answers a server error stale following HTTP, never past what forbids it")
    func configuredStaleIfError() async throws {
        let unavailable = ScriptedOrigin.Reply(status: 503, text: "down")
        let stale = try await answerAfterFailure("max-age=1", failure: unavailable, configured: true)
        #expect(stale.0.text == "stored")
        let notAnError = try await answerAfterFailure(
            "max-age=1", failure: ScriptedOrigin.Reply(status: 404, text: "gone"), configured: true)
        #expect(notAnError.0.text == "gone")
        for forbidden in [
            "max-age=1, must-revalidate", "no-cache", "max-age=1, proxy-revalidate", "max-age=1, s-maxage=1",
        ] {
            let (data, response) = try await answerAfterFailure(forbidden, failure: unavailable, configured: true)
            #expect(data.text == "down")
            #expect(!response.isStaleAnswer)
        }
    }
}
