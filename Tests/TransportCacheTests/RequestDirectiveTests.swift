import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Defaults and request directives")
struct RequestDirectiveTests {
    let url = "https://api.example.com/things"

    @Test(
        "201 and 202 answers are not stored by default; 200, 203 and 204 are",
        arguments: [(201, false), (202, false), (200, true), (203, true), (204, true)])
    func defaultStorableStatuses(status: Int, stored: Bool) async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.status(status))
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == (stored ? 1 : 2))
    }

    @Test("a request's Cache-Control: no-store goes to the origin and stores nothing")
    func requestNoStore() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request(url))
        let (data, _) = try await transport.data(for: request(url, headers: ["Cache-Control": "no-store"]))
        #expect(data.text.hasSuffix("call=2"))
        // The stored entry is untouched: the plain request still gets the first answer.
        #expect(try await transport.data(for: request(url)).0.text.hasSuffix("call=1"))
        let fresh = makeTransport(loader: loader)
        _ = try await fresh.data(for: request(url, headers: ["cache-control": "No-Store"]))
        #expect(fresh.statistics.entries == 0)
    }

    @Test(
        "a request's no-cache, max-age=0 or Pragma: no-cache revalidates the entry",
        arguments: [
            ["Cache-Control": "no-cache"], ["Cache-Control": "max-age=0"], ["Pragma": "no-cache"],
            ["cache-control": "private, MAX-AGE=0"],
        ])
    func requestRevalidates(headers: [String: String]) async throws {
        let origin = ValidatingOrigin()
        let loader = ScriptedOrigin(respond: origin.responder)
        let transport = makeTransport(loader: loader)
        let (stored, _) = try await transport.data(for: request(url))
        let (data, response) = try await transport.data(for: request(url, headers: headers))
        #expect(loader.callCount == 2)
        #expect(loader.calls[1].value(forHTTPHeaderField: "If-None-Match") == ValidatingOrigin.entityTag(version: 1))
        #expect(data == stored)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(origin.notModifiedAnswers == 1)
    }

    @Test("Pragma: no-cache does not count beside a Cache-Control that allows reuse")
    func pragmaBesideCacheControl() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(url, headers: ["Pragma": "no-cache", "Cache-Control": "max-age=60"]))
        #expect(loader.callCount == 1)
    }
}
