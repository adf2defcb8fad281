import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Every Vary variant")
struct VariantTests {
    let url = "https://api.example.com/greeting"

    /// A loader whose body names the `X-Flavor` it was asked for, with `Vary: X-Flavor`.
    static func flavored() -> ScriptedOrigin {
        ScriptedOrigin { request, call in
            let flavor = request.value(forHTTPHeaderField: "X-Flavor") ?? "-"
            return ScriptedOrigin.Reply(
                status: 200, headers: ["Vary": "X-Flavor"], body: Data("flavor=\(flavor) call=\(call)".utf8))
        }
    }

    @Test("three Vary variants alternated 30 times cost three origin fetches")
    func threeVariantsAlternated() async throws {
        let loader = Self.flavored()
        let transport = makeTransport(loader: loader)
        let flavors = ["plain", "salted", "sweet"]
        for round in 0..<30 {
            let flavor = flavors[round % 3]
            let (data, _) = try await transport.data(for: request(url, headers: ["X-Flavor": flavor]))
            #expect(data.text.hasPrefix("flavor=\(flavor) "))
        }
        #expect(loader.callCount == 3)
        #expect(transport.statistics.memoryHits == 27)
    }

    @Test("the variants of a key are bounded, least recently used dropped first")
    func boundedVariants() async throws {
        let loader = Self.flavored()
        let transport = makeTransport(loader: loader) { $0.storage.maximumVariants = 2 }
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "a"]))
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "b"]))
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "a"]))  // a is now the most recent
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "c"]))  // drops b
        #expect(loader.callCount == 3)
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "a"]))
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "c"]))
        #expect(loader.callCount == 3)
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "b"]))
        #expect(loader.callCount == 4)
    }

    @Test("invalidating a URL drops all its variants")
    func invalidationDropsAllVariants() async throws {
        let loader = Self.flavored()
        let transport = makeTransport(loader: loader)
        for flavor in ["a", "b", "c"] { _ = try await transport.data(for: request(url, headers: ["X-Flavor": flavor])) }
        let held = transport.statistics.bytesHeld
        #expect(held > 0)
        transport.invalidate(request(url))
        #expect(transport.statistics.bytesHeld == 0)
        for flavor in ["a", "b", "c"] { _ = try await transport.data(for: request(url, headers: ["X-Flavor": flavor])) }
        #expect(loader.callCount == 6)
    }

    @Test("every variant is charged against the byte budget")
    func variantsAreCharged() async throws {
        let transport = makeTransport(loader: Self.flavored())
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "a"]))
        let one = transport.statistics.bytesHeld
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "b"]))
        #expect(transport.statistics.bytesHeld > one + 200)
        #expect(transport.statistics.entries == 1)
    }

    @Test("when the origin names other Vary headers, the older variants are dropped")
    func varyChangeDropsOlderVariants() async throws {
        let names = Locked("X-Flavor")
        let loader = ScriptedOrigin { request, call in
            let vary = names.withLock { $0 }
            return ScriptedOrigin.Reply(status: 200, headers: ["Vary": vary], body: Data("call=\(call)".utf8))
        }
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "a", "X-Size": "1"]))
        names.withLock { $0 = "X-Size" }
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "b", "X-Size": "1"]))
        // The first answer varied on X-Flavor only; it must not answer a request for size 2.
        let (data, _) = try await transport.data(for: request(url, headers: ["X-Flavor": "a", "X-Size": "2"]))
        #expect(data.text == "call=3")
    }

    @Test("a refresh of one variant keeps the others")
    func refreshKeepsOtherVariants() async throws {
        let loader = Self.flavored()
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "a"]))
        _ = try await transport.data(for: request(url, headers: ["X-Flavor": "b"]))
        let refreshed = try await transport.refresh(request(url, headers: ["X-Flavor": "a"])).0
        #expect(refreshed.text == "flavor=a call=3")
        #expect(try await transport.data(for: request(url, headers: ["X-Flavor": "b"])).0.text == "flavor=b call=2")
        #expect(try await transport.data(for: request(url, headers: ["X-Flavor": "a"])).0 == refreshed)
        #expect(loader.callCount == 3)
    }
}
