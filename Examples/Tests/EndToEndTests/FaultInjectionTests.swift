import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache
import TransportCacheTesting

/// Every fault ends, for every caller, in a clear error or a correct answer; never in a hang, and
/// never with a partial or failed answer in the store.
@Suite("Faults of the origin")
struct FaultInjectionTests {
    /// A transport whose requests give up after `timeout` seconds.
    static func transport(
        timeout: TimeInterval = 20, _ configure: (inout CachedTransport.Configuration) -> Void = { _ in }
    ) -> CachedTransport {
        var configuration = CachedTransport.Configuration()
        let session = URLSessionConfiguration.ephemeral
        session.timeoutIntervalForRequest = timeout
        configure(&configuration)
        return CachedTransport(configuration: configuration, sessionConfiguration: session)
    }

    /// `url` with the origin told, through a header that is not part of the key, to answer as if
    /// the query said `fault`.
    static func faulty(_ url: URL, _ fault: String) -> URLRequest {
        request(url, headers: ["X-Origin-Query": fault])
    }

    /// Starts `count` callers of `pathAndQuery` on a fresh transport, held at the origin's gate
    /// until all have joined one fetch, then lets the fetch go and returns how each ended.
    static func coalescedOutcomes(
        _ count: Int,
        of pathAndQuery: String,
        on transport: CachedTransport,
        origin: LoopbackOrigin
    ) async -> [Result<(Data, URLResponse), any Error>] {
        let tasks = await startHeldCallers(count, of: pathAndQuery, on: transport, origin: origin)
        await origin.openGate()
        var outcomes: [Result<(Data, URLResponse), any Error>] = []
        for task in tasks { outcomes.append(await task.result) }
        return outcomes
    }

    // MARK: - Slow answers

