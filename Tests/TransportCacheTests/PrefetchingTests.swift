import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("The queue before the network: per-host limits and priorities", .timeLimit(.minutes(1)))
struct FetchQueueTests {
    let base = "https://api.example.com"

    func url(_ path: String) -> URL { URL(string: "\(base)\(path)")! }

    /// A transport whose hosts take `limit` fetches at once, over `origin`.
    func transport(_ origin: ScriptedOrigin, limit: Int?) -> CachedTransport {
        makeTransport(loader: origin) { $0.network.maximumFetchesPerHost = limit }
    }

    /// Starts a screen's GET of `path` in a task of its own, at `priority` when given.
    func screen(
        _ transport: CachedTransport, _ path: String, priority: FetchPriority? = nil
    ) -> Task<String, any Error> {
        let url = url(path)
        return Task {
            if let priority {
                return try await withFetchPriority(priority) { try await transport.data(from: url).0.text }
            }
            return try await transport.data(from: url).0.text
        }
    }

    /// Waits until `count` fetches of `url`'s host wait in the queue.
    func waitForWaiting(_ count: Int, in transport: CachedTransport, host url: URL) async {
        while transport.queue.counts(for: url).waiting < count { await Task.yield() }
    }

    /// The paths of the origin's calls, in the order they arrived.
    func paths(_ origin: ScriptedOrigin) -> [String] { origin.calls.map { $0.url!.path } }

    @Test("a host has at most N fetches in flight; the others wait and are sent as places free")
    func perHostLimit() async throws {
        let origin = echoOrigin(gated: true)
        let transport = transport(origin, limit: 2)
        let callers = (0..<5).map { screen(transport, "/item/\($0)") }
        await origin.waitForCalls(2)
        await waitForWaiting(3, in: transport, host: url("/"))
        #expect(transport.queue.counts(for: url("/")) == (running: 2, waiting: 3))
        #expect(origin.callCount == 2)
        origin.openGate()
        for caller in callers { _ = try await caller.value }
        #expect(origin.callCount == 5)
        #expect(transport.queue.counts(for: url("/")) == (running: 0, waiting: 0))
    }

    @Test("another host is not delayed by a full one")
    func otherHostNotDelayed() async throws {
        let origin = ScriptedOrigin(gated: true, respond: ScriptedOrigin.ok()) { $0.url?.host == "api.example.com" }
        let transport = transport(origin, limit: 1)
        let held = screen(transport, "/slow")
        await origin.waitForCalls(1)
        let other = try await transport.data(from: URL(string: "https://cdn.example.com/image")!).0.text
        #expect(other.contains("cdn.example.com"))
        origin.openGate()
        _ = try await held.value
    }

