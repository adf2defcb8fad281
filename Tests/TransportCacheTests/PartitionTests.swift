import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Partitions and sign-out")
struct PartitionTests {
    let base = "https://api.example.com"

    /// The credentials' tokens name their account (``TokenAuthenticator``), which is their
    /// partition; queries go to `/search`.
    static func partitioned(_ authenticator: TokenAuthenticator = TokenAuthenticator(), token: String)
        -> Credentials<TokenAuthenticator>
    {
        Credentials(authenticator, credential: token, partition: { TokenAuthenticator.account(of: $0) })
    }

    func transport(
        _ origin: ScriptedOrigin, credentials: Credentials<TokenAuthenticator> = partitioned(token: "alice-1")
    ) -> CachedTransport {
        makeTransport(loader: origin) { configuration in
            configuration.identity.authenticate(with: credentials)
            configuration.network.queryEndpoints = [.pathPrefix("/search")]
            configuration.stayingCurrent.minimumRevalidationInterval = .zero
        }
    }

    func get(_ path: String) -> URLRequest {
        request("\(base)\(path)")
    }

    @Test("a new token of the same account keeps every entry: the partition, not the token, is in the key")
    func tokenRefreshKeepsEntries() async throws {
        let accepted = Locked<Set<String>>(["Bearer me-1"])
        let origin = authenticatingOrigin(accepting: accepted)
        let authenticator = TokenAuthenticator()
        let transport = transport(origin, credentials: Self.partitioned(authenticator, token: "me-1"))
        let first = try await transport.data(from: URL(string: "\(base)/feed")!).0
        // The origin now wants the next token: the next request the transport sends is refused.
        accepted.withLock { $0 = ["Bearer me-2"] }
        _ = try await transport.data(from: URL(string: "\(base)/other")!)
        #expect(authenticator.refreshes == 1)
        let again = try await transport.data(from: URL(string: "\(base)/feed")!).0
        #expect(again == first)
        #expect(origin.callCount(for: "\(base)/feed") == 1)
        #expect(transport.statistics.memoryHits == 1)
    }

    @Test("two partitions never share an entry, a fetch in flight, a query's answer or a decoded value")
    func partitionsShareNothing() async throws {
        let origin = ScriptedOrigin(
            gated: true, respond: ScriptedOrigin.ok(headers: ["Content-Type": "application/json"]))
        let credentials = Self.partitioned(token: "alice-1")
        let transport = transport(origin, credentials: credentials)
        // The same plain request, two accounts: only the partition tells them apart.
        let alice = Task { try await transport.data(for: get("/feed")).0 }
        await origin.waitForCalls(1)
        credentials.credential = "bob-1"
        let bob = Task { try await transport.data(for: get("/feed")).0 }
        await origin.waitForCalls(2)
        #expect(transport.statistics.coalescedJoins == 0)
        origin.openGate()
        #expect(try await alice.value != bob.value)

        var query = get("/search")
        query.httpMethod = "POST"
        query.httpBody = Data("q=1".utf8)
        credentials.credential = "alice-1"
        _ = try await transport.data(for: query)
        credentials.credential = "bob-1"
        _ = try await transport.data(for: query)
        #expect(origin.callCount(for: "\(base)/search", method: "POST") == 2)

        let decodesBefore = transport.statistics.decodes
        credentials.credential = "alice-1"
        _ = try? await transport.value(String.self, for: get("/feed"))
        credentials.credential = "bob-1"
        _ = try? await transport.value(String.self, for: get("/feed"))
        #expect(transport.statistics.decodes - decodesBefore == 2)
        #expect(origin.callCount(for: "\(base)/feed") == 2)
    }

