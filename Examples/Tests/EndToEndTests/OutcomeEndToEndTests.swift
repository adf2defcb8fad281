import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache
import TransportCacheTesting

/// Every answer says where it came from and why, against a real origin over TCP: each source and
/// reason, whether the caller joined a fetch, what became of the answer in the store, and a network
/// time exactly when a request was sent.
@Suite("Cache outcomes against a real origin")
struct OutcomeEndToEndTests {
    // MARK: - From memory

    @Test("a stored entry answers a second request as fresh, with no network time")
    func memoryFresh() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/fresh")
            _ = try await transport.data(from: url)
            let outcome = try await cacheOutcome(of: URLRequest(url: url), on: transport)
            verify(outcome, source: .memory(.fresh), storage: nil, sentRequest: false)
            #expect(outcome.isFromMemory)
            #expect(await origin.hits("/fresh") == 1)
        }
    }

    @Test(
        "a stale entry the request accepts answers from memory, with no network time",
        arguments: [StaleAcceptance.cacheOnlyPolicy, .maxStaleFollowingHTTP])
    func memoryStaleAccepted(acceptance: StaleAcceptance) async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            let path: String
            var accepting: URLRequest
            switch acceptance {
            case .cacheOnlyPolicy:
                // Stale the moment it is stored.
                configuration.freshness.maximumAge = .zero
                path = "/accepted"
                accepting = URLRequest(url: origin.url(path))
                accepting.cachePolicy = .returnCacheDataDontLoad
            case .maxStaleFollowingHTTP:
                configuration.freshness.conformsToHTTPCaching = true
                path = "/accepted?cc=maxage0"
                accepting = request(origin.url(path), headers: ["Cache-Control": "max-stale=600"])
            }
            let transport = CachedTransport(configuration: configuration)
            _ = try await transport.data(from: origin.url(path))
            let outcome = try await cacheOutcome(of: accepting, on: transport)
            verify(outcome, source: .memory(.staleAccepted), storage: nil, sentRequest: false)
            #expect(await origin.hits(path) == 1)
        }
    }

    @Test("an entry within its stale-while-revalidate window answers at once and starts one background revalidation")
    func memoryStaleWhileRevalidate() async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            configuration.freshness.maximumAge = .zero
            configuration.freshness.staleWhileRevalidate = .seconds(600)
            let transport = CachedTransport(configuration: configuration)
            let path = "/window?stable=1"
            let url = origin.url(path)
            _ = try await transport.data(from: url)
            var events = transport.events().makeAsyncIterator()

            let outcome = try await cacheOutcome(of: URLRequest(url: url), on: transport)
            verify(outcome, source: .memory(.staleWhileRevalidate), storage: nil, sentRequest: false)

            // The answer is reported first; the revalidation it started follows, conditional on the
            // stored validators, and the origin confirms the entry.
            #expect(await events.next()?.kind.name == "answered")
            let started = await events.next()
            guard case .fetchStarted(let reason, let conditional) = started?.kind else {
                Issue.record("expected the background fetch to start, got \(String(describing: started))")
                return
            }
            #expect(reason == .backgroundRevalidation)
            #expect(conditional)
            let ended = await events.next()
            guard case .fetchEnded(let status, _, _) = ended?.kind else {
                Issue.record("expected the background fetch to end, got \(String(describing: ended))")
                return
            }
            #expect(status == 304)
            #expect(await origin.hits(path) == 2)
        }
    }

    @Test("a failed fetch answered by the stored entry says so, with the error and the network time")
    func memoryStaleAfterFailure() async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            configuration.freshness.maximumAge = .zero
            configuration.freshness.staleIfError = true
            let transport = CachedTransport(configuration: configuration)
            let url = origin.url("/fallback")
            let (stored, _) = try await transport.data(from: url)

            // The same key, but the origin resets the connection.
            let (data, response, outcome) = try await transport.response(
                for: request(url, headers: ["X-Origin-Query": "reset=1"]))
            #expect(data == stored)
            #expect(response.isStaleAnswer)
            verify(
                outcome, source: .memory(.staleAfterFailure(.networkConnectionLost)), storage: nil, sentRequest: true)
            #expect(!outcome.isFromMemory)
            // The HTTP client may send a request whose reused connection was reset once more, on a
            // new connection, before it gives up.
            #expect(await origin.hits("/fallback") >= 2)
        }
    }

    // MARK: - Confirmed by a 304

    @Test("an expired entry the origin confirms with a 304 is revalidated and stored again with the same bytes")
    func revalidated() async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            configuration.freshness.maximumAge = .zero
            let transport = CachedTransport(configuration: configuration)
            let path = "/confirmed?stable=1"
            let url = origin.url(path)
            let (stored, _) = try await transport.data(from: url)

            let (data, response, outcome) = try await transport.response(for: URLRequest(url: url))
            verify(outcome, source: .revalidated(.expired), storage: .stored(changedBytes: false), sentRequest: true)
            #expect(data == stored)
            #expect(response.statusCode == 200)
            #expect(await origin.notModifiedAnswers(path) == 1)
            #expect(await origin.lastRequestHeader("If-None-Match", for: path) != nil)
        }
    }

    // MARK: - From the network, and why

    @Test("a request that goes to the network says why", arguments: NetworkCase.all)
    func network(networkCase: NetworkCase) async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            networkCase.configure(&configuration)
            let transport = CachedTransport(configuration: configuration)
            let url = origin.url("/reason?" + networkCase.query)
            try await networkCase.prepare(transport, url)
            let outcome = try await networkCase.send(transport, url)
            verify(
                outcome, source: .network(networkCase.reason), storage: .stored(changedBytes: true), sentRequest: true)
            #expect(await origin.hits(path: "/reason") == networkCase.hits)
            // Stored: the same request is now answered from memory.
            #expect(try await cacheOutcome(of: networkCase.repeated(url), on: transport).isFromMemory)
            #expect(await origin.hits(path: "/reason") == networkCase.hits)
        }
    }

    @available(macOS 26.0, *)
    @Test("callers that share one fetch: exactly one started it, the others joined, all with its network time")
    func joined() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let path = "/shared?gate=1"
            let callers = 5
            let tasks = await startHeldCallers(callers, of: path, on: transport, origin: origin)
            await origin.openGate()
            var outcomes: [CacheOutcome] = []
            for task in tasks {
                let (_, response) = try await task.value
                outcomes.append(try #require(response.cacheOutcome))
            }
            #expect(outcomes.filter { !$0.joinedFetch }.count == 1)
            #expect(outcomes.filter(\.joinedFetch).count == callers - 1)
            for outcome in outcomes {
                #expect(outcome.source == .network(.noEntry))
                #expect(outcome.storage == .stored(changedBytes: true))
                #expect(outcome.networkDuration != nil)
            }
            // One fetch, one wait on the network, whoever asked.
            #expect(Set(outcomes.map(\.networkDuration)).count == 1)
            #expect(await origin.hits(path) == 1)
        }
    }

    @Test("a request sent past the store says why, and nothing is stored", arguments: PassThrough.all)
    func passedThrough(passThrough: PassThrough) async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/past")
            let sent = request(url, method: passThrough.method, headers: passThrough.headers)
            let outcome = try await cacheOutcome(of: sent, on: transport)
            verify(outcome, source: .passedThrough(passThrough.reason), storage: nil, sentRequest: true)
            #expect(transport.statistics.entries == 0)
            _ = try await transport.data(for: sent)
            #expect(await origin.hits("/past") == 2)
        }
    }

    @Test("a request to another scheme passes through as not HTTP")
    func notHTTP() async throws {
        let transport = CachedTransport()
        // A data: URL is answered, but not with an HTTP response that could carry an outcome.
        let dataURL = URL(string: "data:text/plain;base64,aGVsbG8=")!
        let (data, response) = try await transport.data(from: dataURL)
        #expect(data.text == "hello")
        #expect(!(response is HTTPURLResponse))
        #expect(response.cacheOutcome == nil)
        let notHTTPError = await thrownError { try await transport.response(for: URLRequest(url: dataURL)) }
        let notHTTP = try #require(notHTTPError as? URLError)
        #expect(notHTTP.code == .badServerResponse)
        #expect(notHTTP.cacheOutcome?.source == .passedThrough(.notHTTP))

        // A file that is not there: the error the request ended with carries how long it took.
        let missing = URL(fileURLWithPath: "/nonexistent-\(UUID().uuidString)")
        let failed = try #require(await thrownError { try await transport.data(from: missing) } as? URLError)
        let outcome = try #require(failed.cacheOutcome)
        verify(outcome, source: .passedThrough(.notHTTP), storage: nil, sentRequest: true)
        #expect(transport.statistics.entries == 0)
    }

    // MARK: - Stored or not

    @Test("a refresh that brings the bytes already held is stored with the same bytes")
    func storedSameBytes() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            // No validators: the refresh gets a whole 200, not a 304.
            let url = origin.url("/same?stable=1&validators=none")
            let first = try await cacheOutcome(of: URLRequest(url: url), on: transport)
            verify(first, source: .network(.noEntry), storage: .stored(changedBytes: true), sentRequest: true)
            let (_, response) = try await transport.refresh(URLRequest(url: url))
            let refreshed = try #require(response.cacheOutcome)
            verify(
                refreshed, source: .network(.refresh), storage: .stored(changedBytes: false), sentRequest: true)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
        }
    }

    @Test("a fetched answer that may not be stored says why, and the next request asks again", arguments: NotStored.all)
    func notStored(notStored: NotStored) async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            notStored.configure(&configuration)
            let transport = CachedTransport(configuration: configuration)
            let url = origin.url("/unstored?" + notStored.query)
            for _ in 0..<2 {
                let outcome = try await cacheOutcome(of: URLRequest(url: url), on: transport)
                verify(
                    outcome, source: .network(.noEntry), storage: .notStored(notStored.reason), sentRequest: true)
            }
            #expect(transport.statistics.entries == 0)
            #expect(await origin.hits(path: "/unstored") == 2)
        }
    }

    @Test("a fetch whose key is invalidated while it is in flight answers its caller but is not stored")
    func invalidatedInFlight() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let path = "/moving?gate=1"
            let url = origin.url(path)
            await origin.closeGate()
            let held = Task { try await transport.data(from: url) }
            await origin.waitForHits(path, count: 1)
            transport.invalidate(URLRequest(url: url))
            await origin.openGate()
            let (_, response) = try await held.value
            let outcome = try #require(response.cacheOutcome)
            verify(
                outcome, source: .network(.noEntry), storage: .notStored(.invalidatedInFlight), sentRequest: true)
            #expect(transport.statistics.entries == 0)
        }
    }

    @Test("a fetch overtaken by a refresh while it is in flight answers its caller but is not stored")
    func supersededInFlight() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let path = "/overtaken?gate=1"
            let url = origin.url(path)
            await origin.closeGate()
            let first = Task { try await transport.data(from: url) }
            await origin.waitForHits(path, count: 1)
            let refresh = Task { try await transport.refresh(URLRequest(url: url)) }
            await origin.waitForHits(path, count: 2)
            await origin.openGate()

            let overtaken = try #require(try await first.value.1.cacheOutcome)
            verify(
                overtaken, source: .network(.noEntry), storage: .notStored(.supersededInFlight), sentRequest: true)
            let refreshed = try #require(try await refresh.value.1.cacheOutcome)
            verify(refreshed, source: .network(.refresh), storage: .stored(changedBytes: true), sentRequest: true)
            #expect(transport.statistics.stores == 1)
        }
    }

    // MARK: - Neither memory nor network

    @Test("returnCacheDataDontLoad with nothing stored throws resourceUnavailable, a cache-only miss")
    func cacheOnlyMissThrows() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            var cacheOnly = URLRequest(url: origin.url("/absent"))
            cacheOnly.cachePolicy = .returnCacheDataDontLoad
            let error = try #require(await thrownError { try await transport.data(for: cacheOnly) } as? URLError)
            #expect(error.code == .resourceUnavailable)
            let outcome = try #require(error.cacheOutcome)
            verify(outcome, source: .cacheOnlyMiss, storage: nil, sentRequest: false)
            #expect(await origin.totalHits == 0)
        }
    }

    @Test("only-if-cached with nothing stored, following HTTP caching, answers 504 as a cache-only miss")
    func cacheOnlyMissGatewayTimeout() async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            configuration.freshness.conformsToHTTPCaching = true
            let transport = CachedTransport(configuration: configuration)
            let onlyIfCached = request(origin.url("/absent"), headers: ["Cache-Control": "only-if-cached"])
            let (data, response, outcome) = try await transport.response(for: onlyIfCached)
            #expect(response.statusCode == 504)
            #expect(data.isEmpty)
            verify(outcome, source: .cacheOnlyMiss, storage: nil, sentRequest: false)
            #expect(await origin.totalHits == 0)
        }
    }

    // MARK: - Failures

    @Test("a failed fetch throws its URLError carrying why it was sent and how long it waited")
    func failedFetch() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/broken?reset=1")
            let error = try #require(await thrownError { try await transport.data(from: url) } as? URLError)
            #expect(error.code == .networkConnectionLost)
            let outcome = try #require(error.cacheOutcome)
            verify(outcome, source: .network(.noEntry), storage: nil, sentRequest: true)
            #expect(transport.statistics.entries == 0)
        }
    }

    // MARK: - Events

    @Test("events report a miss as fetch started, ended, stored and answered, then a hit as answered")
    func eventsInOrder() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/watched")
            let sentinel = origin.url("/sentinel")
            let stream = transport.events()
            let (body, _) = try await transport.data(from: url)
            _ = try await transport.data(from: url)
            // Everything reported before the sentinel's answer is in the stream by then.
            _ = try await transport.data(from: sentinel)

            var kinds: [CacheEvent.Kind] = []
            for await event in stream {
                if event.url == sentinel {
                    if case .answered = event.kind { break }
                    continue
                }
                #expect(event.url == url)
                kinds.append(event.kind)
            }
            #expect(kinds.map(\.name) == ["fetchStarted", "fetchEnded", "stored", "answered", "answered"])
            guard kinds.count == 5 else { return }
            if case .fetchStarted(let reason, let conditional) = kinds[0] {
                #expect(reason == .noEntry)
                #expect(!conditional)
            }
            if case .fetchEnded(let status, let bytes, _) = kinds[1] {
                #expect(status == 200)
                #expect(bytes == body.count)
            }
            if case .stored(let bytes, let changedBytes) = kinds[2] {
                #expect(bytes == body.count)
                #expect(changedBytes)
            }
            if case .answered(let outcome) = kinds[3] {
                verify(outcome, source: .network(.noEntry), storage: .stored(changedBytes: true), sentRequest: true)
            }
            if case .answered(let outcome) = kinds[4] {
                verify(outcome, source: .memory(.fresh), storage: nil, sentRequest: false)
            }
        }
    }

    @Test("a revalidation confirmed by a 304 reports what became of the entry, as its outcome does")
    func revalidationEvents() async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            configuration.freshness.maximumAge = .zero
            let transport = CachedTransport(configuration: configuration)
            let url = origin.url("/confirmed?stable=1")
            let sentinel = origin.url("/sentinel")
            _ = try await transport.data(from: url)
            let stream = transport.events()
            let (_, response) = try await transport.data(from: url)
            #expect(response.cacheOutcome?.storage == .stored(changedBytes: false))
            // A request to another URL marks the end of what the revalidation reported.
            _ = try await transport.data(from: sentinel)
            var names: [String] = []
            for await event in stream {
                if event.url == sentinel {
                    if case .answered = event.kind { break } else { continue }
                }
                names.append(event.kind.name)
            }
            #expect(names == ["fetchStarted", "fetchEnded", "stored", "answered"])
        }
    }

    @Test("a stream nobody reads never holds up a request: it keeps only the newest events")
    func unreadStreamNeverBlocks() async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            configuration.stayingCurrent.changeBufferLimit = 4
            let transport = CachedTransport(configuration: configuration)
            let unread = transport.events()
            let urls = (0..<40).map { origin.url("/busy?item=\($0)") }
            // Each miss reports four events and each hit one: far more than the stream keeps.
            let finished = await ending(within: .seconds(60)) {
                for url in urls {
                    _ = try await transport.data(from: url)
                    _ = try await transport.data(from: url)
                }
            }
            try #require(finished).get()
            #expect(await origin.hits(path: "/busy") == urls.count)

            // What it kept: the last four, the end of the last URL's miss and its hit.
            var kept = unread.makeAsyncIterator()
            var names: [String] = []
            for _ in 0..<4 {
                guard let event = await kept.next() else { break }
                #expect(event.url == urls.last)
                names.append(event.kind.name)
            }
            #expect(names == ["fetchEnded", "stored", "answered", "answered"])
        }
    }
}