    @Test("waiting fetches go highest priority first, first come first served within one")
    func priorityOrder() async throws {
        let origin = echoOrigin(gated: true)
        let transport = transport(origin, limit: 1)
        let first = screen(transport, "/first")
        await origin.waitForCalls(1)
        let prefetches = try (1...2).map { try transport.prefetch(URLRequest(url: url("/low/\($0)"))) }
        await waitForWaiting(2, in: transport, host: url("/"))
        // One at a time: two tasks started together reach the queue in either order.
        var normal: [Task<String, any Error>] = []
        for index in 1...2 {
            normal.append(screen(transport, "/normal/\(index)", priority: .normal))
            await waitForWaiting(2 + index, in: transport, host: url("/"))
        }
        let high = screen(transport, "/high", priority: .high)
        await waitForWaiting(5, in: transport, host: url("/"))
        origin.openGate()
        _ = try await first.value
        _ = try await high.value
        for caller in normal { _ = try await caller.value }
        for prefetch in prefetches { #expect(await prefetch.outcome.isLoaded) }
        #expect(paths(origin) == ["/first", "/high", "/normal/1", "/normal/2", "/low/1", "/low/2"])
    }

    @Test("a priority passed over eight times in a row goes next: nothing waits for ever")
    func aging() async throws {
        let origin = echoOrigin(gated: true)
        let transport = transport(origin, limit: 1)
        let first = screen(transport, "/first")
        await origin.waitForCalls(1)
        let low = screen(transport, "/low", priority: .low)
        await waitForWaiting(1, in: transport, host: url("/"))
        var high: [Task<String, any Error>] = []
        for index in 1...10 {
            high.append(screen(transport, "/high/\(index)", priority: .high))
            await waitForWaiting(1 + index, in: transport, host: url("/"))
        }
        origin.openGate()
        _ = try await first.value
        _ = try await low.value
        for caller in high { _ = try await caller.value }
        #expect(paths(origin) == ["/first"] + (1...8).map { "/high/\($0)" } + ["/low", "/high/9", "/high/10"])
    }

    @Test("fetches below normal priority leave one place of the host to screens")
    func onePlaceKeptForScreens() async throws {
        let origin = echoOrigin(gated: true)
        let transport = transport(origin, limit: 3)
        let prefetches = try (0..<5).map { try transport.prefetch(URLRequest(url: url("/row/\($0)"))) }
        await origin.waitForCalls(2)
        await waitForWaiting(3, in: transport, host: url("/"))
        #expect(transport.queue.counts(for: url("/")) == (running: 2, waiting: 3))
        let visible = screen(transport, "/screen", priority: .normal)
        await origin.waitForCalls(3)
        #expect(paths(origin).last == "/screen")
        origin.openGate()
        _ = try await visible.value
        for prefetch in prefetches { #expect(await prefetch.outcome.isLoaded) }
        #expect(origin.callCount == 6)
    }

    @Test("a fetch cancelled while it waits is never sent")
    func cancelledWhileWaitingNeverSent() async throws {
        let origin = echoOrigin(gated: true)
        let transport = transport(origin, limit: 1)
        let first = screen(transport, "/first")
        await origin.waitForCalls(1)
        let waiting = screen(transport, "/waiting")
        await waitForWaiting(1, in: transport, host: url("/"))
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        origin.openGate()
        _ = try await first.value
        let after = try await transport.data(from: url("/after")).0.text
        #expect(after.contains("/after"))
        #expect(paths(origin) == ["/first", "/after"])
    }

    @Test("a request the transport does not store waits for its host like a fetch")
    func passThroughIsQueued() async throws {
        let origin = echoOrigin(gated: true)
        let transport = transport(origin, limit: 1)
        let first = screen(transport, "/first")
        await origin.waitForCalls(1)
        let post = Task { try await transport.data(for: request("\(base)/comments", method: "POST")).0.text }
        await waitForWaiting(1, in: transport, host: url("/"))
        #expect(origin.callCount == 1)
        origin.openGate()
        _ = try await first.value
        _ = try await post.value
        #expect(paths(origin) == ["/first", "/comments"])
    }

    @Test("a limit of zero or less counts as one: fetches go one at a time, and all are answered", arguments: [0, -5])
    func limitBelowOne(limit: Int) async throws {
        let origin = echoOrigin(gated: true)
        let transport = transport(origin, limit: limit)
        let callers = (0..<3).map { screen(transport, "/item/\($0)") }
        await origin.waitForCalls(1)
        await waitForWaiting(2, in: transport, host: url("/"))
        #expect(transport.queue.counts(for: url("/")) == (running: 1, waiting: 2))
        origin.openGate()
        for caller in callers { _ = try await caller.value }
        #expect(origin.callCount == 3)
    }

    @Test("a hit never waits for the queue, even when its host is full")
    func hitsNeverQueue() async throws {
        let origin = echoOrigin()
        let transport = transport(origin, limit: 1)
        _ = try await transport.data(from: url("/stored"))
        origin.closeGate()
        let held = screen(transport, "/held")
        await origin.waitForCalls(2)
        let waiting = screen(transport, "/waiting")
        await waitForWaiting(1, in: transport, host: url("/"))
        let (_, _, outcome) = try await transport.response(for: URLRequest(url: url("/stored")))
        #expect(outcome.isFromMemory)
        origin.openGate()
        _ = try await held.value
        _ = try await waiting.value
    }

    @Test("a fetch's network duration counts from when it left the queue, not from when it joined it")
    func durationExcludesTheWait() async throws {
        let origin = ScriptedOrigin(gated: true, respond: ScriptedOrigin.ok()) { $0.url?.path == "/first" }
        let transport = transport(origin, limit: 1)
        let first = screen(transport, "/first")
        await origin.waitForCalls(1)
        let queued = Task { try await transport.response(for: URLRequest(url: url("/queued"))).2 }
        await waitForWaiting(1, in: transport, host: url("/"))
        // Held in the queue for at least this long; it leaves the queue once the gate opens.
        try await Task.sleep(for: .milliseconds(300))
        let opened = ContinuousClock.now
        origin.openGate()
        _ = try await first.value
        let outcome = try await queued.value
        // Within what passed since the gate opened, however slow the machine: counted from when
        // it joined the queue, it would hold the 300 ms before as well.
        #expect(try #require(outcome.networkDuration) <= ContinuousClock.now - opened)
    }

    @Test("a task's priority maps to a fetch priority; withFetchPriority names one")
    func taskPriorities() async throws {
        #expect(FetchPriority(.background) == .veryLow)
        #expect(FetchPriority(.utility) == .low)
        #expect(FetchPriority(.low) == .low)
        #expect(FetchPriority(.medium) == .normal)
        #expect(FetchPriority(.userInitiated) == .high)
        #expect(FetchPriority(.high) == .high)
        let origin = echoOrigin(gated: true)
        let transport = transport(origin, limit: 1)
        let first = screen(transport, "/first")
        await origin.waitForCalls(1)
        let utility = Task(priority: .utility) { try await transport.data(from: url("/utility")).0.text }
        await waitForWaiting(1, in: transport, host: url("/"))
        let named = screen(transport, "/named", priority: .veryHigh)
        await waitForWaiting(2, in: transport, host: url("/"))
        origin.openGate()
        _ = try await first.value
        _ = try await utility.value
        _ = try await named.value
        #expect(paths(origin) == ["/first", "/named", "/utility"])
    }
}

@Suite("A shared fetch goes at its callers' highest priority", .timeLimit(.minutes(1)))
struct SharedPriorityTests {
    let base = "https://api.example.com"

    func url(_ path: String) -> URL { URL(string: "\(base)\(path)")! }

    func waitForWaiting(_ count: Int, in transport: CachedTransport) async {
        while transport.queue.counts(for: url("/")).waiting < count { await Task.yield() }
    }

    @Test("a screen that joins a waiting prefetch and leaves lowers it to its own priority again")
    func fallsWhenTheScreenLeaves() async throws {
        let origin = echoOrigin(gated: true)
        let transport = makeTransport(loader: origin) { $0.network.maximumFetchesPerHost = 1 }
        let first = Task { try await transport.data(from: url("/first")) }
        await origin.waitForCalls(1)
        let prefetch = try transport.prefetch(URLRequest(url: url("/row")))
        let normal = Task { try await withFetchPriority(.normal) { try await transport.data(from: url("/normal")) } }
        await waitForWaiting(2, in: transport)
        let leaving = Task { try await withFetchPriority(.high) { try await transport.data(from: url("/row")) } }
        await transport.waitForCoalescedJoins(1)
        leaving.cancel()
        await #expect(throws: CancellationError.self) { try await leaving.value }
        origin.openGate()
        _ = try await first.value
        _ = try await normal.value
        #expect(await prefetch.outcome.isLoaded)
        #expect(paths(origin) == ["/first", "/normal", "/row"])
    }

    @Test("a waiting prefetch raised to a screen's priority takes the place kept for screens at once")
    func riseTakesTheKeptPlace() async throws {
        let origin = echoOrigin(gated: true)
        let transport = makeTransport(loader: origin) { $0.network.maximumFetchesPerHost = 2 }
        let held = try transport.prefetch(URLRequest(url: url("/held")))
        await origin.waitForCalls(1)
        let joined = try transport.prefetch(URLRequest(url: url("/joined")))
        let raised = try transport.prefetch(URLRequest(url: url("/raised")))
        await waitForWaiting(2, in: transport)
        // A screen joins: its fetch leaves the line for the free place, with the gate still closed.
        let screen = Task { try await transport.data(from: url("/joined")).0.text }
        await origin.waitForCalls(2)
        #expect(origin.calls[1].url?.path == "/joined")
        origin.release(2)
        #expect(try await screen.value.contains("/joined"))
        // The handle's priority raised does the same.
        raised.priority = .high
        await origin.waitForCalls(3)
        #expect(origin.calls[2].url?.path == "/raised")
        origin.openGate()
        for prefetch in [held, joined, raised] { #expect(await prefetch.outcome.isLoaded) }
    }

    @Test("a screen's fetch left to a prefetch counts as a prefetch: the place kept for screens stays free")
    func fallenFetchYields() async throws {
        let origin = echoOrigin(gated: true)
        let transport = makeTransport(loader: origin) { $0.network.maximumFetchesPerHost = 3 }
        // One at a time, so that call 1, released below, is the first prefetch's.
        var prefetches: [Prefetch] = []
        for (index, path) in ["/p1", "/p2"].enumerated() {
            prefetches.append(try transport.prefetch(URLRequest(url: url(path))))
            await origin.waitForCalls(index + 1)
        }
        let screen = Task { try await withFetchPriority(.normal) { try await transport.data(from: url("/shared")) } }
        await origin.waitForCalls(3)
        let waiting = try transport.prefetch(URLRequest(url: url("/p3")))
        await waitForWaiting(1, in: transport)
        let sharing = try transport.prefetch(URLRequest(url: url("/shared")))
        await transport.waitForCoalescedJoins(1)
        screen.cancel()
        await #expect(throws: CancellationError.self) { try await screen.value }
        // The first prefetch ends: its place is the one kept for screens, not the waiting prefetch's.
        origin.release(1)
        #expect(await prefetches[0].outcome.isLoaded)
        #expect(transport.queue.counts(for: url("/")) == (running: 2, waiting: 1))
        let next = Task { try await withFetchPriority(.normal) { try await transport.data(from: url("/next")) } }
        await origin.waitForCalls(4)
        #expect(origin.calls[3].url?.path == "/next")
        origin.openGate()
        _ = try await next.value
        for prefetch in [prefetches[1], waiting, sharing] { #expect(await prefetch.outcome.isLoaded) }
    }

    @Test(
        "a screen joining a waiting prefetch raises it in every identity configuration",
        arguments: IdentityConfiguration.allCases)
    func risesInEveryIdentity(identity: IdentityConfiguration) async throws {
        let origin = authenticatingOrigin(accepting: Locked(["-", "Bearer me-1"]), gated: true)
        let (transport, _) = identity.transport(origin) { $0.network.maximumFetchesPerHost = 1 }
        let first = Task { try await transport.data(for: identity.request("\(self.base)/first")) }
        await origin.waitForCalls(1)
        let prefetch = try transport.prefetch(identity.request("\(base)/row"))
        await waitForWaiting(1, in: transport)
        let other = Task {
            try await withFetchPriority(.normal) {
                try await transport.data(for: identity.request("\(self.base)/other"))
            }
        }
        await waitForWaiting(2, in: transport)
        let joined = Task {
            try await withFetchPriority(.high) { try await transport.data(for: identity.request("\(self.base)/row")) }
        }
        await transport.waitForCoalescedJoins(1)
        origin.release(1)
        await origin.waitForCalls(2)
        #expect(origin.calls[1].url?.path == "/row")
        origin.openGate()
        _ = try await first.value
        _ = try await joined.value
        _ = try await other.value
        #expect(await prefetch.outcome.isLoaded)
        #expect(origin.callCount == 3)
    }

    @Test("the last caller leaving still cancels the fetch, also after its priority rose")
    func lastCallerCancels() async throws {
        let origin = echoOrigin(gated: true)
        let transport = makeTransport(loader: origin) { $0.network.maximumFetchesPerHost = 1 }
        let first = Task { try await transport.data(from: url("/first")) }
        await origin.waitForCalls(1)
        let prefetch = try transport.prefetch(URLRequest(url: url("/row")))
        await waitForWaiting(1, in: transport)
        let joined = Task { try await withFetchPriority(.high) { try await transport.data(from: url("/row")) } }
        await transport.waitForCoalescedJoins(1)
        joined.cancel()
        prefetch.cancel()
        await #expect(throws: CancellationError.self) { try await joined.value }
        #expect(await prefetch.outcome.isCancelled)
        origin.openGate()
        _ = try await first.value
        #expect(origin.callCount(for: url("/row")) == 0)
    }

    @Test("a prefetch's priority changed while it waits moves it; while it runs, or after it ended, it changes nothing")
    func priorityChangedWhileWaitingAndRunning() async throws {
        let origin = echoOrigin(gated: true)
        let transport = makeTransport(loader: origin) { $0.network.maximumFetchesPerHost = 1 }
        let first = Task { try await transport.data(from: url("/first")) }
        await origin.waitForCalls(1)
        let rows = try (0..<3).map { try transport.prefetch(URLRequest(url: url("/row/\($0)"))) }
        await waitForWaiting(3, in: transport)
        rows[2].priority = .high
        #expect(rows[2].priority == .high)
        origin.release(1)
        origin.release(2)
        await origin.waitForCalls(2)
        #expect(origin.calls[1].url?.path == "/row/2")
        // Running now: raising or lowering it again is only passed to the load.
        rows[2].priority = .veryLow
        rows[2].priority = .veryHigh
        origin.openGate()
        _ = try await first.value
        for row in rows { #expect(await row.outcome.isLoaded) }
        rows[0].priority = .veryHigh
        #expect(paths(origin) == ["/first", "/row/2", "/row/0", "/row/1"])
    }

    func paths(_ origin: ScriptedOrigin) -> [String] { origin.calls.map { $0.url!.path } }
}

@Suite("Prefetching", .timeLimit(.minutes(1)))
struct PrefetchTests {
    let base = "https://api.example.com"

    func url(_ path: String) -> URL { URL(string: "\(base)\(path)")! }

    @Test("a fresh stored entry is not fetched again, and keeps its place among the least recently used")
    func skipsFresh() async throws {
        let origin = echoOrigin()
        let transport = makeTransport(loader: origin)
        _ = try await transport.data(from: url("/a"))
        _ = try await transport.data(from: url("/b"))
        let prefetch = try transport.prefetch(URLRequest(url: url("/a")))
        #expect(await prefetch.outcome.isAlreadyStored)
        #expect(prefetch.isFinished)
        #expect(origin.callCount == 2)
        #expect(transport.snapshot().entries.map(\.url.path) == ["/b", "/a"])
        #expect(transport.statistics.requests == 2)
    }

    @Test("a prefetch joins a screen's fetch in flight, and a screen joins a prefetch's: one request")
    func joinsBothWays() async throws {
        let origin = echoOrigin(gated: true)
        let transport = makeTransport(loader: origin)
        let screen = Task { try await transport.data(from: url("/a")).0.text }
        await origin.waitForCalls(1)
        let prefetch = try transport.prefetch(URLRequest(url: url("/a")))
        await transport.waitForCoalescedJoins(1)
        let rowPrefetch = try transport.prefetch(URLRequest(url: url("/b")))
        await origin.waitForCalls(2)
        let rowScreen = Task { try await transport.data(from: url("/b")).0.text }
        await transport.waitForCoalescedJoins(2)
        origin.openGate()
        _ = try await screen.value
        #expect(try await rowScreen.value.contains("/b"))
        #expect(await prefetch.outcome.isLoaded)
        #expect(await rowPrefetch.outcome.isLoaded)
        #expect(origin.callCount == 2)
        // Both stored: later screens read memory.
        _ = try await transport.data(from: url("/a"))
        _ = try await transport.data(from: url("/b"))
        #expect(origin.callCount == 2)
    }

    @Test("cancelling a prefetch that a screen shares leaves the screen's fetch running")
    func cancelSharedPrefetch() async throws {
        let origin = echoOrigin(gated: true)
        let transport = makeTransport(loader: origin)
        let prefetch = try transport.prefetch(URLRequest(url: url("/a")))
        await origin.waitForCalls(1)
        let screen = Task { try await transport.data(from: url("/a")).0.text }
        await transport.waitForCoalescedJoins(1)
        prefetch.cancel()
        #expect(await prefetch.outcome.isCancelled)
        origin.openGate()
        #expect(try await screen.value.contains("/a"))
        #expect(origin.cancelledCalls == 0)
    }

    @Test("cancelling a prefetch alone cancels its fetch; twice, or after it ended, changes nothing")
    func cancelAloneTwiceAndLate() async throws {
        let origin = echoOrigin(gated: true)
        let transport = makeTransport(loader: origin)
        let prefetch = try transport.prefetch(URLRequest(url: url("/a")))
        await origin.waitForCalls(1)
        prefetch.cancel()
        prefetch.cancel()
        #expect(await prefetch.outcome.isCancelled)
        await origin.waitForCancelledCalls(1)
        origin.openGate()
        let done = try transport.prefetch(URLRequest(url: url("/b")))
        #expect(await done.outcome.isLoaded)
        done.cancel()
        #expect(await done.outcome.isLoaded)
        _ = try await transport.data(from: url("/b"))
        #expect(origin.callCount(for: url("/b")) == 1)
    }

    @Test("prefetching the same URL 1,000 times sends one request")
    func sameURLManyTimes() async throws {
        let origin = echoOrigin(gated: true)
        let transport = makeTransport(loader: origin)
        let prefetches = try (0..<1000).map { _ in try transport.prefetch(URLRequest(url: url("/a"))) }
        await origin.waitForCalls(1)
        origin.openGate()
        for prefetch in prefetches { #expect(await prefetch.outcome.isLoaded) }
        #expect(origin.callCount == 1)
        let again = try transport.prefetch(URLRequest(url: url("/a")))
        #expect(await again.outcome.isAlreadyStored)
    }

    @Test("a request the transport never stores, or may not load, is refused and nothing is sent")
    func badInput() async throws {
        let origin = echoOrigin()
        let transport = makeTransport(loader: origin)
        #expect(throws: PrefetchError.neverStored(.unsafeMethod)) {
            try transport.prefetch(request("\(base)/comments", method: "POST"))
        }
        #expect(throws: PrefetchError.neverStored(.notHTTP)) {
            try transport.prefetch(URLRequest(url: URL(string: "ftp://example.com/file")!))
        }
        #expect(throws: PrefetchError.neverStored(.requestConditions)) {
            try transport.prefetch(request("\(base)/a", headers: ["If-None-Match": "\"x\""]))
        }
        #expect(throws: PrefetchError.neverStored(.requestNoStore)) {
            try transport.prefetch(request("\(base)/a", headers: ["Cache-Control": "no-store"]))
        }
        #expect(throws: PrefetchError.cacheOnly) {
            try transport.prefetch(request("\(base)/a", policy: .returnCacheDataDontLoad))
        }
        var noURL = URLRequest(url: url("/a"))
        noURL.url = nil
        #expect(throws: URLError.self) { try transport.prefetch(noURL) }
        #expect(origin.callCount == 0)
        #expect(transport.statistics.requests == 0)
    }

    @Test("a failing origin ends the prefetch with its error")
    func failure() async throws {
        let origin = ScriptedOrigin(respond: ScriptedOrigin.failing(.cannotConnectToHost))
        let transport = makeTransport(loader: origin)
        let prefetch = try transport.prefetch(URLRequest(url: url("/a")))
        guard case .failed(let error as URLError) = await prefetch.outcome else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.code == .cannotConnectToHost)
    }

