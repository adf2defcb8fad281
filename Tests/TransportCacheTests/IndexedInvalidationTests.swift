import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Invalidation by index, with hits never waiting")
struct IndexedInvalidationTests {
    /// A transport holding `urls`, written as the app's own answers, on a thread of their own.
    private func transport(holding urls: [String]) async throws -> CachedTransport {
        let transport = makeTransport(loader: echoOrigin())
        try await onAThreadOfItsOwn {
            for url in urls { try transport.store(ProvisionalAnswer(for: request(url), data: Data(url.utf8))) }
        }
        return transport
    }

    /// A transport holding 2,000 steps' worth of entries (``ResponseStore/stepSize``) on one
    /// host, enough that invalidating the host takes many steps; and their URLs.
    private func largeHost() async throws -> (CachedTransport, [String]) {
        let urls = (0..<ResponseStore.stepSize * 2_000).map { "https://api.example.com/items/\($0)" }
        return (try await transport(holding: urls), urls)
    }

    /// Whether the index holds exactly the keys the store holds.
    private func indexAgrees(_ transport: CachedTransport) -> Bool {
        let indexed = Set(transport.store.index.withLock { $0.keys })
        var held = Set<CacheKey>()
        transport.store.state.withLock { state in state.entries.forEachEntry { key, _ in held.insert(key) } }
        return indexed == held && transport.store.index.withLock { $0.count } == held.count
    }

    private static let paths = [
        "/", "/items", "/items/", "/items/7", "/items//7", "/itemsets", "/items/7/parts", "/items%2F7",
        "/caf%C3%A9", "/cafe%CC%81/menu", "/caf%C3%A9/menu", "/a/b/c/", "/a/b", "/a", "/A", "/%20x/y",
        "/items/7?page=2", "/items?page=1", "/items/%2E%2E/x", "/ü/ö",
    ]
    private static let prefixes = [
        "", "/", "/items", "/items/", "/items/7", "/item", "/café", "/cafe\u{301}", "/café/", "/a/b", "/a/b/",
        "/A", "/ü", "/%20x", " x", "items", "/items//", "/items%2F7",
    ]
    private static let hosts = ["api.example.com", "other.example.com"]

    @Test("a path prefix or a host takes from the index exactly the keys the endpoint matches")
    func indexMatchesEndpoints() throws {
        let urls = Self.hosts.flatMap { host in Self.paths.map { "https://\(host)\($0)" } }
        let keys = urls.compactMap {
            CacheKey(URLRequest(url: URL(string: $0)!), keyHeaders: .init(extra: []))
        }
        let endpoints =
            Self.prefixes.flatMap { prefix in
                [Endpoint.pathPrefix(prefix)] + Self.hosts.map { .pathPrefix(prefix, host: $0) }
            }
            + Self.hosts.map { Endpoint.host($0) } + [.host("API.example.com"), .host("none.example.com")]
            + urls.map { Endpoint.url(URL(string: $0)!) }
        for endpoint in endpoints {
            var index = URLIndex()
            for key in keys { index.insert(key) }
            let expected = Set(keys.filter { endpoint.matches(normalizedURL: $0.url) })
            let removed = index.remove(endpoint)
            #expect(Set(removed) == expected, "\(endpoint)")
            #expect(removed.count == expected.count)
            #expect(index.count == keys.count - expected.count)
            #expect(Set(index.keys) == Set(keys).subtracting(expected))
        }
    }

    @Test("a plain URL's place in the index is read from its bytes exactly as Foundation reads it")
    func plainLocations() {
        let hosts = [
            "api.example.com", "a-b.example.com", "127.0.0.1", "api.example.com:8443", "x:1", "[::1]", "u@h.com",
        ]
        let paths = [
            "", "/", "/items", "/items/", "/items/7", "/items//7", "/g7/items/123", "/a.b/c-d/e_f~", "/.well-known/x",
            "/a/./b", "/a/../b", "/.", "/..", "/A/Bc", "/items%2F7", "/caf%C3%A9", "/ü", "/a;b", "/a:b", "/a+b", "/a b",
        ]
        let queries = ["", "?", "?page=2", "?a=/b/../c", "?q=%20"]
        var plain = 0
        for scheme in ["http", "https", "ftp"] {
            for host in hosts {
                for path in paths {
                    for query in queries {
                        let url = "\(scheme)://\(host)\(path)\(query)"
                        guard let read = URLIndex.Location(plainURL: url) else { continue }
                        plain += 1
                        #expect(read == URLIndex.Location(parsing: url), "\(url)")
                    }
                }
            }
        }
        // The common form is read from its bytes, and so are its neighbours above.
        #expect(URLIndex.Location(plainURL: "https://api.example.com/g7/items/123?page=2") != nil)
        #expect(plain > 100)
    }