// MARK: - Cases

/// How a request accepts a stale entry.
enum StaleAcceptance: Sendable, CustomTestStringConvertible {
    /// `returnCacheDataDontLoad`, which takes an entry of any age.
    case cacheOnlyPolicy
    /// A request's `Cache-Control: max-stale=600`, following HTTP caching.
    case maxStaleFollowingHTTP

    var testDescription: String {
        switch self {
        case .cacheOnlyPolicy: "returnCacheDataDontLoad"
        case .maxStaleFollowingHTTP: "max-stale, following HTTP caching"
        }
    }
}

/// A way to make a request go to the network for one reason: what precedes it, and the request.
struct NetworkCase: Sendable, CustomTestStringConvertible {
    typealias Step = @Sendable (CachedTransport, URL) async throws -> Void

    let reason: CacheOutcome.FetchReason
    /// The query of the URL the case requests, under `/reason`.
    var query = "case"
    var configure: @Sendable (inout CachedTransport.Configuration) -> Void = { _ in }
    /// What happens before the request: by default the URL is fetched and stored.
    var prepare: Step = { transport, url in _ = try await transport.data(from: url) }
    /// The request whose outcome is checked.
    var send: @Sendable (CachedTransport, URL) async throws -> CacheOutcome = { transport, url in
        try await cacheOutcome(of: URLRequest(url: url), on: transport)
    }
    /// A plain request that the answer, once stored, serves from memory.
    var repeated: @Sendable (URL) -> URLRequest = { URLRequest(url: $0) }
    /// Requests for `/reason` that reach the origin in all.
    var hits = 2