    @Test("a prefetched entry is read by a later screen from memory", arguments: IdentityConfiguration.allCases)
    func prefetchedIsRead(identity: IdentityConfiguration) async throws {
        let origin = authenticatingOrigin(accepting: Locked(["-", "Bearer me-1"]))
        let (transport, _) = identity.transport(origin)
        let plain = identity.request("\(base)/feed")
        let prefetch = try transport.prefetch(plain)
        #expect(await prefetch.outcome.isLoaded)
        let (_, _, outcome) = try await transport.response(for: plain)
        #expect(outcome.isFromMemory)
        #expect(origin.callCount == 1)
        let again = try transport.prefetch(plain)
        #expect(await again.outcome.isAlreadyStored)
    }

    @Test(
        "a prefetch joins a screen's fetch in flight in every identity configuration",
        arguments: IdentityConfiguration.allCases)
    func joinsInEveryIdentity(identity: IdentityConfiguration) async throws {
        let origin = authenticatingOrigin(accepting: Locked(["-", "Bearer me-1"]), gated: true)
        let (transport, _) = identity.transport(origin)
        let plain = identity.request("\(base)/feed")
        let screen = Task { try await transport.data(for: plain) }
        await origin.waitForCalls(1)
        let prefetch = try transport.prefetch(plain)
        await transport.waitForCoalescedJoins(1)
        origin.openGate()
        _ = try await screen.value
        #expect(await prefetch.outcome.isLoaded)
        #expect(origin.callCount == 1)
    }
}

