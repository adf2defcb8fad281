import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache
import TransportCacheTesting

/// The per-host queue and prefetching against a real origin, which counts the requests it holds
/// at once. Every test holds requests at the origin's gate, or cancels the one in flight, to see
/// what the transport sends next: none waits for a guessed time to pass.
@Suite("The per-host queue and prefetching, against a real origin", .timeLimit(.minutes(1)))
struct PrefetchingEndToEndTests {
    /// A transport with a real URLSession that has at most `perHost` requests in flight to one
    /// host (nil: the session's own limit).
    static func transport(
        perHost: Int?, memoryCapacity: Int? = nil, maximumEntryShare: Double? = nil
    ) -> CachedTransport {
        var configuration = CachedTransport.Configuration()
        configuration.network.maximumFetchesPerHost = perHost
        if let memoryCapacity { configuration.storage.memoryCapacity = memoryCapacity }
        if let maximumEntryShare { configuration.storage.maximumEntryShare = maximumEntryShare }
        return CachedTransport(configuration: configuration)
    }

    /// Waits until `count` requests for `path` (whatever their query) have reached `origin`.
    /// - Returns: false, with an issue recorded, when they have not within ten seconds.
    static func arrived(
        _ count: Int, at path: String, of origin: LoopbackOrigin, sourceLocation: SourceLocation = #_sourceLocation
    ) async -> Bool {
        await ending(within: .seconds(10), sourceLocation: sourceLocation) {
            await origin.waitForHits(path: path, count: count)
        } != nil
    }

    /// How `prefetches` ended, in their order; nil, with an issue recorded, when they have not all
    /// ended within twenty seconds.
    static func outcomes(
        of prefetches: [Prefetch], sourceLocation: SourceLocation = #_sourceLocation
    ) async -> [Prefetch.Outcome]? {
        let ended = await ending(within: .seconds(20), sourceLocation: sourceLocation) {
            var outcomes: [Prefetch.Outcome] = []
            for prefetch in prefetches { outcomes.append(await prefetch.outcome) }
            return outcomes
        }
        return try? ended?.get()
    }