    @Test("an exact URL takes every method and identity of that URL and nothing of its neighbours")
    func exactURL() async throws {
        let transport = makeTransport(loader: echoOrigin())
        let url = "https://api.example.com/items/1"
        let dropped = [
            request(url), request(url, method: "HEAD"), request(url, headers: ["Authorization": "Bearer alice"]),
        ]
        let kept = [
            request("https://api.example.com/items/1?page=2"), request("https://api.example.com/items/1/parts"),
            request("https://api.example.com/items"),
        ]
        for request in dropped + kept { _ = try await transport.data(for: request) }
        var changes = transport.changes().makeAsyncIterator()
        transport.invalidate(.url(URL(string: url)!))
        #expect(transport.statistics.entries == kept.count)
        #expect(transport.statistics.invalidations == dropped.count)
        #expect(await changes.next() == .invalidated(urls: [URL(string: url)!], endpoint: .url(URL(string: url)!)))
        #expect(indexAgrees(transport))
    }

    @Test("a host drops its entries only, whatever the path")
    func hostEndpoint() async throws {
        let transport = try await transport(holding: [
            "https://api.example.com/a", "https://api.example.com/b/c", "https://API.example.com/d",
            "https://other.example.com/a",
        ])
        transport.invalidate(.host("Api.Example.com"))
        #expect(transport.statistics.entries == 1)
        #expect(transport.statistics.invalidations == 3)
        #expect(indexAgrees(transport))
    }

    // MARK: - Bad input