@Suite("A prefetch meets the other calls", .timeLimit(.minutes(1)))
struct PrefetchMeetsOtherCallsTests {
    let base = "https://api.example.com"

    func url(_ path: String) -> URL { URL(string: "\(base)\(path)")! }

    func waitForWaiting(_ count: Int, in transport: CachedTransport) async {
        while transport.queue.counts(for: url("/")).waiting < count { await Task.yield() }
    }

    @Test(
        "signing out a partition ends its prefetch waiting in the queue: failed, never sent",
        arguments: [IdentityConfiguration.partitions, .accounts])
    func signOutEndsQueuedPrefetch(identity: IdentityConfiguration) async throws {
        let origin = authenticatingOrigin(accepting: Locked(["-", "Bearer me-1"]), gated: true)
        let (transport, _) = identity.transport(origin) { $0.network.maximumFetchesPerHost = 1 }
        let first = Task { try await transport.data(for: identity.request("\(base)/first")) }
        await origin.waitForCalls(1)
        let prefetch = try transport.prefetch(identity.request("\(base)/row"))
        await waitForWaiting(1, in: transport)
        transport.signOut(partition: "me")
        guard case .failed(let error) = await prefetch.outcome else {
            Issue.record("the prefetch did not fail")
            return
        }
        #expect(error is AuthenticationError)
        origin.openGate()
        _ = try? await first.value
        #expect(origin.callCount(for: url("/row")) == 0)
        #expect(transport.queue.counts(for: url("/")) == (running: 0, waiting: 0))
    }

