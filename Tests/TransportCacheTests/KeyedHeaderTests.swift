import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Keyed headers: a header's value in the key, set only on what is kept or sent")
struct KeyedHeaderTests {
    let base = "https://api.example.com"

    /// An origin that echoes the `Accept-Language` and `X-Tenant` it was sent.
    func echoingOrigin() -> ScriptedOrigin {
        ScriptedOrigin { request, call in
            let language = request.value(forHTTPHeaderField: "Accept-Language") ?? "-"
            let tenant = request.value(forHTTPHeaderField: "X-Tenant") ?? "-"
            return .init(text: "\(request.url!.path) lang=\(language) tenant=\(tenant) call=\(call)")
        }
    }

    @Test("each value is a key of its own, goes out on the request, and a hit of it sends nothing")
    func valuesKeyAndGoOut() async throws {
        let origin = echoingOrigin()
        let language = Locked("de")
        let transport = makeTransport(loader: origin) { configuration in
            configuration.identity.requestAdapters = [
                .header("Accept-Language") { _ in language.withLock { $0 } },
                .header("X-Tenant") { _ in "acme" },
            ]
        }
        let feed = request("\(base)/feed")
        #expect(try await transport.data(for: feed).0.text == "/feed lang=de tenant=acme call=1")
        #expect(try await transport.data(for: feed).0.text == "/feed lang=de tenant=acme call=1")
        language.withLock { $0 = "fr" }
        #expect(try await transport.data(for: feed).0.text == "/feed lang=fr tenant=acme call=2")
        language.withLock { $0 = "de" }
        #expect(try await transport.data(for: feed).0.text == "/feed lang=de tenant=acme call=1")
        #expect(origin.callCount == 2)
        // Every call finds the entry the fetch stored under the header's value.
        #expect(transport.snapshot().entries.count == 2)
        transport.invalidate(feed)
        _ = try await transport.data(for: feed)
        #expect(origin.callCount == 3)
        #expect(transport.statistics.entries == 2)
    }

    @Test("nil takes the header off, and a header the request carries is replaced")
    func nilTakesTheHeaderOff() async throws {
        let origin = echoingOrigin()
        let transport = makeTransport(loader: origin) { configuration in
            configuration.identity.requestAdapters = [
                .header("Accept-Language") { request in request.url?.path == "/none" ? nil : "de" }
            ]
        }
        var own = request("\(base)/own")
        own.setValue("en", forHTTPHeaderField: "accept-language")
        #expect(try await transport.data(for: own).0.text == "/own lang=de tenant=- call=1")
        var none = request("\(base)/none")
        none.setValue("en", forHTTPHeaderField: "Accept-Language")
        #expect(try await transport.data(for: none).0.text == "/none lang=- tenant=- call=2")
        #expect(try await transport.data(for: none).0.text == "/none lang=- tenant=- call=2")
    }

    @Test(
        "the same value keys each account apart: one account's entry never answers another's",
        arguments: [IdentityConfiguration.authenticator, .partitions, .accounts])
    func sameValueEachAccount(identity: IdentityConfiguration) async throws {
        let origin = authenticatingOrigin(accepting: Locked(["Bearer me-1", "Bearer you-1"]))
        let (transport, credentials) = identity.transport(origin) { configuration in
            configuration.identity.requestAdapters = [.header("X-Tenant") { _ in "acme" }]
        }
        let mine = identity.request("\(base)/feed")
        var yours = mine
        if identity == .accounts { yours.account = "you" }
        #expect(try await transport.data(for: mine).0.text == "/feed auth=Bearer me-1 call=1")
        credentials?.credential = "you-1"
        #expect(try await transport.data(for: yours).0.text == "/feed auth=Bearer you-1 call=2")
        #expect(try await transport.data(for: yours).0.text == "/feed auth=Bearer you-1 call=2")
        // Each account's request went out with the value, under its own credential.
        #expect(origin.calls.map { $0.value(forHTTPHeaderField: "X-Tenant") } == ["acme", "acme"])
    }

    @Test("a keyed header that throws fails its call, sends nothing and stores nothing")
    func throwingHeader() async throws {
        struct NoTenant: Error {}
        let origin = echoingOrigin()
        let transport = makeTransport(loader: origin) { configuration in
            configuration.identity.requestAdapters = [.header("X-Tenant") { _ in throw NoTenant() }]
        }
        await #expect(throws: NoTenant.self) { try await transport.data(for: request("\(self.base)/feed")) }
        #expect(throws: NoTenant.self) {
            try transport.store(ProvisionalAnswer(for: request("\(self.base)/feed"), data: Data()))
        }
        #expect(origin.callCount == 0)
        #expect(transport.statistics.entries == 0)
    }

    @Test("a request the cache does not handle goes out with the keyed header too")
    func passedThroughWithTheHeader() async throws {
        let origin = echoingOrigin()
        let transport = makeTransport(loader: origin) { configuration in
            configuration.identity.requestAdapters = [.header("X-Tenant") { _ in "acme" }]
        }
        _ = try? await transport.data(for: request("custom://api.example.com/open"))
        var post = request("\(base)/orders", method: "POST")
        post.httpBody = Data("{}".utf8)
        _ = try await transport.data(for: post)
        #expect(origin.calls.count == 2)
        #expect(origin.calls.allSatisfy { $0.value(forHTTPHeaderField: "X-Tenant") == "acme" })
    }

    @Test("a response varying on the keyed header is found again by a hit that never sets it")
    func varyOnTheKeyedHeader() async throws {
        let origin = ScriptedOrigin { request, call in
            .init(
                headers: ["Vary": "Accept-Language"],
                text: "lang=\(request.value(forHTTPHeaderField: "Accept-Language") ?? "-") call=\(call)")
        }
        let transport = makeTransport(loader: origin) { configuration in
            configuration.identity.requestAdapters = [.header("Accept-Language") { _ in "de" }]
        }
        #expect(try await transport.data(for: request("\(base)/feed")).0.text == "lang=de call=1")
        #expect(try await transport.data(for: request("\(base)/feed")).0.text == "lang=de call=1")
        #expect(origin.callCount == 1)
    }
}