    /// The answers of `calls`, in their order; throws the first call's error, and records an issue
    /// when they have not all ended within twenty seconds.
    static func answers<Value: Sendable>(
        of calls: [Task<Value, any Error>], sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> [Value] {
        let ended = await ending(within: .seconds(20), sourceLocation: sourceLocation) {
            var values: [Value] = []
            for call in calls { values.append(try await call.value) }
            return values
        }
        return try #require(ended, sourceLocation: sourceLocation).get()
    }

    /// Which of `names` the origin has received a request for, as `<path>?gate=1&name=<name>`.
    static func received(_ names: [String], at path: String, of origin: LoopbackOrigin) async -> [String] {
        var received: [String] = []
        for name in names where await origin.hits("\(path)?gate=1&name=\(name)") > 0 { received.append(name) }
        return received
    }

    // MARK: - At most N per host

    @Test("the origin never holds more than maximumFetchesPerHost screens' requests at once, and all end")
    func screensPerHost() async throws {
        try await withOrigin { origin in
            let transport = Self.transport(perHost: 3)
            await origin.closeGate()
            let calls = (0..<12).map { item in
                Task { try await transport.data(from: origin.url("/limit?gate=1&item=\(item)")).0 }
            }
            try #require(await Self.arrived(3, at: "/limit", of: origin))
            // Three are held at the gate: the other nine wait in the transport, not at the origin.
            #expect(await origin.hits(path: "/limit") == 3)
            await origin.openGate()
            let bodies = try await Self.answers(of: calls)
            #expect(bodies.enumerated().allSatisfy { $1.text.contains("item=\($0)") })
            #expect(await origin.hits(path: "/limit") == 12)
            #expect(await origin.maximumConcurrentRequests == 3)
        }
    }

    @Test("prefetches take at most one place less than maximumFetchesPerHost, and all load")
    func prefetchesPerHost() async throws {
        try await withOrigin { origin in
            let transport = Self.transport(perHost: 3)
            await origin.closeGate()
            let prefetches = try (0..<12).map { item in
                try transport.prefetch(URLRequest(url: origin.url("/ahead?gate=1&item=\(item)")))
            }
            try #require(await Self.arrived(2, at: "/ahead", of: origin))
            #expect(await origin.hits(path: "/ahead") == 2)
            #expect(prefetches.allSatisfy { !$0.isFinished })
            await origin.openGate()
            let outcomes = try #require(await Self.outcomes(of: prefetches))
            #expect(outcomes.allSatisfy { $0.isLoaded })
            #expect(await origin.hits(path: "/ahead") == 12)
            #expect(await origin.maximumConcurrentRequests == 2)
            // Each answer is stored: the screens that show them read them from memory.
            for item in 0..<12 {
                let (_, _, outcome) = try await transport.response(
                    for: URLRequest(url: origin.url("/ahead?gate=1&item=\(item)")))
                #expect(outcome.isFromMemory)
            }
            #expect(await origin.hits(path: "/ahead") == 12)
        }
    }

    @Test("a request to another host is answered while the first host's requests are held")
    func anotherHost() async throws {
        try await withOrigin { first in
            try await withOrigin { second in
                let transport = Self.transport(perHost: 2)
                await first.closeGate()
                let held = (0..<6).map { item in
                    Task { try await transport.data(from: first.url("/full?gate=1&item=\(item)")).0 }
                }
                try #require(await Self.arrived(2, at: "/full", of: first))
                let other = await ending(within: .seconds(10)) {
                    try await transport.data(from: second.url("/other")).0
                }
                let body = try #require(other).get()
                #expect(body.text.hasPrefix("path=/other"))
                #expect(await first.hits(path: "/full") == 2)
                await first.openGate()
                _ = try await Self.answers(of: held)
                #expect(await first.hits(path: "/full") == 6)
                #expect(await first.maximumConcurrentRequests == 2)
                #expect(await second.totalHits == 1)
            }
        }
    }

    // MARK: - Screens before prefetches

    @Test("a screen's request is answered at once while prefetches wait behind a closed gate")
    func screenBeforePrefetches() async throws {
        try await withOrigin { origin in
            let transport = Self.transport(perHost: 2)
            await origin.closeGate()
            let prefetches = try (0..<20).map { item in
                try transport.prefetch(URLRequest(url: origin.url("/queued?gate=1&item=\(item)")))
            }
            // The prefetches take one place; nineteen wait in the transport.
            try #require(await Self.arrived(1, at: "/queued", of: origin))
            let screen = await ending(within: .seconds(10)) {
                try await transport.response(for: URLRequest(url: origin.url("/screen")))
            }
            let (body, response, outcome) = try #require(screen).get()
            #expect(response.statusCode == 200)
            #expect(body.text.hasPrefix("path=/screen"))
            #expect(!outcome.isFromMemory)
            #expect(await origin.hits(path: "/queued") == 1)
            #expect(prefetches.filter { $0.isFinished }.isEmpty)
            await origin.openGate()
            let outcomes = try #require(await Self.outcomes(of: prefetches))
            #expect(outcomes.allSatisfy { $0.isLoaded })
            #expect(await origin.hits(path: "/queued") == 20)
            #expect(await origin.maximumConcurrentRequests == 2)
        }
    }

    @available(macOS 26.0, *)
    @Test("a screen joining a queued prefetch lifts it past the prefetches' places: one request, the screen answered")
    func screenJoinsQueuedPrefetch() async throws {
        try await withOrigin { origin in
            let transport = Self.transport(perHost: 2)
            await origin.closeGate()
            // The one place prefetches may take is held.
            let blocker = try transport.prefetch(URLRequest(url: origin.url("/join?gate=1&name=blocker")))
            try #require(await Self.arrived(1, at: "/join", of: origin))
            let target = origin.url("/join?gate=1&name=target")
            let prefetch = try transport.prefetch(URLRequest(url: target))
            #expect(await origin.hits("/join?gate=1&name=target") == 0)

            let joinsBefore = transport.statistics.coalescedJoins
            let screen = startCall { try await transport.response(for: URLRequest(url: target)) }
            #expect(transport.statistics.coalescedJoins == joinsBefore + 1)
            // Shared with a screen, the fetch goes at the screen's priority: it takes the place
            // kept for screens, while the blocker still holds the prefetches' one.
            try #require(await Self.arrived(2, at: "/join", of: origin))
            #expect(await origin.hits("/join?gate=1&name=target") == 1)
            await origin.openGate()

            let (body, response, outcome) = try #require(try await Self.answers(of: [screen]).first)
            #expect(response.statusCode == 200)
            #expect(body.text.contains("name=target"))
            #expect(outcome.joinedFetch)
            let outcomes = try #require(await Self.outcomes(of: [prefetch, blocker]))
            #expect(outcomes.allSatisfy { $0.isLoaded })
            #expect(await origin.hits("/join?gate=1&name=target") == 1)
            // The screen read it: stored as an ordinary entry, answered from memory.
            let (again, _, later) = try await transport.response(for: URLRequest(url: target))
            #expect(later.isFromMemory)
            #expect(again == body)
            #expect(await origin.hits("/join?gate=1&name=target") == 1)
        }
    }

    @available(macOS 26.0, *)
    @Test("hits never wait in the queue, even when the host's only place is held")
    func hitsSkipTheQueue() async throws {
        try await withOrigin { origin in
            let transport = Self.transport(perHost: 1)
            let stored = origin.url("/stored")
            _ = try await transport.data(from: stored)
            await origin.closeGate()
            let busy = startCall { try await transport.data(from: origin.url("/busy?gate=1")).0 }
            let prefetches = try (0..<5).map { item in
                try transport.prefetch(URLRequest(url: origin.url("/busy?gate=1&item=\(item)")))
            }
            try #require(await Self.arrived(1, at: "/busy", of: origin))
            let hit = await ending(within: .seconds(10)) {
                try await transport.response(for: URLRequest(url: stored))
            }
            #expect(try #require(hit).get().2.isFromMemory)
            #expect(await origin.hits("/stored") == 1)
            await origin.openGate()
            _ = try await Self.answers(of: [busy])
            #expect(try #require(await Self.outcomes(of: prefetches)).allSatisfy { $0.isLoaded })
            #expect(await origin.maximumConcurrentRequests == 1)
        }
    }

    // MARK: - Cancelling, sharing, refusing

    @Test("of 100 queued prefetches, the 90 cancelled are never sent")
    func cancelledNeverSent() async throws {
        try await withOrigin { origin in
            let transport = Self.transport(perHost: 2)
            await origin.closeGate()
            let prefetches = try (0..<100).map { item in
                try transport.prefetch(URLRequest(url: origin.url("/many/\(item)?gate=1")))
            }
            try #require(await Self.arrived(1, at: "/many/0", of: origin))
            var sent: Set<Int> = []
            for item in 0..<100 where await origin.hits(path: "/many/\(item)") > 0 { sent.insert(item) }
            #expect(sent == [0])

            let kept = Set(stride(from: 0, to: 100, by: 10))
            let cancelled = (0..<100).filter { !kept.contains($0) }
            for item in cancelled { prefetches[item].cancel() }
            // Taken out of the line, they end at once, with the gate still closed.
            let cancelledOutcomes = try #require(await Self.outcomes(of: cancelled.map { prefetches[$0] }))
            #expect(cancelledOutcomes.allSatisfy { $0.isCancelled })
            await origin.openGate()
            let keptOutcomes = try #require(await Self.outcomes(of: kept.sorted().map { prefetches[$0] }))
            #expect(keptOutcomes.allSatisfy { $0.isLoaded })

            for item in 0..<100 {
                let hits = await origin.hits(path: "/many/\(item)")
                #expect(hits == (kept.contains(item) || sent.contains(item) ? 1 : 0), "item \(item)")
            }
            #expect(await origin.totalHits == kept.union(sent).count)
            #expect(await origin.maximumConcurrentRequests == 1)
        }
    }

    @Test("prefetching one URL 1,000 times sends one request; a later prefetch finds it stored")
    func thousandPrefetchesOneRequest() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let path = "/once?gate=1"
            let url = origin.url(path)
            await origin.closeGate()
            let joinsBefore = transport.statistics.coalescedJoins
            let prefetches = try (0..<1_000).map { _ in try transport.prefetch(URLRequest(url: url)) }
            #expect(transport.statistics.coalescedJoins - joinsBefore == 999)
            try #require(await Self.arrived(1, at: "/once", of: origin))
            await origin.openGate()
            let outcomes = try #require(await Self.outcomes(of: prefetches))
            #expect(outcomes.allSatisfy { $0.isLoaded })
            #expect(await origin.hits(path) == 1)

            let later = try transport.prefetch(URLRequest(url: url))
            #expect(later.isFinished)
            #expect(await later.outcome.isAlreadyStored)
            let (_, _, outcome) = try await transport.response(for: URLRequest(url: url))
            #expect(outcome.isFromMemory)
            #expect(await origin.totalHits == 1)
        }
    }

    @Test("prefetching what is never stored, or may not load, throws and sends nothing")
    func refusedPrefetches() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let port = try #require(origin.baseURL.port)
            #expect(throws: PrefetchError.neverStored(.unsafeMethod)) {
                try transport.prefetch(request(origin.url("/refused"), method: "POST"))
            }
            #expect(throws: PrefetchError.neverStored(.unsafeMethod)) {
                try transport.prefetch(request(origin.url("/refused"), method: "DELETE"))
            }
            #expect(throws: PrefetchError.neverStored(.notHTTP)) {
                try transport.prefetch(URLRequest(url: URL(string: "ftp://127.0.0.1:\(port)/refused")!))
            }
            #expect(throws: PrefetchError.neverStored(.requestConditions)) {
                try transport.prefetch(request(origin.url("/refused"), headers: ["If-None-Match": "\"a\""]))
            }
            #expect(throws: PrefetchError.neverStored(.requestNoStore)) {
                try transport.prefetch(request(origin.url("/refused"), headers: ["Cache-Control": "no-store"]))
            }
            #expect(throws: PrefetchError.cacheOnly) {
                var cacheOnly = URLRequest(url: origin.url("/refused"))
                cacheOnly.cachePolicy = .returnCacheDataDontLoad
                try transport.prefetch(cacheOnly)
            }
            // A request sent after them is the first the origin sees.
            _ = try await transport.data(from: origin.url("/after"))
            #expect(await origin.totalHits == 1)
            #expect(await origin.hits("/after") == 1)
            #expect(transport.statistics.networkFetches == 1)
        }
    }

    // MARK: - Priorities

    @Test("a waiting prefetch raised to .high goes before the prefetches that waited before it")
    func raisedPriorityGoesFirst() async throws {
        try await withOrigin { origin in
            let transport = Self.transport(perHost: 1)
            await origin.closeGate()
            let blocker = try transport.prefetch(URLRequest(url: origin.url("/rank?gate=1&name=blocker")))
            try #require(await Self.arrived(1, at: "/rank", of: origin))
            let names = (0..<10).map(String.init)
            let waiting = try names.map { name in
                try transport.prefetch(URLRequest(url: origin.url("/rank?gate=1&name=\(name)")))
            }
            waiting[7].priority = .high
            #expect(waiting[7].priority == .high)

            // The blocker's place goes to the next in line: the raised prefetch.
            blocker.cancel()
            try #require(await Self.arrived(2, at: "/rank", of: origin))
            #expect(await Self.received(names, at: "/rank", of: origin) == ["7"])
            // Then the others, first come first served.
            waiting[7].cancel()
            try #require(await Self.arrived(3, at: "/rank", of: origin))
            #expect(await Self.received(names, at: "/rank", of: origin) == ["0", "7"])

            await origin.openGate()
            let outcomes = try #require(await Self.outcomes(of: [blocker] + waiting))
            #expect(outcomes.map(\.description) == ["cancelled"] + names.map { $0 == "7" ? "cancelled" : "loaded" })
            #expect(await origin.hits(path: "/rank") == 11)
        }
    }

    @Test("a waiting prefetch raised to .high takes the place kept for screens at once")
    func raisedPriorityStartsAtOnce() async throws {
        try await withOrigin { origin in
            let transport = Self.transport(perHost: 2)
            await origin.closeGate()
            let blocker = try transport.prefetch(URLRequest(url: origin.url("/raise?gate=1&name=blocker")))
            try #require(await Self.arrived(1, at: "/raise", of: origin))
            let row = try transport.prefetch(URLRequest(url: origin.url("/raise?gate=1&name=row")))
            #expect(await origin.hits("/raise?gate=1&name=row") == 0)

            // At .high it may take the host's second place, which is free.
            row.priority = .high
            try #require(await Self.arrived(2, at: "/raise", of: origin))
            #expect(await origin.hits("/raise?gate=1&name=row") == 1)
            await origin.openGate()
            #expect(try #require(await Self.outcomes(of: [blocker, row])).allSatisfy { $0.isLoaded })
        }
    }

    @Test("a priority with loads waiting is passed over at most 8 times in a row")
    func agingLimit() async throws {
        try await withOrigin { origin in
            let transport = Self.transport(perHost: 1)
            await origin.closeGate()
            let blocker = try transport.prefetch(URLRequest(url: origin.url("/aging?gate=1&name=blocker")))
            try #require(await Self.arrived(1, at: "/aging", of: origin))
            let lowest = try transport.prefetch(
                URLRequest(url: origin.url("/aging?gate=1&name=lowest")), priority: .veryLow)
            let names = (0..<10).map { "low\($0)" }
            var prefetches: [String: Prefetch] = ["blocker": blocker, "lowest": lowest]
            for name in names {
                prefetches[name] = try transport.prefetch(URLRequest(url: origin.url("/aging?gate=1&name=\(name)")))
            }
            // Cancelling the load in flight hands its one place to the next; the origin tells which.
            var order: [String] = []
            var current = "blocker"
            for sent in 2...12 {
                try #require(prefetches[current]).cancel()
                try #require(await Self.arrived(sent, at: "/aging", of: origin))
                let received = await Self.received(["lowest"] + names, at: "/aging", of: origin)
                let next = try #require(received.first { !order.contains($0) })
                order.append(next)
                current = next
            }
            #expect(order == Array(names[0..<8]) + ["lowest"] + Array(names[8...]))
            await origin.openGate()
            // Every one but the last was cancelled in flight; the last loads.
            let removed = prefetches.removeValue(forKey: current)
            let last = try #require(removed)
            #expect(try #require(await Self.outcomes(of: [last])).allSatisfy { $0.isLoaded })
            #expect(try #require(await Self.outcomes(of: Array(prefetches.values))).allSatisfy { $0.isCancelled })
        }
    }

    @available(macOS 26.0, *)
    @Test("a shared fetch's priority falls back when the screen that raised it leaves")
    func priorityFallsWhenScreenLeaves() async throws {
        try await withOrigin { origin in
            let transport = Self.transport(perHost: 2)
            await origin.closeGate()
            // Both places held: a prefetch's and a screen's.
            let blocker = try transport.prefetch(URLRequest(url: origin.url("/fall?gate=1&name=blocker")))
            let screen = startCall { try await transport.data(from: origin.url("/fall?gate=1&name=screen")).0 }
            try #require(await Self.arrived(2, at: "/fall", of: origin))
            let first = try transport.prefetch(URLRequest(url: origin.url("/fall?gate=1&name=first")))
            let second = try transport.prefetch(URLRequest(url: origin.url("/fall?gate=1&name=second")))

            // A screen joins the second prefetch, raising its fetch above the first, then leaves.
            let joinsBefore = transport.statistics.coalescedJoins
            let leaving = startCall { try await transport.data(from: origin.url("/fall?gate=1&name=second")).0 }
            #expect(transport.statistics.coalescedJoins == joinsBefore + 1)
            leaving.cancel()
            let left = try #require(await ending(within: .seconds(10)) { try await leaving.value })
            #expect(throws: (any Error).self) { try left.get() }

            // Back at low, the second waits behind the first for the prefetches' place.
            blocker.cancel()
            try #require(await Self.arrived(3, at: "/fall", of: origin))
            #expect(await Self.received(["first", "second"], at: "/fall", of: origin) == ["first"])

            await origin.openGate()
            _ = try await Self.answers(of: [screen])
            #expect(try #require(await Self.outcomes(of: [first, second])).allSatisfy { $0.isLoaded })
            #expect(await origin.hits("/fall?gate=1&name=second") == 1)
        }
    }

    // MARK: - Storage

    @Test("prefetching ten times the memory budget leaves the entries screens read in memory")
    func prefetchesDoNotEvictRead() async throws {
        try await withOrigin { origin in
            let capacity = 64 * 1024
            let transport = Self.transport(perHost: nil, memoryCapacity: capacity, maximumEntryShare: 0.25)
            let read = (0..<3).map { origin.url("/read/\($0)?size=12000") }
            for url in read { _ = try await transport.data(from: url) }

            let prefetches = try (0..<55).map { item in
                try transport.prefetch(URLRequest(url: origin.url("/bulk/\(item)?size=12000")))
            }
            let outcomes = try #require(await Self.outcomes(of: prefetches))
            #expect(outcomes.allSatisfy { $0.isLoaded })
            #expect(await origin.hits(path: "/bulk/54") == 1)
            #expect(transport.statistics.bytesHeld <= capacity)
            #expect(transport.statistics.evictions > 0)

            for (index, url) in read.enumerated() {
                let (body, _, outcome) = try await transport.response(for: URLRequest(url: url))
                #expect(outcome.isFromMemory, "read entry \(index): \(outcome)")
                #expect(body.count == 12000)
                #expect(await origin.hits(path: "/read/\(index)") == 1)
            }
            // Prefetched answers are held too, in the room the read entries leave.
            let held = transport.snapshot().entries.map(\.url.path)
            #expect(held.contains { $0.hasPrefix("/bulk/") })
        }
    }

    @Test(
        "a prefetched entry answers the screen's later request from memory, in every identity configuration",
        arguments: IdentityMatrixEndToEndTests.Identity.allCases)
    func prefetchThenRead(identity: IdentityMatrixEndToEndTests.Identity) async throws {
        try await withOrigin { origin in
            let client = await IdentityMatrixEndToEndTests.client(identity, on: origin)
            let transport = client.transport
            let path = identity.pathAndQuery("/detail?stable=1")
            let prefetch = try transport.prefetch(identity.request(origin.url(path)))
            let outcome = try #require(await Self.outcomes(of: [prefetch])?.first)
            #expect(outcome.isLoaded, "\(outcome)")
            await IdentityMatrixEndToEndTests.expectSent(identity, path, to: origin)

            let (body, response, read) = try await transport.response(for: identity.request(origin.url(path)))
            #expect(response.statusCode == 200)
            #expect(read.isFromMemory, "\(read)")
            #expect(body.text.hasSuffix(identity.auth))
            #expect(await origin.hits(path) == 1)
            #expect(transport.statistics.entries == 1)
        }
    }
}

extension Prefetch.Outcome {
    var isLoaded: Bool {
        if case .loaded = self { return true }
        return false
    }

    var isCancelled: Bool {
        if case .cancelled = self { return true }
        return false
    }

    var isAlreadyStored: Bool {
        if case .alreadyStored = self { return true }
        return false
    }
}