    @Test(
        "an invalidation while a prefetch is in flight: it still ends, its answer is not stored",
        arguments: IdentityConfiguration.allCases)
    func invalidatedInFlight(identity: IdentityConfiguration) async throws {
        let origin = authenticatingOrigin(accepting: Locked(["-", "Bearer me-1"]), gated: true)
        let (transport, _) = identity.transport(origin)
        let prefetch = try transport.prefetch(identity.request("\(base)/row"))
        await origin.waitForCalls(1)
        transport.invalidate(.pathPrefix("/row"))
        origin.openGate()
        #expect(await prefetch.outcome.isLoaded)
        #expect(transport.statistics.entries == 0)
        _ = try await transport.data(for: identity.request("\(base)/row"))
        #expect(origin.callCount == 2)
    }

    @Test(
        "invalidate(request) drops what a prefetch stored, and cachedValue reads it",
        arguments: IdentityConfiguration.allCases)
    func prefetchedEntryIsTheScreensKey(identity: IdentityConfiguration) async throws {
        let origin = authenticatingOrigin(accepting: Locked(["-", "Bearer me-1"]))
        let (transport, _) = identity.transport(origin)
        let plain = identity.request("\(base)/row")
        #expect(await (try transport.prefetch(plain)).outcome.isLoaded)
        #expect(try transport.cachedValue(String.self, for: plain, decoder: TextDecoder()) != nil)
        transport.invalidate(plain)
        #expect(transport.statistics.entries == 0)
        #expect(await (try transport.prefetch(plain)).outcome.isLoaded)
        #expect(origin.callCount == 2)
    }
}