    @Test("an endpoint that matches nothing drops nothing and announces nothing")
    func endpointMatchingNothing() async throws {
        let transport = try await transport(holding: ["https://api.example.com/items/1"])
        var changes = transport.changes().makeAsyncIterator()
        for endpoint in [
            Endpoint.pathPrefix("/nothing"), .pathPrefix("/items", host: "other.example.com"), .host("none.example"),
            .url(URL(string: "https://api.example.com/items/2")!), .matching { _ in false },
        ] {
            transport.invalidate(endpoint)
        }
        #expect(transport.statistics.entries == 1)
        #expect(transport.statistics.invalidations == 0)
        #expect(indexAgrees(transport))
        // The first change heard is the first removal.
        let held = Endpoint.host("api.example.com")
        transport.invalidate(held)
        #expect(
            await changes.next()
                == .invalidated(urls: [URL(string: "https://api.example.com/items/1")!], endpoint: held))
    }

    @Test("invalidating a key that is not stored drops nothing and announces nothing")
    func keyNotStored() async throws {
        let transport = try await transport(holding: ["https://api.example.com/items/1"])
        var changes = transport.changes().makeAsyncIterator()
        transport.invalidate(request("https://api.example.com/items/2"))
        #expect(transport.invalidate(tag: "never-used") == 0)
        #expect(transport.statistics.entries == 1)
        #expect(transport.statistics.invalidations == 0)
        #expect(indexAgrees(transport))
        // The first change heard is the first removal.
        transport.invalidate(request("https://api.example.com/items/1"))
        #expect(
            await changes.next() == .invalidated(urls: [URL(string: "https://api.example.com/items/1")!], endpoint: nil)
        )
    }

    @Test("the same key invalidated from many tasks at once is dropped once")
    func sameKeyFromManyTasks() async throws {
        let url = "https://api.example.com/items/1"
        let transport = try await transport(holding: [url, "https://api.example.com/items/2"])
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<64 {
                group.addTask {
                    switch index % 3 {
                    case 0: transport.invalidate(request(url))
                    case 1: transport.invalidate(.url(URL(string: url)!))
                    default: transport.invalidate(.pathPrefix("/items/1"))
                    }
                }
            }
        }
        #expect(transport.statistics.invalidations == 1)
        #expect(transport.statistics.entries == 1)
        #expect(indexAgrees(transport))
    }

    @Test("an invalidation racing a store of the same key leaves the index and the store agreeing")
    func invalidationRacingStore() async throws {
        let transport = makeTransport(loader: echoOrigin())
        let urls = (0..<8).map { "https://api.example.com/items/\($0)" }
        await withTaskGroup(of: Void.self) { group in
            for round in 0..<200 {
                let url = urls[round % urls.count]
                group.addTask {
                    try? transport.store(ProvisionalAnswer(for: request(url), data: Data("\(round)".utf8)))
                }
                group.addTask {
                    if round.isMultiple(of: 2) {
                        transport.invalidate(request(url))
                    } else {
                        transport.invalidate(.pathPrefix("/items"))
                    }
                }
            }
        }
        #expect(indexAgrees(transport))
        let held = transport.statistics.entries
        transport.invalidate(.pathPrefix("/items"))
        #expect(transport.statistics.entries == 0)
        #expect(transport.statistics.invalidations >= held)
        #expect(indexAgrees(transport))
    }

    // MARK: - The index follows the store

    @Test("the index follows evictions, replaced variants, trims and invalidateAll")
    func indexFollowsTheStore() async throws {
        let transport = makeTransport(loader: echoOrigin()) { $0.storage.memoryCapacity = 20_000 }
        for index in 0..<100 {
            try transport.store(
                ProvisionalAnswer(for: request("https://api.example.com/e/\(index)"), data: Data(count: 300)))
        }
        #expect(transport.statistics.evictions > 0)
        #expect(indexAgrees(transport))
        transport.invalidate(.pathPrefix("/e"))
        #expect(transport.statistics.entries == 0)
        #expect(indexAgrees(transport))
        for index in 0..<10 {
            try transport.store(
                ProvisionalAnswer(for: request("https://api.example.com/e/\(index)"), data: Data(count: 300)))
        }
        transport.trim(for: .warning)
        #expect(indexAgrees(transport))
        transport.invalidateAll()
        #expect(transport.store.index.withLock { $0.count } == 0)
        #expect(indexAgrees(transport))
    }

    @Test("many keys are dropped, a few at a time, all of them and only them")
    func manyKeys() async throws {
        let count = ResponseStore.stepSize * 96 + 7
        let urls = (0..<count).map { "https://api.example.com/g\($0 % 2)/items/\($0)" }
        let transport = try await transport(holding: urls)
        var changes = transport.changes().makeAsyncIterator()
        transport.invalidate(.pathPrefix("/g0"))
        let dropped = urls.filter { $0.contains("/g0/") }
        #expect(transport.statistics.entries == count - dropped.count)
        #expect(transport.statistics.invalidations == dropped.count)
        let announced = dropped.sorted().map { URL(string: $0)! }
        #expect(await changes.next() == .invalidated(urls: announced, endpoint: .pathPrefix("/g0")))
        #expect(indexAgrees(transport))
        transport.invalidate(.matching { $0.path.hasPrefix("/g1/") })
        #expect(transport.statistics.entries == 0)
        #expect(indexAgrees(transport))
    }

    @Test("a snapshot read a few entries at a time lists the entries most recently used first")
    func snapshotOrder() async throws {
        let count = ResponseStore.stepSize * 64 + 5
        let urls = (0..<count).map { "https://api.example.com/items/\($0)" }
        let transport = try await transport(holding: urls)
        // Use some in an order of their own: they become the most recently used, last first.
        let used = [700, 3, 1_000, 512]
        for index in used { _ = try await transport.data(for: request(urls[index])) }
        let listed = transport.snapshot().entries.map(\.url.absoluteString)
        let expected =
            used.reversed().map { urls[$0] } + urls.indices.reversed().filter { !used.contains($0) }.map { urls[$0] }
        #expect(listed == expected)
    }

    @Test("invalidateAll answers as before for more keys than the store remembers departures for")
    func invalidateAllDepartures() async throws {
        let count = Departures.limit + 10
        let urls = (0..<count).map { "https://api.example.com/items/\($0)" }
        let transport = try await transport(holding: urls)
        var changes = transport.changes().makeAsyncIterator()
        transport.invalidateAll()
        #expect(await changes.next() == .cleared)
        #expect(transport.statistics.entries == 0)
        #expect(transport.statistics.bytesHeld == 0)
        #expect(transport.statistics.invalidations == count)
        // The most recently stored keys are the ones remembered.
        let (_, response) = try await transport.data(for: request(urls[count - 1]))
        #expect(response.cacheOutcome?.source == .network(.invalidated))
    }

    // MARK: - No hit waits

    @Test("a hit needs neither the in-flight lock nor the index's lock, which an invalidation holds while it works")
    func hitTakesOnlyTheStoreLock() async throws {
        let url = "https://api.example.com/items/1"
        let transport = try await transport(holding: [url])
        let inFlight = await transport.inFlight
        let planner = await transport.planner
        let answered = try inFlight.withLock { _ in
            try transport.store.index.withLock { _ in
                // On another thread, so that a lock it needed would block it rather than this one.
                try Self.onAnotherThread { try Self.isMemoryAnswer(planner, url) }
            }
        }
        #expect(answered)
        #expect(transport.statistics.memoryHits == 1)
    }

    @Test("a hit completes while a predicate invalidation is in the middle of asking about keys")
    func hitDuringPredicate() async throws {
        let urls = (0..<10).map { "https://api.example.com/items/\($0)" }
        let transport = try await transport(holding: urls)
        let asked = DispatchSemaphore(value: 0)
        let hitDone = DispatchSemaphore(value: 0)
        let answered = Locked(false)
        let planner = await transport.planner
        Thread.detachNewThread {
            asked.wait()
            let isAnswer = (try? Self.isMemoryAnswer(planner, urls[0])) ?? false
            answered.withLock { $0 = isAnswer }
            hitDone.signal()
        }
        let firstQuestion = Locked(true)
        let timedOut = Locked(false)
        transport.invalidate(
            .matching { url in
                // The first question about the dropped key lets the hit run, then waits for it to
                // finish: were the predicate asked under the lock a hit takes, the hit could never
                // finish, and this wait would give up.
                let isFirst = firstQuestion.withLock { first in
                    guard first, url.path == "/items/9" else { return false }
                    first = false
                    return true
                }
                if isFirst {
                    asked.signal()
                    if hitDone.wait(timeout: .now() + 30) == .timedOut { timedOut.withLock { $0 = true } }
                }
                return url.path == "/items/9"
            })
        #expect(timedOut.withLock { $0 } == false)
        #expect(answered.withLock { $0 })
        #expect(transport.statistics.entries == 9)
        #expect(transport.statistics.memoryHits == 1)
    }

    @Test("an invalidation asks its predicate under none of the transport's locks: the predicate may call it")
    func predicateCallsTransport() async throws {
        let urls = (0..<10).map { "https://api.example.com/items/\($0)" }
        let transport = try await transport(holding: urls)
        let inFlight = await transport.inFlight
        let (asked, reached) = (Locked(0), Locked(false))
        transport.invalidate(
            .matching { url in
                // The first question takes, on another thread, the in-flight lock a join and a
                // completion take, and the index's: had the invalidation held one, it would wait
                // 30 seconds and give up.
                if asked.withLock({ count in
                    count += 1
                    return count == 1
                }) {
                    let taken = try? Self.onAnotherThread {
                        (inFlight.withLock { $0.fetches.count }, transport.store.index.withLock { $0.count })
                    }
                    reached.withLock { $0 = taken != nil }
                }
                return url.path == "/items/3"
            })
        #expect(reached.withLock { $0 })
        #expect(asked.withLock { $0 } == urls.count)
        #expect(transport.statistics.entries == urls.count - 1)
        #expect(indexAgrees(transport))
    }

    @Test("a fetch's completion or a join waits for one step of a large invalidation, not for all of it")
    func inFlightLockBetweenSteps() async throws {
        let (transport, urls) = try await largeHost()
        let count = urls.count
        let inFlight = await transport.inFlight
        let held: @Sendable () -> Int = { transport.store.state.withLock { $0.entries.count } }
        let ended = Locked(false)
        let observed = DispatchSemaphore(value: 0)
        let letIn = Locked(0)
        // On a thread of its own, as the invalidation is, so that a busy pool of tasks cannot
        // delay it: once entries leave, the removal is under way, and the in-flight lock, which a
        // join and a fetch's completion take, is let in before it ends, while entries are still held.
        Thread.detachNewThread {
            while held() == count { usleep(20) }
            while !ended.withLock({ $0 }) {
                if inFlight.withLock({ _ in held() }) > 0 { letIn.withLock { $0 += 1 } }
            }
            observed.signal()
        }
        try await onAThreadOfItsOwn {
            transport.invalidate(.host("api.example.com"))
            ended.withLock { $0 = true }
            observed.wait()
        }
        let letInWhileHeld = letIn.withLock { $0 }
        #expect(letInWhileHeld > 0)
        #expect(transport.statistics.entries == 0)
        #expect(transport.statistics.invalidations == count)
        #expect(indexAgrees(transport))
    }

    @Test(
        "optimistic updates that begin during an invalidation and fail, one over another, bring back nothing it dropped"
    )
    func updatesDuringInvalidation() async throws {
        let (transport, urls) = try await largeHost()
        let count = urls.count
        let ended = DispatchSemaphore(value: 0)
        let returned = Locked(false)
        Thread.detachNewThread {
            transport.invalidate(.host("api.example.com"))
            returned.withLock { $0 = true }
            ended.signal()
        }
        while transport.statistics.entries == count { await Task.yield() }
        // Updates of keys the removal has not reached yet, most of them: each begins over the
        // entry held. A second update of each key begins once the invalidation has returned, and
        // fails first; then the first fails.
        let chosen = Array(urls.suffix(64))
        func update(_ url: String, until gate: Gate) -> Task<Void, Never> {
            Task {
                _ = try? await transport.optimisticUpdate(
                    [ProvisionalAnswer(for: request(url), data: Data("provisional".utf8))],
                    write: { () async throws -> Int in
                        try await gate.wait()
                        throw URLError(.badServerResponse)
                    })
            }
        }
        let firstFails = Gate()
        let first = chosen.map { update($0, until: firstFails) }
        while transport.pendingUpdateKeys < chosen.count && !returned.withLock({ $0 }) { await Task.yield() }
        try await onAThreadOfItsOwn { ended.wait() }
        let secondFails = Gate()
        let second = chosen.map { update($0, until: secondFails) }
        while transport.pendingUpdateKeys < chosen.count { await Task.yield() }
        secondFails.open()
        for task in second { await task.value }
        firstFails.open()
        for task in first { await task.value }
        // Rolled back, none of them restores what was held before the invalidation.
        #expect(transport.statistics.entries == 0)
        #expect(transport.pendingUpdateKeys == 0)
        #expect(indexAgrees(transport))
    }

    @Test("invalidateAll() while an invalidation runs leaves the index counting what the store holds")
    func invalidateAllDuringInvalidation() async throws {
        let (transport, urls) = try await largeHost()
        let count = urls.count
        let ended = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            transport.invalidate(.host("api.example.com"))
            ended.signal()
        }
        while transport.statistics.entries == count { await Task.yield() }
        try await onAThreadOfItsOwn {
            transport.invalidateAll()
            ended.wait()
        }
        try transport.store(ProvisionalAnswer(for: request(urls[0]), data: Data("again".utf8)))
        #expect(transport.statistics.entries == 1)
        #expect(indexAgrees(transport))
    }

    /// Whether the transport plans to answer `url` from memory: the synchronous part of a hit.
    private static func isMemoryAnswer(_ planner: RequestPlanner, _ url: String) throws -> Bool {
        if case .memory = try planner.plan(request(url)) { return true }
        return false
    }

    /// Runs `body` on a thread of its own and waits for it.
    private static func onAnotherThread<Result: Sendable>(_ body: @escaping @Sendable () throws -> Result) throws
        -> Result
    {
        let outcome = Locked<Swift.Result<Result, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            outcome.withLock { $0 = Swift.Result(catching: body) }
            done.signal()
        }
        if done.wait(timeout: .now() + 30) == .timedOut { throw CancellationError() }
        return try outcome.withLock { $0! }.get()
    }
}
