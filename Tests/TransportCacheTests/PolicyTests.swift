import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Cache policies")
struct PolicyTests {
    let url = "https://api.example.com/profile"

    @Test("useProtocolCachePolicy answers from memory whatever the entry's age")
    func defaultPolicyIsReturnCacheDataElseLoad() async throws {
        let loader = echoOrigin()
        let clock = TestClock()
        let transport = makeTransport(loader: loader, clock: clock)
        let first = try await transport.data(for: request(url)).0
        clock.advance(by: .seconds(365 * 24 * 3600))
        let second = try await transport.data(for: request(url)).0
        #expect(first == second)
        #expect(loader.callCount == 1)
        #expect(transport.statistics.memoryHits == 1)
    }

    @Test("returnCacheDataElseLoad behaves as the default")
    func returnCacheDataElseLoad() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request(url, policy: .returnCacheDataElseLoad))
        _ = try await transport.data(for: request(url, policy: .returnCacheDataElseLoad))
        #expect(loader.callCount == 1)
    }

    @Test("reloadIgnoringLocalCacheData always fetches and stores the answer")
    func reloadFetchesAndStores() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request(url))
        let reloaded = try await transport.data(for: request(url, policy: .reloadIgnoringLocalCacheData)).0
        #expect(reloaded.text.contains("call=2"))
        let reloadedAgain = try await transport.data(for: request(url, policy: .reloadIgnoringLocalAndRemoteCacheData))
            .0
        #expect(reloadedAgain.text.contains("call=3"))
        // The default policy now answers with the latest reload.
        #expect(try await transport.data(for: request(url)).0 == reloadedAgain)
        #expect(loader.callCount == 3)
    }

    @Test("returnCacheDataDontLoad answers from memory or throws resourceUnavailable without the network")
    func dontLoad() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        let error = await thrownError { try await transport.data(for: request(url, policy: .returnCacheDataDontLoad)) }
        #expect((error as? URLError)?.code == .resourceUnavailable)
        #expect(loader.callCount == 0)
        let stored = try await transport.data(for: request(url)).0
        #expect(try await transport.data(for: request(url, policy: .returnCacheDataDontLoad)).0 == stored)
        #expect(loader.callCount == 1)
    }

    @Test("a maximum age turns returnCacheDataElseLoad into a time to live")
    func maximumAge() async throws {
        let loader = echoOrigin()
        let clock = TestClock()
        let transport = makeTransport(loader: loader, clock: clock) { $0.freshness.maximumAge = .seconds(60) }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(59))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 1)
        clock.advance(by: .seconds(1))
        let refetched = try await transport.data(for: request(url)).0
        #expect(refetched.text.contains("call=2"))
        #expect(loader.callCount == 2)
    }

    @Test("returnCacheDataDontLoad still answers with an entry past its maximum age")
    func dontLoadIgnoresAge() async throws {
        let loader = echoOrigin()
        let clock = TestClock()
        let transport = makeTransport(loader: loader, clock: clock) { $0.freshness.maximumAge = .seconds(60) }
        let stored = try await transport.data(for: request(url)).0
        clock.advance(by: .seconds(600))
        #expect(try await transport.data(for: request(url, policy: .returnCacheDataDontLoad)).0 == stored)
        #expect(loader.callCount == 1)
    }

    @Test("a per-endpoint maximum age takes precedence over the global one")
    func endpointMaximumAge() async throws {
        let loader = echoOrigin()
        let clock = TestClock()
        let transport = makeTransport(loader: loader, clock: clock) {
            $0.freshness.maximumAge = .seconds(3600)
            $0.freshness.maximumAges = [EndpointSetting(.pathPrefix("/live"), .seconds(5))]
        }
        _ = try await transport.data(for: request("https://api.example.com/live/score"))
        _ = try await transport.data(for: request("https://api.example.com/static/logo"))
        clock.advance(by: .seconds(10))
        _ = try await transport.data(for: request("https://api.example.com/live/score"))
        _ = try await transport.data(for: request("https://api.example.com/static/logo"))
        #expect(loader.callCount(for: "https://api.example.com/live/score") == 2)
        #expect(loader.callCount(for: "https://api.example.com/static/logo") == 1)
    }
}