    var testDescription: String { "\(reason)" }

    static let all: [NetworkCase] = [
        NetworkCase(reason: .noEntry, prepare: { _, _ in }, hits: 1),
        NetworkCase(
            reason: .expired,
            // Without validators the expired entry is fetched whole, not confirmed by a 304.
            query: "validators=none",
            configure: { $0.freshness.maximumAge = .zero },
            // Expired again at once: only a request that takes any age finds it in memory.
            repeated: { url in
                var request = URLRequest(url: url)
                request.cachePolicy = .returnCacheDataDontLoad
                return request
            }),
        NetworkCase(
            reason: .invalidated,
            prepare: { transport, url in
                _ = try await transport.data(from: url)
                transport.invalidate(URLRequest(url: url))
            }),
        NetworkCase(
            reason: .evicted,
            // Two bodies of 6,000 bytes do not fit in 10,000: the second evicts the first.
            query: "size=6000",
            configure: {
                $0.storage.memoryCapacity = 10_000
                $0.storage.maximumEntryShare = 1
            },
            prepare: { transport, url in
                _ = try await transport.data(from: url)
                _ = try await transport.data(from: URL(string: url.absoluteString + "&other=1")!)
            },
            hits: 3),
        NetworkCase(
            reason: .noMatchingVariant,
            query: "vary=X-Flavor",
            prepare: { transport, url in
                _ = try await transport.data(for: request(url, headers: ["X-Flavor": "a"]))
            },
            send: { transport, url in
                try await cacheOutcome(of: request(url, headers: ["X-Flavor": "b"]), on: transport)
            },
            repeated: { request($0, headers: ["X-Flavor": "b"]) }),
        NetworkCase(
            reason: .reloadPolicy,
            send: { transport, url in
                var reload = URLRequest(url: url)
                reload.cachePolicy = .reloadIgnoringLocalCacheData
                return try await cacheOutcome(of: reload, on: transport)
            }),
        NetworkCase(
            reason: .requestRevalidates,
            send: { transport, url in
                try await cacheOutcome(
                    of: request(url, headers: ["Cache-Control": "no-cache"]), on: transport)
            }),
        NetworkCase(
            reason: .refresh,
            send: { transport, url in
                let (_, response) = try await transport.refresh(URLRequest(url: url))
                return try #require(response.cacheOutcome)
            }),
    ]
}

