import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Requests with their own conditions or range")
struct BypassTests {
    let url = "https://api.example.com/list"

    @Test(
        "a caller's own If-None-Match reaches the origin, gets its 304, and stores nothing", arguments: [true, false])
    func callersOwnCondition(storedFirst: Bool) async throws {
        let origin = ValidatingOrigin()
        let loader = ScriptedOrigin(respond: origin.responder)
        let transport = makeTransport(loader: loader)
        if storedFirst { _ = try await transport.data(for: request(url)) }
        let callsBefore = loader.callCount
        let entriesBefore = transport.statistics.entries

        let conditional = request(url, headers: ["If-None-Match": ValidatingOrigin.entityTag(version: 1)])
        let (data, response) = try await transport.data(for: conditional)

        #expect((response as? HTTPURLResponse)?.statusCode == 304)
        #expect(data.isEmpty)
        #expect(loader.callCount == callsBefore + 1)
        #expect(loader.calls.last?.value(forHTTPHeaderField: "If-None-Match") == ValidatingOrigin.entityTag(version: 1))
        #expect(transport.statistics.entries == entriesBefore)
        #expect(transport.statistics.bypasses == 1)
        #expect(transport.statistics.notModified == 0)
        // A plain request still gets the whole body.
        #expect(try await transport.data(for: request(url)).0 == ValidatingOrigin.body(version: 1))
    }

    @Test("a Range request gets its 206, and a later plain GET gets the whole body from the origin")
    func rangeThenPlain() async throws {
        let whole = Data((0..<100).map { UInt8($0) })
        let loader = ScriptedOrigin { request, _ in
            if let range = request.value(forHTTPHeaderField: "Range"), range == "bytes=0-9" {
                return ScriptedOrigin.Reply(
                    status: 206, headers: ["Content-Range": "bytes 0-9/100"], body: whole.prefix(10))
            }
            return ScriptedOrigin.Reply(status: 200, body: whole)
        }
        let transport = makeTransport(loader: loader)
        let (part, partial) = try await transport.data(for: request(url, headers: ["Range": "bytes=0-9"]))
        #expect((partial as? HTTPURLResponse)?.statusCode == 206)
        #expect(part.count == 10)
        #expect(transport.statistics.entries == 0)

        let (all, response) = try await transport.data(for: request(url))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(all == whole)
        #expect(loader.callCount == 2)
    }

    @Test("a 206 is never stored, even for a request without a range")
    func partialNeverStored() async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.status(206))
        let transport = makeTransport(loader: loader) { $0.storage.storableStatusCodes = [200, 206] }
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 2)
        #expect(transport.statistics.stores == 0)
    }

    @Test(
        "each conditional or range header bypasses the store and coalescing",
        arguments: [
            "If-None-Match", "if-modified-since", "If-Match", "If-Unmodified-Since", "If-Range", "range",
        ])
    func eachHeaderBypasses(header: String) async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        loader.openGate()
        _ = try await transport.data(for: request(url))
        let conditional = request(url, headers: [header: "\"x\""])
        let holding = echoOrigin(gated: true)
        let held = makeTransport(loader: holding)
        let tasks = (0..<3).map { _ in Task { try await held.data(for: conditional) } }
        await holding.waitForCalls(3)
        holding.openGate()
        for task in tasks { _ = try await task.value }
        #expect(holding.callCount == 3)
        #expect(held.statistics.coalescedJoins == 0)
        #expect(held.statistics.entries == 0)

        // With an entry stored, the request still goes to the origin.
        _ = try await transport.data(for: conditional)
        #expect(loader.callCount == 2)
    }

    @Test("a value request with its own conditions is not answered from memory")
    func valueBypasses() async throws {
        let loader = ScriptedOrigin { request, call in
            ScriptedOrigin.Reply(status: 200, body: Data(#"{"call":\#(call)}"#.utf8))
        }
        struct Payload: Decodable, Sendable { let call: Int }
        let transport = makeTransport(loader: loader)
        _ = try await transport.value(Payload.self, for: request(url))
        let fresh = try await transport.value(Payload.self, for: request(url, headers: ["If-Match": "\"a\""]))
        #expect(fresh.call == 2)
        #expect(loader.callCount == 2)
    }

    @Test("a bypassed GET invalidates nothing")
    func bypassInvalidatesNothing() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(url, headers: ["Range": "bytes=0-1"]))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 2)
        #expect(transport.statistics.invalidations == 0)
    }
}