@Suite("Prefetched answers do not evict what screens read")
struct ProbationTests {
    let base = "https://api.example.com"

    func url(_ path: String) -> URL { URL(string: "\(base)\(path)")! }

    /// 1 KB bodies in a store of about ten of them.
    func transport(_ origin: ScriptedOrigin) -> CachedTransport {
        makeTransport(loader: origin) { configuration in
            configuration.storage.memoryCapacity = 12 * 1024
            configuration.storage.maximumEntryShare = 0.2
        }
    }

    @Test("after prefetching ten times the budget, every entry screens read still hits")
    func screensKeepHitting() async throws {
        let origin = ScriptedOrigin(respond: ScriptedOrigin.body(size: 1024))
        let transport = transport(origin)
        for index in 0..<5 { _ = try await transport.data(from: url("/read/\(index)")) }
        for index in 0..<100 {
            #expect(await (try transport.prefetch(URLRequest(url: url("/prefetched/\(index)")))).outcome.isLoaded)
        }
        for index in 0..<5 {
            let (_, _, outcome) = try await transport.response(for: URLRequest(url: url("/read/\(index)")))
            #expect(outcome.isFromMemory)
        }
        #expect(origin.callCount == 105)
        // The newest prefetches are held, within their share.
        let (_, _, newest) = try await transport.response(for: URLRequest(url: url("/prefetched/99")))
        #expect(newest.isFromMemory)
    }