/// A request the transport sends as it is.
struct PassThrough: Sendable, CustomTestStringConvertible {
    let reason: CacheOutcome.PassThroughReason
    var method = "GET"
    var headers: [String: String] = [:]

    var testDescription: String { "\(reason)" }

    static let all = [
        // `*` matches any tag: the origin answers 304, which is this request's own.
        PassThrough(reason: .requestConditions, headers: ["If-None-Match": "*"]),
        PassThrough(reason: .requestNoStore, headers: ["Cache-Control": "no-store"]),
        PassThrough(reason: .unsafeMethod, method: "POST"),
    ]
}

/// An answer the transport fetches but may not store.
struct NotStored: Sendable, CustomTestStringConvertible {
    let reason: CacheOutcome.NotStoredReason
    let query: String
    var configure: @Sendable (inout CachedTransport.Configuration) -> Void = { _ in }

    var testDescription: String { "\(reason)" }

    // A 206 is not among them: the origin sends one only for a request's own Range, which passes
    // through the store (requestConditions) before any answer could be stored.
    static let all = [
        NotStored(reason: .status(404), query: "status=404"),
        NotStored(reason: .setsCookie, query: "setcookie=1"),
        NotStored(reason: .noStore, query: "cc=no-store", configure: { $0.network.cacheOverride = nil }),
        NotStored(reason: .variesOnEverything, query: "vary=*", configure: { $0.network.cacheOverride = nil }),
        // The largest entry is a tenth of 100,000 bytes.
        NotStored(reason: .tooLarge, query: "size=20000", configure: { $0.storage.memoryCapacity = 100_000 }),
    ]
}

// MARK: - Helpers

/// The outcome of `request` on `transport`, through `response(for:)`; the response's own
/// `cacheOutcome`, which a `data(for:)` caller reads, must say the same.
private func cacheOutcome(
    of request: URLRequest, on transport: CachedTransport, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> CacheOutcome {
    let (_, response, outcome) = try await transport.response(for: request)
    #expect(response.cacheOutcome == outcome, sourceLocation: sourceLocation)
    return outcome
}

/// Checks every part of `outcome`: the source, that the caller started the fetch (if any), the
/// storage, and a network time exactly when `sentRequest`.
private func verify(
    _ outcome: CacheOutcome,
    source: CacheOutcome.Source,
    joined: Bool = false,
    storage: CacheOutcome.Storage?,
    sentRequest: Bool,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(outcome.source == source, "\(outcome)", sourceLocation: sourceLocation)
    #expect(outcome.joinedFetch == joined, "\(outcome)", sourceLocation: sourceLocation)
    #expect(outcome.storage == storage, "\(outcome)", sourceLocation: sourceLocation)
    #expect((outcome.networkDuration != nil) == sentRequest, "\(outcome)", sourceLocation: sourceLocation)
}
