import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Selecting values compare once normalised")
struct VaryNormalisationTests {
    let url = "https://api.example.com/doc"

    /// How many times the origin is asked for requests with `first` then `second` header fields,
    /// answered with `Vary: vary`.
    func calls(vary: String, _ first: [String: String], _ second: [String: String], httpCaching: Bool = true)
        async throws -> Int
    {
        let loader = ScriptedOrigin { _, call in
            ScriptedOrigin.Reply(headers: ["Cache-Control": "max-age=600", "Vary": vary], text: "call=\(call)")
        }
        let transport = makeTransport(loader: loader) {
            $0.freshness.conformsToHTTPCaching = httpCaching
            $0.network.cacheOverride = nil
        }
        _ = try await transport.data(for: request(url, headers: first))
        _ = try await transport.data(for: request(url, headers: second))
        return loader.callCount
    }

    @Test(
        "Accept-Language selects alike whatever its order, case and spaces",
        arguments: ["de, en", "eN, De", " en ,   de", "en,de", "de,en"])
    func acceptLanguage(second: String) async throws {
        #expect(
            try await calls(vary: "Accept-Language", ["Accept-Language": "en, de"], ["Accept-Language": second]) == 1)
        #expect(
            try await calls(
                vary: "Accept-Language", ["Accept-Language": "en, de"], ["Accept-Language": second], httpCaching: false)
                == 1)
    }

    @Test(
        "other languages or weights still select another representation", arguments: ["en", "en, fr", "en;q=0.5, de"])
    func otherLanguages(second: String) async throws {
        #expect(
            try await calls(vary: "Accept-Language", ["Accept-Language": "en, de"], ["Accept-Language": second]) == 2)
    }

    @Test("any selecting field compares without the spaces around it and its commas", arguments: [" 1, 2 ", "1 ,2"])
    func spaces(second: String) async throws {
        #expect(try await calls(vary: "Foo", ["Foo": "1,2"], ["Foo": second]) == 1)
        #expect(try await calls(vary: "Foo", ["Foo": "1,2"], ["Foo": "2,1"]) == 2)
        #expect(try await calls(vary: "Foo", ["Foo": "\"a, b\""], ["Foo": "\"a,b\""]) == 2)
    }

    @Test("credentials are never normalised: a byte of difference is another identity")
    func credentials() async throws {
        #expect(
            try await calls(vary: "Foo", ["Authorization": "Digest a=1,b=2"], ["Authorization": "Digest a=1, b=2"]) == 2
        )
        #expect(try await calls(vary: "Cookie", ["Cookie": "a=1,b=2"], ["Cookie": "a=1, b=2"]) == 2)
        #expect(Vary.normalized(" x , y ", lowercasedName: "authorization") == " x , y ")
    }

    @Test("the normal form")
    func normalForm() {
        #expect(Vary.normalized("eN-gb ; q=0.8, De", lowercasedName: "accept-language") == "de, en-gb;q=0.8")
        #expect(Vary.normalized(" 1 ,2 ", lowercasedName: "foo") == "1, 2")
        #expect(Vary.normalized("text/html", lowercasedName: "accept") == "text/html")
    }
}