    @Test("room for a screen's answer is made from unread prefetches first, before older entries screens read")
    func unreadGoFirst() async throws {
        let origin = ScriptedOrigin(respond: ScriptedOrigin.body(size: 1024))
        let transport = transport(origin)
        _ = try await transport.data(from: url("/read/0"))
        #expect(await (try transport.prefetch(URLRequest(url: url("/prefetched")))).outcome.isLoaded)
        var index = 1
        while transport.statistics.evictions == 0 {
            _ = try await transport.data(from: url("/read/\(index)"))
            index += 1
        }
        let held = Set(transport.snapshot().entries.map(\.url.path))
        #expect(!held.contains("/prefetched"))
        #expect(held.contains("/read/0"))
    }

    @Test("a screen reading a prefetched entry makes it an ordinary entry")
    func readPromotes() async throws {
        let origin = ScriptedOrigin(respond: ScriptedOrigin.body(size: 1024))
        let transport = transport(origin)
        #expect(await (try transport.prefetch(URLRequest(url: url("/row")))).outcome.isLoaded)
        _ = try await transport.data(from: url("/row"))
        for index in 0..<100 {
            _ = await (try transport.prefetch(URLRequest(url: url("/prefetched/\(index)")))).outcome
        }
        let (_, _, outcome) = try await transport.response(for: URLRequest(url: url("/row")))
        #expect(outcome.isFromMemory)
        #expect(origin.callCount(for: url("/row")) == 1)
    }
}

