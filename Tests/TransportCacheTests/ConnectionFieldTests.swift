import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("HTTP caching: connection fields")
struct ConnectionFieldTests {
    @Test("fields the response's Connection names are neither stored nor passed on")
    func connectionListedFields() async throws {
        let loader = ScriptedOrigin(
            respond: ScriptedOrigin.ok(headers: ["Connection": "a, close", "A": "1", "Cache-Control": "max-age=60"]))
        let transport = makeTransport(loader: loader) { $0.freshness.conformsToHTTPCaching = true }
        let (_, first) = try await transport.data(for: request("https://api.example.com/c"))
        let (_, second) = try await transport.data(for: request("https://api.example.com/c"))
        #expect(loader.callCount == 1)
        for response in [first, second] {
            #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "A") == nil)
            #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Control") == "max-age=60")
        }
    }
}
