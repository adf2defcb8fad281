import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Stale if error")
struct StaleIfErrorTests {
    let url = "https://api.example.com/items/1"

    /// Answers once, then fails every later call with `code`.
    static func failingAfterFirst(_ code: URLError.Code) -> ScriptedOrigin {
        ScriptedOrigin { request, call in
            if call > 1 { throw URLError(code) }
            return try ScriptedOrigin.ok()(request, call)
        }
    }

    @Test(
        "when on, a connectivity failure answers with the last stored body, marked stale",
        arguments: [URLError.Code.notConnectedToInternet, .cannotConnectToHost, .timedOut, .networkConnectionLost])
    func connectivityFailure(code: URLError.Code) async throws {
        let transport = makeTransport(loader: Self.failingAfterFirst(code)) { $0.freshness.staleIfError = true }
        let (stored, response) = try await transport.data(for: request(url))
        #expect(!response.isStaleAnswer)
        let (stale, staleResponse) = try await transport.refresh(request(url))
        #expect(stale == stored)
        #expect(staleResponse.isStaleAnswer)
        #expect(
            (staleResponse as? HTTPURLResponse)?.value(forHTTPHeaderField: CachedTransport.staleHeaderField)
                == String(code.rawValue))
        #expect(transport.statistics.staleAnswers == 1)
    }

    @Test("an expired entry is served stale when the reload cannot connect")
    func expiredEntry() async throws {
        let clock = TestClock()
        let transport = makeTransport(loader: Self.failingAfterFirst(.cannotConnectToHost), clock: clock) {
            $0.freshness.staleIfError = true
            $0.freshness.maximumAge = .seconds(10)
        }
        let (stored, _) = try await transport.data(for: request(url))
        clock.advance(by: .seconds(60))
        let (stale, response) = try await transport.data(for: request(url))
        #expect(stale == stored)
        #expect(response.isStaleAnswer)
    }

    @Test("other errors are not masked")
    func otherErrors() async throws {
        let transport = makeTransport(loader: Self.failingAfterFirst(.badServerResponse)) {
            $0.freshness.staleIfError = true
        }
        _ = try await transport.data(for: request(url))
        let error = await thrownError { try await transport.refresh(request(url)) }
        #expect((error as? URLError)?.code == .badServerResponse)
    }

    @Test("off by default: the connectivity error reaches the caller")
    func offByDefault() async throws {
        let transport = makeTransport(loader: Self.failingAfterFirst(.notConnectedToInternet))
        _ = try await transport.data(for: request(url))
        let error = await thrownError { try await transport.refresh(request(url)) }
        #expect((error as? URLError)?.code == .notConnectedToInternet)
    }

    @Test("an invalidated entry is never served stale")
    func invalidatedIsGone() async throws {
        let transport = makeTransport(loader: Self.failingAfterFirst(.notConnectedToInternet)) {
            $0.freshness.staleIfError = true
        }
        _ = try await transport.data(for: request(url))
        transport.invalidate(request(url))
        let error = await thrownError { try await transport.data(for: request(url)) }
        #expect((error as? URLError)?.code == .notConnectedToInternet)
    }
}