    @Test(
        "signing a partition out drops its entries, tags and updates, fails its fetches in flight, and leaves the others"
    )
    func signOutLeavesNothing() async throws {
        let origin = ScriptedOrigin(respond: ScriptedOrigin.ok(), holding: { $0.url!.path == "/held" })
        let credentials = Self.partitioned(token: "alice-1")
        let transport = transport(origin, credentials: credentials)
        _ = try await transport.data(for: get("/feed"), tags: ["mine"])
        _ = try await transport.data(for: get("/profile"))
        credentials.credential = "bob-1"
        _ = try await transport.data(for: get("/feed"))
        credentials.credential = "alice-1"

        // An optimistic update of alice's, pending, and a fetch of hers held at the origin.
        let written = Gate()
        let update = Task {
            try await transport.optimisticUpdate(
                [ProvisionalAnswer(for: get("/profile"), data: Data("provisional".utf8))],
                write: { try await written.wait() })
        }
        await written.waitForArrivals(1)
        let changes = transport.changes()
        var iterator = changes.makeAsyncIterator()
        origin.closeGate()
        let held = Task { try await transport.data(for: get("/held")) }
        await origin.waitForCalls(4)

        credentials.credential = "bob-1"
        transport.signOut(partition: "alice")
        await #expect {
            try await held.value
        } throws: { ($0 as? AuthenticationError)?.code == .signedOut }
        #expect(transport.snapshot().entries.map(\.url.path) == ["/feed"])
        #expect(transport.statistics.entries == 1)
        #expect(transport.invalidate(tag: "mine") == 0)
        #expect(transport.pendingWork.fetches == 0)
        let change = await iterator.next()
        #expect(
            change
                == .invalidated(urls: [URL(string: "\(base)/feed")!, URL(string: "\(base)/profile")!], endpoint: nil))

        written.open()
        try await update.value
        origin.openGate()
        // Nothing of alice's comes back: neither the provisional answer nor the held fetch's.
        #expect(transport.snapshot().entries.map(\.url.path) == ["/feed"])
        #expect(try await transport.data(for: get("/feed")).0.text.contains("call=3"))
        // A second sign-out finds nothing and announces nothing.
        transport.signOut(partition: "alice")
        transport.invalidate(get("/feed"))
        #expect(await iterator.next() == .invalidated(urls: [URL(string: "\(base)/feed")!], endpoint: nil))
    }

    /// A transport of `origin` holding `count` entries of alice's, `/items/0` and on, whose
    /// current credential is then bob's.
    func transport(holdingAlices count: Int, of origin: ScriptedOrigin) async throws -> CachedTransport {
        let credentials = Self.partitioned(token: "alice-1")
        let transport = transport(origin, credentials: credentials)
        let base = base
        try await onAThreadOfItsOwn {
            for index in 0..<count {
                let answer = ProvisionalAnswer(for: request("\(base)/items/\(index)"), data: Data("\(index)".utf8))
                try transport.store(answer)
            }
        }
        credentials.credential = "bob-1"
        return transport
    }

    @Test("a sign-out cuts off the account's fetches at once, even while an invalidation runs")
    func signOutDuringInvalidation() async throws {
        let origin = ScriptedOrigin(gated: true, respond: ScriptedOrigin.ok())
        let count = ResponseStore.stepSize * 4_000
        let transport = try await transport(holdingAlices: count, of: origin)
        let bob = Task { try await transport.data(for: request("https://other.example.com/feed")) }
        await origin.waitForCalls(1)
        // An invalidation under way, held as long as the test needs: the lock it holds throughout.
        let released = Locked(false)
        let release = await holdingInvalidations(of: transport, released: released)
        let signedOut = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            transport.signOut(partition: "bob")
            signedOut.signal()
        }
        // The account's fetch leaves the fetches in flight while the invalidation is under way:
        // it can no longer store or answer, whatever its origin says meanwhile. (The deadline
        // only ends a failing run.)
        let deadline = ContinuousClock.now + .seconds(30)
        while transport.pendingWork.fetches > 0, ContinuousClock.now < deadline { await Task.yield() }
        #expect(transport.pendingWork.fetches == 0)
        #expect(released.withLock { $0 } == false)
        // A large invalidation races the rest of the sign-out; both leave the store and its index
        // agreeing on nothing held.
        let invalidated = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            transport.invalidate(.host("api.example.com"))
            invalidated.signal()
        }
        release.signal()
        origin.openGate()
        await #expect {
            try await bob.value
        } throws: { ($0 as? AuthenticationError)?.code == .signedOut }
        try await onAThreadOfItsOwn {
            signedOut.wait()
            invalidated.wait()
        }
        #expect(transport.statistics.entries == 0)
        #expect(transport.store.index.withLock { $0.count } == 0)
    }

    @Test("a partition switched back to while its sign-out is still removing its entries is never answered them")
    func switchBackDuringSignOut() async throws {
        let origin = ScriptedOrigin(respond: ScriptedOrigin.ok())
        let credentials = Self.partitioned(token: "alice-1")
        let transport = transport(origin, credentials: credentials)
        #expect(try await transport.data(for: get("/feed")).0.text.contains("call=1"))
        // An invalidation under way, held as long as the test needs: the sign-out's removal of
        // alice's entries waits behind it.
        let release = await holdingInvalidations(of: transport)
        let signedOut = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            credentials.credential = "bob-1"
            transport.signOut(partition: "alice")
            signedOut.signal()
        }
        // The sign-out has begun; alice's entry is still held.
        let deadline = ContinuousClock.now + .seconds(30)
        while transport.store.state.withLock({ $0.departing.isEmpty }), ContinuousClock.now < deadline {
            await Task.yield()
        }
        #expect(transport.statistics.entries == 1)
        credentials.credential = "alice-2"
        // Alice's again: what she held before is neither answered nor read from memory.
        #expect(try transport.cachedValue(String.self, for: get("/feed")) == nil)
        #expect(try await transport.data(for: get("/feed")).0.text.contains("auth=Bearer alice-2 call=2"))
        release.signal()
        signedOut.wait()
    }

    @Test("a sign-out of a large partition lets the in-flight lock in between its steps, and leaves the others")
    func signOutInSteps() async throws {
        let count = ResponseStore.stepSize * 2_000
        let transport = try await transport(holdingAlices: count, of: ScriptedOrigin(respond: ScriptedOrigin.ok()))
        try transport.store(ProvisionalAnswer(for: get("/items/0"), data: Data("bob".utf8)))
        let inFlight = await transport.inFlight
        let held: @Sendable () -> Int = { transport.store.state.withLock { $0.entries.count } }
        let (ended, observed, letIn) = (Locked(false), DispatchSemaphore(value: 0), Locked(0))
        // On a thread of its own: once entries leave, the removal is under way, and the in-flight
        // lock, which a join and a fetch's completion take, is let in before it ends, while
        // entries of the account are still held.
        Thread.detachNewThread {
            while held() == count + 1 { usleep(20) }
            while !ended.withLock({ $0 }) {
                if inFlight.withLock({ _ in held() }) > 1 { letIn.withLock { $0 += 1 } }
            }
            observed.signal()
        }
        try await onAThreadOfItsOwn {
            transport.signOut(partition: "alice")
            ended.withLock { $0 = true }
            observed.wait()
        }
        #expect(letIn.withLock { $0 } > 0)
        #expect(transport.statistics.entries == 1)
        #expect(try await transport.data(for: get("/items/0")).0 == Data("bob".utf8))
        #expect(transport.store.index.withLock { $0.count } == 1)
    }

    @Test("a revalidation in a partition goes out with today's credential")
    func revalidationCarriesTodaysCredential() async throws {
        let accepted = Locked<Set<String>>(["Bearer me-1", "Bearer me-2"])
        let origin = authenticatingOrigin(accepting: accepted)
        let credentials = Self.partitioned(token: "me-1")
        let transport = transport(origin, credentials: credentials)
        _ = try await transport.data(from: URL(string: "\(base)/feed")!)
        credentials.credential = "me-2"
        let summary = await transport.revalidateAll()
        #expect(summary.revalidated == 1 && summary.failed == 0)
        #expect(origin.calls.map { $0.value(forHTTPHeaderField: "Authorization") } == ["Bearer me-1", "Bearer me-2"])
    }

    @Test("without partitions, a revalidation that would go out as another identity is not sent")
    func revalidationNeverChangesIdentity() async throws {
        let accepted = Locked<Set<String>>(["Bearer alice-1", "Bearer bob-1"])
        let origin = authenticatingOrigin(accepting: accepted)
        let credentials = Credentials(TokenAuthenticator(), credential: "alice-1")
        let transport = makeTransport(loader: origin) { configuration in
            configuration.identity.authenticate(with: credentials)
            configuration.stayingCurrent.minimumRevalidationInterval = .zero
        }
        _ = try await transport.data(from: URL(string: "\(base)/feed")!)
        credentials.credential = "bob-1"
        let summary = await transport.revalidateAll()
        #expect(summary.revalidated == 1 && summary.failed == 1)
        #expect(origin.callCount == 1)
    }

    @Test("signing out while the partition's refresh runs fails its callers at once; the refresh's result is not kept")
    func signOutDuringRefresh() async throws {
        let origin = authenticatingOrigin(accepting: Locked([]))
        let gate = Gate()
        let authenticator = TokenAuthenticator { _, _ in
            try await gate.wait()
            return "alice-2"
        }
        let credentials = Self.partitioned(authenticator, token: "alice-1")
        let transport = transport(origin, credentials: credentials)
        let caller = Task { try await transport.data(from: URL(string: "\(self.base)/feed")!) }
        await gate.waitForArrivals(1)
        transport.signOut(partition: "alice")
        await #expect {
            try await caller.value
        } throws: { ($0 as? AuthenticationError)?.code == .signedOut }
        gate.open()
        // The signed-out account's refresh ended on its own, and nothing of it is sent again.
        await #expect {
            try await transport.data(from: URL(string: "\(self.base)/after")!)
        } throws: { ($0 as? AuthenticationError)?.code == .signedOut }
        #expect(gate.cancelled == 0)
        #expect(transport.statistics.entries == 0)
        #expect(!origin.calls.contains { $0.url!.path == "/after" })
    }

    @Test("signed out before its credential is set to nil, the account is neither written nor read")
    func signOutBeforeTheCredential() async throws {
        let origin = authenticatingOrigin(accepting: Locked(["Bearer alice-1", "-"]))
        let credentials = Self.partitioned(token: "alice-1")
        let transport = transport(origin, credentials: credentials)
        let feed = URLRequest(url: URL(string: "\(base)/feed")!)
        transport.signOut(partition: "alice")
        #expect {
            try transport.store(ProvisionalAnswer(for: feed, data: Data("written".utf8)))
        } throws: { ($0 as? AuthenticationError)?.code == .signedOut }
        await #expect {
            try await transport.data(for: feed)
        } throws: { ($0 as? AuthenticationError)?.code == .signedOut }
        #expect(transport.statistics.entries == 0)
        #expect(origin.callCount == 0)
        credentials.credential = nil
        // Signed out on both counts: requests go out with no credential, in no account.
        _ = try await transport.data(for: feed)
        #expect(origin.calls.last?.value(forHTTPHeaderField: "Authorization") == nil)
    }

    @Test("a sign-out during an optimistic update's refetch leaves none of its answers stored")
    func signOutDuringAnUpdatesRefetch() async throws {
        let origin = ScriptedOrigin(respond: ScriptedOrigin.ok(), holding: { $0.url!.path == "/profile" })
        let transport = transport(origin)
        _ = try await transport.data(for: get("/profile"))
        origin.closeGate()
        let update = Task {
            try await transport.optimisticUpdate(
                [ProvisionalAnswer(for: get("/profile"), data: Data("provisional".utf8))],
                write: { "saved" },
                confirmed: { _ in [ProvisionalAnswer(for: get("/settings"), data: Data("s".utf8))] })
        }
        // The update's refetch of its key is held at the origin.
        await origin.waitForCalls(2)
        transport.signOut(partition: "alice")
        #expect(try await update.value == "saved")
        origin.openGate()
        #expect(transport.snapshot().entries.isEmpty)
    }
}