@Suite("The recency lists: used values, and values on probation")
struct LeastRecentlyUsedProbationTests {
    @Test("values on probation are evicted first, oldest first; a use moves one to the used list")
    func evictionOrder() {
        var lru = LeastRecentlyUsed<String, Int>(capacity: 4)
        lru.setValue(1, forKey: "used-old", cost: 1)
        lru.setValue(2, forKey: "used-new", cost: 1)
        lru.setValue(3, forKey: "probation-old", cost: 1, onProbation: true)
        lru.setValue(4, forKey: "probation-new", cost: 1, onProbation: true)
        #expect(lru.probationCost == 2)
        let found = lru.find("probation-new")
        #expect(found?.value == 4)
        if let found { lru.markUsed(at: found.position) }
        #expect(!lru.isOnProbation("probation-new"))
        #expect(lru.probationCost == 1)
        let evicted = lru.setValue(5, forKey: "used-newest", cost: 2).evicted.map(\.key)
        #expect(evicted == ["probation-old", "used-old"])
        var order: [String] = []
        lru.forEachEntry { key, _ in order.append(key) }
        #expect(order == ["used-newest", "probation-new", "used-new"])
    }

    @Test("a value on probation takes used values' room only within the limit, and never evicts itself")
    func probationLimit() {
        var lru = LeastRecentlyUsed<String, Int>(capacity: 4, probationLimit: 2)
        for index in 0..<4 { lru.setValue(index, forKey: "used-\(index)", cost: 1) }
        let first = lru.setValue(10, forKey: "p1", cost: 1, onProbation: true).evicted.map(\.key)
        #expect(first == ["used-0"])
        let second = lru.setValue(11, forKey: "p2", cost: 1, onProbation: true).evicted.map(\.key)
        #expect(second == ["used-1"])
        let third = lru.setValue(12, forKey: "p3", cost: 2, onProbation: true).evicted.map(\.key)
        #expect(third == ["p1", "p2"])
        #expect(lru.totalCost == 4)
        #expect(lru.probationCost == 2)
        #expect(lru.setValue(13, forKey: "too-large", cost: 3, onProbation: true).evicted.isEmpty)
        #expect(lru.peekValue(forKey: "too-large") == nil)
        let trimmed = lru.removeLeastRecentlyUsed(atMost: 2).map(\.key)
        #expect(trimmed == ["p3", "used-2"])
    }

    @Test("with room to spare, values on probation are not limited")
    func probationFillsFreeRoom() {
        var lru = LeastRecentlyUsed<String, Int>(capacity: 10, probationLimit: 2)
        lru.setValue(0, forKey: "used", cost: 1)
        for index in 0..<9 {
            #expect(lru.setValue(index, forKey: "p\(index)", cost: 1, onProbation: true).evicted.isEmpty)
        }
        #expect(lru.probationCost == 9)
        // Full: the next one on probation makes room from the oldest on probation, not from the used value.
        #expect(lru.setValue(9, forKey: "p9", cost: 1, onProbation: true).evicted.map(\.key) == ["p0"])
        #expect(lru.peekValue(forKey: "used") == 0)
    }
}

extension Prefetch.Outcome {
    var isLoaded: Bool { if case .loaded = self { true } else { false } }
    var isCancelled: Bool { if case .cancelled = self { true } else { false } }
    var isAlreadyStored: Bool { if case .alreadyStored = self { true } else { false } }
}
