import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache
import TransportCacheTesting

@Suite("Credentials, partitions and sign-out against a real origin")
struct AuthenticationEndToEndTests {
    /// `account` signed in with `token` on a new transport keyed by account, whose credentials
    /// come from the origin's token endpoint at `tokenPath` (with any of its parameters).
    static func signedIn(
        on origin: LoopbackOrigin, tokenPath: String = "/token", as account: String = "me", token: String = "old",
        limit: RefreshLimit = RefreshLimit()
    ) -> (tokens: OriginTokens, credentials: Credentials<OriginTokens>, transport: CachedTransport) {
        let tokens = OriginTokens(tokenURL: origin.url(tokenPath))
        let credentials = Credentials(
            tokens, credential: OriginAccount(name: account, token: token), limit: limit, partition: { $0.name })
        var configuration = CachedTransport.Configuration()
        configuration.identity.authenticate(with: credentials)
        // Room for twenty requests held at the origin at once (six per host by default).
        let session = URLSessionConfiguration.ephemeral
        session.httpMaximumConnectionsPerHost = 32
        let transport = CachedTransport(configuration: configuration, sessionConfiguration: session)
        tokens.use(transport)
        return (tokens, credentials, transport)
    }

    @Test("twenty screens refused at once: one refresh, twenty resends, twenty answers, the entries kept through it")
    func twentyRefusalsOneRefresh() async throws {
        try await withOrigin { origin async throws in
            let (tokens, _, transport) = Self.signedIn(on: origin, token: "t0")
            let kept = origin.url("/kept?token=1&stable=1")
            let before = try await transport.data(from: kept).0
            await origin.expireToken()
            await origin.closeGate()
            let screens = (0..<20).map { index in
                Task { try await transport.data(from: origin.url("/screen/\(index)?token=1&gate=1")).0.text }
            }
            for index in 0..<20 { await origin.waitForHits("/screen/\(index)?token=1&gate=1", count: 1) }
            await origin.openGate()
            // The origin's token after the one that expired.
            for screen in screens { #expect(try await screen.value.contains("auth=Bearer t2")) }
            #expect(tokens.refreshes == 1)
            #expect(await origin.hits(path: "/token") == 1)
            for index in 0..<20 { #expect(await origin.hits("/screen/\(index)?token=1&gate=1") == 2) }
            #expect(await origin.lastRequestHeader("Authorization", for: "/token") == nil)
            // The token changed; the account did not: what it held is still answered from memory.
            #expect(try await transport.data(from: kept).0 == before)
            #expect(await origin.hits("/kept?token=1&stable=1") == 1)
        }
    }

    @available(macOS 26.0, *)
    @Test("the callers of one shared fetch share its resend; a credential replaced meanwhile is used without a refresh")
    func sharedResendAndReplacedCredential() async throws {
        try await withOrigin { origin async throws in
            let (tokens, credentials, transport) = Self.signedIn(on: origin)
            let shared = "/shared?token=1&gate=1"
            let callers = await startHeldCallers(5, of: shared, on: transport, origin: origin)
            // The app signs in again meanwhile: the refused fetch is resent with that credential.
            credentials.credential = OriginAccount(name: "me", token: "t0")
            await origin.openGate()
            for caller in callers { #expect(try await caller.value.0.text.contains("auth=Bearer t0")) }
            #expect(await origin.hits(shared) == 2)
            #expect(tokens.refreshes == 0)
        }
    }

    @Test("a request made during the refresh waits for it and goes out once, with the new token")
    func requestsWaitForTheRefresh() async throws {
        try await withOrigin { origin async throws in
            let (_, _, transport) = Self.signedIn(on: origin, tokenPath: "/token?gate=1")
            await origin.closeGate()
            let refused = Task { try await transport.data(from: origin.url("/a?token=1")).0.text }
            await origin.waitForHits("/token?gate=1", count: 1)
            let later = Task { try await transport.data(from: origin.url("/b?token=1")).0.text }
            await origin.openGate()
            #expect(try await refused.value.contains("auth=Bearer t1"))
            #expect(try await later.value.contains("auth=Bearer t1"))
            #expect(await origin.hits("/b?token=1") == 1)
            #expect(await origin.hits("/a?token=1") == 2)
        }
    }

    @Test("a refresh refused with a 401 fails every waiting caller with its outcome; a later one retries")
    func failedRefresh() async throws {
        try await withOrigin { origin async throws in
            let (tokens, _, transport) = Self.signedIn(on: origin, tokenPath: "/token?status=401")
            await origin.closeGate()
            let callers = (0..<3).map { index in
                Task { try await transport.data(from: origin.url("/item/\(index)?token=1&gate=1")) }
            }
            for index in 0..<3 { await origin.waitForHits("/item/\(index)?token=1&gate=1", count: 1) }
            await origin.openGate()
            for caller in callers {
                await #expect {
                    try await caller.value
                } throws: { error in
                    let error = error as? AuthenticationError
                    return error?.code == .refreshFailed && error?.cacheOutcome?.source == .network(.noEntry)
                }
            }
            #expect(transport.snapshot().entries.isEmpty)
            #expect(tokens.refreshes == 1)
            tokens.setTokenURL(origin.url("/token"))
            #expect(try await transport.data(from: origin.url("/item/0?token=1")).0.text.contains("auth=Bearer t1"))
        }
    }

    @Test("an origin that refuses every new token ends in tooManyRefreshes, not a loop")
    func refreshLimit() async throws {
        try await withOrigin { origin async throws in
            let (_, _, transport) = Self.signedIn(
                on: origin, tokenPath: "/token?bogus=1",
                limit: RefreshLimit(maximumRefreshes: 1, window: .seconds(3600)))
            let (_, response) = try await transport.data(from: origin.url("/a?token=1"))
            #expect((response as? HTTPURLResponse)?.statusCode == 401)
            await #expect {
                try await transport.data(from: origin.url("/b?token=1"))
            } throws: { ($0 as? AuthenticationError)?.code == .tooManyRefreshes }
            #expect(await origin.hits(path: "/token") == 1)
            #expect(transport.statistics.entries == 0)
        }
    }

    @Test("when every caller waiting for a refresh leaves, each ends at once and the refresh runs to its end")
    func abandonedRefresh() async throws {
        try await withOrigin { origin async throws in
            let (tokens, credentials, transport) = Self.signedIn(on: origin, tokenPath: "/token?gate=1")
            await origin.closeGate()
            let caller = Task { try await transport.data(from: origin.url("/a?token=1")) }
            await origin.waitForHits("/token?gate=1", count: 1)
            caller.cancel()
            // The caller ends while the token request is still held at the origin.
            await #expect(throws: CancellationError.self) { try await caller.value }
            await origin.openGate()
            // The refresh was not cancelled: its token is the credential, and the next request uses it.
            let next = try await transport.data(from: origin.url("/b?token=1"))
            #expect((next.1 as? HTTPURLResponse)?.statusCode == 200)
            #expect(credentials.credential?.token == (await origin.currentToken))
            #expect(tokens.refreshes == 1)
            #expect(await origin.hits(path: "/token") == 1)
        }
    }

    @Test("two accounts never share an entry, a fetch in flight, a query's answer or a revalidation")
    func partitionsShareNothing() async throws {
        try await withOrigin { origin async throws in
            let tokens = OriginTokens(tokenURL: origin.url("/token"))
            let credentials = Credentials(
                tokens, credential: OriginAccount(name: "alice", token: "same"), partition: { $0.name })
            var configuration = CachedTransport.Configuration()
            configuration.identity.authenticate(with: credentials)
            configuration.network.queryEndpoints = [.pathPrefix("/search")]
            configuration.stayingCurrent.minimumRevalidationInterval = .zero
            let transport = CachedTransport(configuration: configuration)
            // The same plain request and the same token: only the account tells them apart.
            let feed = request(origin.url("/feed?gate=1"))
            await origin.closeGate()
            let alice = Task { try await transport.data(for: feed).0 }
            await origin.waitForHits("/feed?gate=1", count: 1)
            credentials.credential = OriginAccount(name: "bob", token: "same")
            let bob = Task { try await transport.data(for: feed).0 }
            await origin.waitForHits("/feed?gate=1", count: 2)
            #expect(transport.statistics.coalescedJoins == 0)
            await origin.openGate()
            #expect(try await alice.value != bob.value)

            for account in ["alice", "bob"] {
                credentials.credential = OriginAccount(name: account, token: "same")
                var query = request(origin.url("/search"), method: "POST")
                query.httpBody = Data("q=1".utf8)
                _ = try await transport.data(for: query)
            }
            #expect(await origin.hits("/search") == 2)
            #expect(Set(transport.snapshot().entries.compactMap(\.partition)) == ["alice", "bob"])
            // Bob is signed in: his entries are revalidated, alice's never go out with his token.
            let summary = await transport.revalidateAll()
            #expect(summary.revalidated == 4 && summary.failed == 2)
            #expect(await origin.hits("/feed?gate=1") == 3)
        }
    }

    @Test("signing an account out leaves nothing of it in memory or in flight; the next account sees none of it")
    func signOut() async throws {
        try await withOrigin { origin async throws in
            let (_, credentials, transport) = Self.signedIn(on: origin, as: "alice", token: "t0")
            _ = try await transport.data(for: request(origin.url("/feed?token=1")), tags: ["feed"])
            _ = try await transport.data(from: origin.url("/profile?token=1"))
            await origin.closeGate()
            let inFlight = Task { try await transport.data(from: origin.url("/messages?token=1&gate=1")) }
            await origin.waitForHits("/messages?token=1&gate=1", count: 1)

            credentials.credential = OriginAccount(name: "bob", token: await origin.currentToken)
            transport.signOut(partition: "alice")
            await #expect {
                try await inFlight.value
            } throws: { ($0 as? AuthenticationError)?.code == .signedOut }
            await origin.openGate()
            #expect(transport.snapshot().entries.isEmpty)
            #expect(transport.invalidate(tag: "feed") == 0)
            let bobsFeed = try await transport.data(from: origin.url("/feed?token=1")).0.text
            #expect(bobsFeed.contains("auth=Bearer t0"))
            #expect(await origin.hits("/feed?token=1") == 2)
            #expect(transport.snapshot().entries.count == 1)
        }
    }
}
