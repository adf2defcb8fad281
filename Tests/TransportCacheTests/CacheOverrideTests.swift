import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("The header override")
struct CacheOverrideTests {
    let url = URL(string: "https://api.example.com/items")!

    func response(_ headers: [String: String]) -> HTTPURLResponse {
        HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: headers)!
    }

    @Test(
        "each form that stops caching is rewritten to max-age=N, the original kept readable",
        arguments: [
            ["Cache-Control": "no-cache"],
            ["Cache-Control": "no-store"],
            ["Cache-Control": "must-revalidate, max-age=60"],
            ["Cache-Control": "max-age=0"],
            ["Cache-Control": "private, max-age=60"],
            ["Cache-Control": "No-Cache"],
            ["Pragma": "no-cache"],
            ["Expires": "Thu, 01 Jan 1970 00:00:00 GMT"],
            ["Expires": "0"],
            ["Vary": "*"],
            [:],
        ])
    func rewrites(headers: [String: String]) {
        let rewritten = CacheOverride(writtenMaxAge: .seconds(120)).rewritten(response(headers))
        #expect(rewritten.value(forHTTPHeaderField: "Cache-Control") == "max-age=120")
        #expect(rewritten.value(forHTTPHeaderField: "Pragma") == nil)
        #expect(rewritten.value(forHTTPHeaderField: "Expires") == nil)
        #expect(rewritten.value(forHTTPHeaderField: "Vary") == nil)
        for (name, value) in headers {
            #expect(rewritten.value(forHTTPHeaderField: "X-Original-\(name)") == value)
        }
    }

    @Test("a response that is already cacheable is left as it is")
    func freshUntouched() {
        let fresh = response(["Cache-Control": "public, max-age=600", "Vary": "Accept-Encoding", "ETag": "\"1\""])
        let result = CacheOverride().rewritten(fresh)
        #expect(result === fresh)
    }

    @Test("other headers and the status survive the rewrite")
    func otherHeadersKept() {
        let original = HTTPURLResponse(
            url: url, statusCode: 203, httpVersion: "HTTP/1.1",
            headerFields: ["Cache-Control": "no-cache", "Content-Type": "application/json", "Vary": "Accept"])!
        let rewritten = CacheOverride().rewritten(original)
        #expect(rewritten.statusCode == 203)
        #expect(rewritten.value(forHTTPHeaderField: "Content-Type") == "application/json")
        #expect(rewritten.value(forHTTPHeaderField: "Vary") == "Accept")
    }

    @Test("an Expires is compared with the transport's clock, not the system's")
    func expiresReadByTheTransportClock() async throws {
        // 2010 is past by the system's clock and ahead of a clock set in 2000.
        let headers = ["Expires": "Fri, 01 Jan 2010 00:00:00 GMT"]
        let clock = TestClock(date: Date(timeIntervalSince1970: 946_684_800))
        var override = CacheOverride()
        #expect(override.rewritten(response(headers)).value(forHTTPHeaderField: "X-Original-Expires") != nil)
        override.clock = clock.cacheClock
        #expect(override.rewritten(response(headers)).value(forHTTPHeaderField: "X-Original-Expires") == nil)

        let loader = ScriptedOrigin(respond: ScriptedOrigin.ok(headers: headers))
        let transport = makeTransport(loader: loader, clock: clock)
        let (_, answer) = try await transport.data(for: request(url.absoluteString))
        let http = try #require(answer as? HTTPURLResponse)
        #expect(http.value(forHTTPHeaderField: "Expires") == headers["Expires"])
        #expect(http.value(forHTTPHeaderField: "X-Original-Expires") == nil)
    }

    @Test("it applies to every http(s) URL by default, and only to its endpoints when given")
    func scope() {
        #expect(CacheOverride().applies(to: url))
        #expect(!CacheOverride().applies(to: URL(string: "file:///tmp/x")!))
        let narrow = CacheOverride(endpoints: [.host("static.example.com")])
        #expect(narrow.applies(to: URL(string: "https://static.example.com/logo.png")!))
        #expect(!narrow.applies(to: url))
    }

    @Test("the transport stores a no-store response when the override applies, and not when it is off")
    func transportHonoursNoStoreWithoutOverride() async throws {
        let noStore = ScriptedOrigin(respond: ScriptedOrigin.ok(headers: ["Cache-Control": "no-store"]))
        let overridden = makeTransport(loader: noStore)
        _ = try await overridden.data(for: request(url.absoluteString))
        let (_, response) = try await overridden.data(for: request(url.absoluteString))
        #expect(noStore.callCount == 1)
        #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Original-Cache-Control") == "no-store")

        let honoured = ScriptedOrigin(respond: ScriptedOrigin.ok(headers: ["Cache-Control": "no-store"]))
        let plain = makeTransport(loader: honoured) { $0.network.cacheOverride = nil }
        _ = try await plain.data(for: request(url.absoluteString))
        _ = try await plain.data(for: request(url.absoluteString))
        #expect(honoured.callCount == 2)

        let outside = ScriptedOrigin(respond: ScriptedOrigin.ok(headers: ["Cache-Control": "no-store"]))
        let narrowed = makeTransport(loader: outside) {
            $0.network.cacheOverride = CacheOverride(endpoints: [.host("elsewhere.example.com")])
        }
        _ = try await narrowed.data(for: request(url.absoluteString))
        _ = try await narrowed.data(for: request(url.absoluteString))
        #expect(outside.callCount == 2)
    }

    @Test("with the override on (the default), a Vary: * answer is stored and reused like any other")
    func varyStarOverridden() async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.ok(headers: ["Vary": "*"]))
        let transport = makeTransport(loader: loader)
        let (_, response) = try await transport.data(for: request(url.absoluteString))
        _ = try await transport.data(for: request(url.absoluteString, headers: ["X-Other": "1"]))
        #expect(loader.callCount == 1)
        #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Original-Vary") == "*")
        #expect(response.cacheOutcome?.storage == .stored(changedBytes: true))
    }

    @Test("only the transport's maximumAge ages its entries; the override's is only the header it writes")
    func overrideAgeIsOnlyAHeader() async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.ok(headers: ["Cache-Control": "no-cache"]))
        let clock = TestClock()
        let transport = makeTransport(loader: loader, clock: clock) {
            $0.network.cacheOverride = CacheOverride(writtenMaxAge: .seconds(30))
            $0.freshness.maximumAge = .seconds(600)
        }
        let (_, response) = try await transport.data(for: request(url.absoluteString))
        #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Control") == "max-age=30")
        clock.advance(by: .seconds(31))
        _ = try await transport.data(for: request(url.absoluteString))
        #expect(loader.callCount == 1)
        clock.advance(by: .seconds(570))
        _ = try await transport.data(for: request(url.absoluteString))
        #expect(loader.callCount == 2)

        // Without a maximum age of its own, the transport keeps the entry until it is invalidated.
        let unbounded = ScriptedOrigin(respond: ScriptedOrigin.ok(headers: ["Cache-Control": "no-cache"]))
        let keeping = makeTransport(loader: unbounded, clock: clock) {
            $0.network.cacheOverride = CacheOverride(writtenMaxAge: .seconds(30))
        }
        _ = try await keeping.data(for: request(url.absoluteString))
        clock.advance(by: .seconds(365 * 24 * 3600))
        _ = try await keeping.data(for: request(url.absoluteString))
        #expect(unbounded.callCount == 1)
    }

    @Test("a transport's own fetches go through the override protocol, routed to that transport, unless it is off")
    func transportRoute() throws {
        let routed = URLSessionLoader(configuration: .ephemeral, routesThroughProtocol: true)
        let classes = routed.session.configuration.protocolClasses ?? []
        #expect(classes.first.map { $0 == TransportOverrideURLProtocol.self } == true)

        var tagged = URLRequest(url: url)
        #expect(!TransportOverrideURLProtocol.canInit(with: tagged))
        let route = try #require(routed.routeValue)
        tagged.setValue(route, forHTTPHeaderField: TransportOverrideURLProtocol.routeHeader)
        #expect(TransportOverrideURLProtocol.canInit(with: tagged))
        #expect(
            TransportOverrideURLProtocol.outgoingRequest(for: tagged).value(
                forHTTPHeaderField: TransportOverrideURLProtocol.routeHeader) == nil)

        let plain = URLSessionLoader(configuration: .ephemeral, routesThroughProtocol: false)
        #expect(
            !(plain.session.configuration.protocolClasses ?? []).contains { $0 == TransportOverrideURLProtocol.self })
        #expect(plain.routeValue == nil)
    }

    @Test("a dropped transport's route is gone: a request still tagged with it is not intercepted")
    func routeUnregistered() throws {
        var loader: URLSessionLoader? = URLSessionLoader(configuration: .ephemeral, routesThroughProtocol: true)
        var tagged = URLRequest(url: url)
        tagged.setValue(try #require(loader?.routeValue), forHTTPHeaderField: TransportOverrideURLProtocol.routeHeader)
        #expect(TransportOverrideURLProtocol.canInit(with: tagged))
        loader = nil
        #expect(!TransportOverrideURLProtocol.canInit(with: tagged))
    }
}