    @Test("an origin slower than the request timeout: every coalesced caller gets timedOut, nothing is stored")
    func slowerThanTimeout() async throws {
        try await withOrigin { origin in
            // Whole seconds: corelibs truncates the request timeout to whole seconds for its timer,
            // so 0.5 s times out at once, before the request reaches the origin.
            let transport = Self.transport(timeout: 1)
            let url = origin.url("/slow?delay=3000")
            let outcome = await ending(within: .seconds(10)) {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<5 {
                        group.addTask {
                            let error = await thrownError { try await transport.data(from: url) }
                            #expect((error as? URLError)?.code == .timedOut)
                        }
                    }
                    try await group.waitForAll()
                }
            }
            #expect(outcome != nil)
            #expect(transport.statistics.stores == 0)
            #expect(transport.statistics.entries == 0)
            #expect(await origin.hits("/slow?delay=3000") == 1)
        }
    }

    @Test("a slow origin within the timeout: callers wait for the whole answer and get it")
    func slowWithinTimeout() async throws {
        try await withOrigin { origin in
            let transport = Self.transport(timeout: 10)
            let url = origin.url("/slow?delay=300&size=200000")
            let outcome = await ending(within: .seconds(10)) {
                try await withThrowingTaskGroup(of: Data.self) { group in
                    for _ in 0..<5 { group.addTask { try await transport.data(from: url).0 } }
                    return try await group.reduce(into: [Data]()) { $0.append($1) }
                }
            }
            let bodies = try #require(try outcome?.get())
            #expect(bodies.count == 5)
            #expect(bodies.allSatisfy { $0 == Data(repeating: UInt8(ascii: "x"), count: 200_000) })
            #expect(await origin.hits(path: "/slow") == 1)
        }
    }

    // MARK: - Error statuses

    @Test("a 500 reaches every coalesced caller as a response, is not stored, and the next request asks again")
    func serverErrors() async throws {
        try await withOrigin { origin in
            let transport = Self.transport()
            let outcomes = await Self.coalescedOutcomes(8, of: "/boom?status=500&gate=1", on: transport, origin: origin)
            for outcome in outcomes {
                let response = try outcome.get().1 as? HTTPURLResponse
                #expect(response?.statusCode == 500)
            }
            #expect(transport.statistics.stores == 0)
            _ = try await transport.data(from: origin.url("/boom?status=500&gate=1"))
            #expect(await origin.hits("/boom?status=500&gate=1") == 2)
        }
    }

    @Test("a refresh answered with a 500 returns the 500 and keeps the stored 200, even with stale-if-error on")
    func refreshAnsweredWith500() async throws {
        try await withOrigin { origin in
            let transport = Self.transport { $0.freshness.staleIfError = true }
            let url = origin.url("/feed")
            var changes = transport.changes().makeAsyncIterator()
            let stored = try await transport.data(from: url).0
            #expect(await changes.next() == .updated(url))
            let (_, response) = try await transport.refresh(Self.faulty(url, "status=500"))
            #expect((response as? HTTPURLResponse)?.statusCode == 500)
            #expect(!response.isStaleAnswer)
            #expect(try await transport.data(from: url).0 == stored)
            #expect(await origin.hits(path: "/feed") == 2)
            transport.invalidateAll()
            #expect(await changes.next() == .cleared)
        }
    }

    // MARK: - Broken connections

    @Test(
        "a body cut short (Content-Length larger than sent) reaches every caller as networkConnectionLost; nothing is stored"
    )
    func truncatedBody() async throws {
        try await withOrigin { origin in
            let transport = Self.transport()
            let outcomes = await Self.coalescedOutcomes(5, of: "/cut?drop=1&gate=1", on: transport, origin: origin)
            for outcome in outcomes {
                #expect(throws: URLError.self) { try outcome.get() }
                if case .failure(let error) = outcome {
                    #expect((error as? URLError)?.code == .networkConnectionLost)
                    let underlying = (error as? URLError)?.userInfo[NSUnderlyingErrorKey] as? NSError
                    #expect(underlying?.code == URLError.Code.unknown.rawValue)
                }
            }
            #expect(transport.statistics.stores == 0)
            #expect(transport.statistics.bytesHeld == 0)
            let error = await thrownError { try await transport.data(from: origin.url("/cut?drop=1&gate=1")) }
            #expect((error as? URLError)?.code == .networkConnectionLost)
            #expect(await origin.hits("/cut?drop=1&gate=1") == 2)
        }
    }

    @Test("a connection reset without an answer reaches every caller as networkConnectionLost; nothing is stored")
    func connectionReset() async throws {
        try await withOrigin { origin in
            let transport = Self.transport()
            let outcomes = await Self.coalescedOutcomes(5, of: "/reset?reset=1&gate=1", on: transport, origin: origin)
            for outcome in outcomes {
                if case .failure(let error) = outcome {
                    #expect((error as? URLError)?.code == .networkConnectionLost, "\(error)")
                } else {
                    Issue.record("a reset connection produced an answer")
                }
            }
            #expect(transport.statistics.stores == 0)
            #expect(transport.statistics.entries == 0)
        }
    }

    @Test(
        "stale-if-error answers with the complete stored body when a refresh is cut short or reset",
        arguments: ["drop=1", "reset=1"])
    func staleIfErrorCoversConnectionLoss(fault: String) async throws {
        try await withOrigin { origin in
            let transport = Self.transport { $0.freshness.staleIfError = true }
            let url = origin.url("/profile")
            let (stored, _) = try await transport.data(from: url)
            let (answer, response) = try await transport.refresh(Self.faulty(url, fault))
            #expect(answer == stored)
            #expect(response.isStaleAnswer)
            let code = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: CachedTransport.staleHeaderField)
            #expect(code == String(URLError.Code.networkConnectionLost.rawValue))
            #expect(try await transport.data(from: url).0 == stored)
            #expect(transport.statistics.staleAnswers == 1)
            #expect(transport.statistics.stores == 1)
        }
    }

    @Test("after a cut-short refresh the store still holds the last complete body, never a part")
    func noPartialBodyReplacesStored() async throws {
        try await withOrigin { origin in
            let transport = Self.transport()
            let url = origin.url("/doc?size=50000")
            let (stored, _) = try await transport.data(from: url)
            #expect(stored.count == 50_000)
            let error = await thrownError { try await transport.refresh(Self.faulty(url, "drop=1")) }
            #expect((error as? URLError)?.code == .networkConnectionLost)
            var cached = URLRequest(url: url)
            cached.cachePolicy = .returnCacheDataDontLoad
            #expect(try await transport.data(for: cached).0 == stored)
            #expect(transport.statistics.stores == 1)
        }
    }

    // MARK: - Redirects

    @Test("a redirect loop ends in httpTooManyRedirects for every caller, and nothing is stored")
    func redirectLoop() async throws {
        try await withOrigin { origin in
            let transport = Self.transport()
            let outcome = await ending(within: .seconds(30)) {
                await Self.coalescedOutcomes(4, of: "/loop?loop=1&gate=1", on: transport, origin: origin)
            }
            let outcomes = try #require(outcome).get()
            for outcome in outcomes {
                if case .failure(let error) = outcome {
                    #expect((error as? URLError)?.code == .httpTooManyRedirects, "\(error)")
                } else {
                    Issue.record("a redirect loop produced an answer")
                }
            }
            let hops = await origin.hits("/loop?loop=1&gate=1")
            // One fetch for all four callers; URLSession gives up after a bounded number of hops.
            #expect(hops > 1 && hops <= 21, "origin saw \(hops) requests")
            print("redirect loop: URLSession stopped after \(hops) requests to the origin")
            #expect(transport.statistics.networkFetches == 1)
            #expect(transport.statistics.stores == 0)
            #expect(transport.statistics.entries == 0)
        }
    }

    @Test("a redirect is followed and the final answer is stored under the requested URL")
    func redirectFollowed() async throws {
        try await withOrigin { origin in
            let transport = Self.transport()
            let url = origin.url("/old?redirect=/new")
            let (data, response) = try await transport.data(from: url)
            #expect(data.text.contains("path=/new "))
            #expect(response.url?.path == "/new")
            #expect(try await transport.data(from: url).0 == data)
            #expect(await origin.hits(path: "/old") == 1)
            #expect(await origin.hits(path: "/new") == 1)
        }
    }

    // MARK: - Malformed and contradictory cache headers

    @Test(
        "malformed or contradictory cache headers: the answer is right and, with the override on, stored",
        arguments: [
            "cc=max-age%3Dabc",
            "cc=max-age%3D600&cc2=no-store",
            "cc=no-store&cc2=max-age%3D600",
            "cc=public,private&pragma=no-cache",
            "expires=garbage&cc=none",
            "expires=past&cc=max-age%3D600",
            "cc=%2C%2C%2C&vary=%2C",
        ])
    func oddCacheHeaders(query: String) async throws {
        try await withOrigin { origin in
            let transport = Self.transport()
            let url = origin.url("/odd?\(query)")
            let (first, response) = try await transport.data(from: url)
            #expect(first.text.hasPrefix("path=/odd "))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(try await transport.data(from: url).0 == first)
            #expect(await origin.hits(path: "/odd") == 1)
        }
    }

    @Test(
        "with the override off, a no-store in either of two Cache-Control lines keeps the answer out of the store",
        arguments: ["cc=max-age%3D600&cc2=no-store", "cc=no-store&cc2=max-age%3D600"])
    func repeatedCacheControlWithoutOverride(query: String) async throws {
        try await withOrigin { origin in
            let transport = Self.transport { $0.network.cacheOverride = nil }
            let url = origin.url("/odd?\(query)")
            let first = try await transport.data(from: url).0
            let second = try await transport.data(from: url).0
            #expect(first != second)
            #expect(transport.statistics.stores == 0)
            #expect(await origin.hits(path: "/odd") == 2)
        }
    }
}
