import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

/// The identity configurations a screen's plain request (a URL, no `Authorization`) meets.
enum IdentityConfiguration: String, CaseIterable, CustomTestStringConvertible, Sendable {
    /// `accounts`: several accounts signed in at once, "me" (`me-1`) and "you" (`you-1`); the
    /// screen's requests name "me" (see ``request(_:method:)``).
    case none, adapter, authenticator, partitions, accounts

    var testDescription: String { rawValue }

    /// A transport over `origin` in this configuration, with the credentials it holds (`me-1`;
    /// nil for `accounts`, whose accounts the transport holds).
    func transport(
        _ origin: ScriptedOrigin, authenticator: TokenAuthenticator = TokenAuthenticator(),
        _ configure: (inout CachedTransport.Configuration) -> Void = { _ in }
    ) -> (CachedTransport, Credentials<TokenAuthenticator>?) {
        var credentials: Credentials<TokenAuthenticator>?
        var accounts: Accounts<TokenAuthenticator>?
        switch self {
        case .none, .adapter: break
        case .authenticator: credentials = Credentials(authenticator, credential: "me-1")
        case .partitions:
            credentials = Credentials(
                authenticator, credential: "me-1", partition: { TokenAuthenticator.account(of: $0) })
        case .accounts:
            accounts = Accounts(authenticator)
            // Two accounts, so that a request keyed or sent for the wrong one shows.
            try! accounts?.setCredential("me-1", for: "me")
            try! accounts?.setCredential("you-1", for: "you")
        }
        let transport = makeTransport(loader: origin) { configuration in
            if let credentials { configuration.identity.authenticate(with: credentials) }
            if let accounts { configuration.identity.authenticate(with: accounts) }
            if self == .adapter {
                configuration.identity.requestAdapters = [
                    .keyed { $0.setValue("de", forHTTPHeaderField: "Accept-Language") },
                    .header("X-Tenant") { _ in "acme" },
                    RequestAdapter { request in
                        var request = request
                        request.setValue("4.2", forHTTPHeaderField: "X-App-Version")
                        return request
                    },
                ]
            }
            configuration.network.queryEndpoints = [.pathPrefix("/search")]
            configure(&configuration)
        }
        return (transport, credentials)
    }

    /// A screen's plain request for `string` in this configuration: with several accounts signed
    /// in, a request must name its account, so it names "me"; otherwise the plain request.
    func request(_ string: String, method: String = "GET") -> URLRequest {
        var plain = TransportCacheTests.request(string, method: method)
        if self == .accounts { plain.account = "me" }
        return plain
    }
}

@Suite("One boundary: every call keys a screen's plain request as data(for:) does")
struct IdentityBoundaryTests {
    let base = "https://api.example.com"

    func origin() -> ScriptedOrigin {
        authenticatingOrigin(accepting: Locked(["-", "Bearer me-1", "Bearer me-2"]))
    }

    @Test("invalidate(request) drops the entry data(for:) stored", arguments: IdentityConfiguration.allCases)
    func invalidateByRequest(identity: IdentityConfiguration) async throws {
        let origin = origin()
        let (transport, _) = identity.transport(origin)
        let plain = identity.request("\(base)/feed")
        _ = try await transport.data(for: plain)
        transport.invalidate(plain)
        #expect(transport.statistics.entries == 0)
        _ = try await transport.data(for: plain)
        #expect(origin.callCount == 2)
    }

    @Test(
        "a URL spelled out of normal form shares its normal form's entry: fetched once, each request counted once, with why it missed",
        arguments: IdentityConfiguration.allCases)
    func spellingsShareTheEntry(identity: IdentityConfiguration) async throws {
        let origin = origin()
        let (transport, _) = identity.transport(origin)
        let (_, first) = try await transport.data(for: identity.request("HTTPS://API.Example.com:443/feed#top"))
        #expect(first.cacheOutcome?.source == .network(.noEntry))
        let spellings = [
            "\(base)/feed", "HTTPS://API.Example.com/feed", "https://api.example.com:443/feed",
            "https://api.example.com/feed#top",
        ]
        for spelling in spellings {
            let (_, response) = try await transport.data(for: identity.request(spelling))
            #expect(response.cacheOutcome?.isFromMemory == true, "\(spelling)")
        }
        // A spelling found under its normal form only is looked up twice, and counted once.
        #expect(transport.statistics.requests == 1 + spellings.count)
        #expect(transport.statistics.memoryHits == spellings.count)
        #expect(origin.callCount == 1)
        transport.invalidate(identity.request("\(base)/feed"))
        let (_, again) = try await transport.data(for: identity.request("HTTPS://API.Example.com/feed"))
        #expect(again.cacheOutcome?.source == .network(.invalidated))
        #expect(transport.statistics.requests == 2 + spellings.count)
        #expect(origin.callCount == 2)
    }

    @Test("store(_:) writes the entry data(for:) reads, and no other", arguments: IdentityConfiguration.allCases)
    func storeIsRead(identity: IdentityConfiguration) async throws {
        let origin = origin()
        let (transport, _) = identity.transport(origin)
        let plain = identity.request("\(base)/feed")
        try transport.store(ProvisionalAnswer(for: plain, data: Data("stored".utf8)))
        #expect(try await transport.data(for: plain).0.text == "stored")
        #expect(origin.callCount == 0)
        #expect(transport.snapshot().entries.count == 1)
    }

    @Test("an optimistic update shows where data(for:) looks", arguments: IdentityConfiguration.allCases)
    func optimisticUpdateIsShown(identity: IdentityConfiguration) async throws {
        let origin = origin()
        let (transport, _) = identity.transport(origin)
        let plain = identity.request("\(base)/feed")
        _ = try await transport.data(for: plain)
        let written = Gate()
        let update = Task {
            try await transport.optimisticUpdate(
                [ProvisionalAnswer(for: plain, data: Data("provisional".utf8))], write: { try await written.wait() })
        }
        await written.waitForArrivals(1)
        #expect(try await transport.data(for: plain).0.text == "provisional")
        #expect(transport.snapshot().entries.count == 1)
        written.open()
        try await update.value
    }

    @Test("cachedValue finds what value(_:for:) fetched", arguments: IdentityConfiguration.allCases)
    func cachedValueAfterValue(identity: IdentityConfiguration) async throws {
        let origin = ScriptedOrigin { _, _ in ScriptedOrigin.Reply(text: "\"article\"") }
        let (transport, _) = identity.transport(origin)
        let plain = identity.request("\(base)/article")
        #expect(try await transport.value(String.self, for: plain) == "article")
        #expect(try transport.cachedValue(String.self, for: plain)?.value == "article")
        #expect(origin.callCount == 1)
    }

    @Test(
        "a read within the stale-while-revalidate window revalidates in the background as data(for:) keys and sends",
        arguments: IdentityConfiguration.allCases)
    func backgroundRevalidation(identity: IdentityConfiguration) async throws {
        let origin = origin()
        let clock = TestClock()
        let (transport, _) = identity.transport(origin) {
            $0.clock = clock.cacheClock
            $0.freshness.maximumAge = .seconds(60)
            $0.freshness.staleWhileRevalidate = .seconds(600)
        }
        let plain = identity.request("\(base)/feed")
        let first = try await transport.data(for: plain).0
        clock.advance(by: .seconds(120))
        let (stale, window) = try await transport.data(for: plain)
        #expect(stale == first && window.isRevalidatingAnswer)
        await origin.waitForDeliveredAnswers(2)
        // The revalidation's answer is stored where the screen's request finds it.
        let (revalidated, after) = try await transport.data(for: plain)
        #expect(revalidated.text.hasSuffix("call=2") && after.cacheOutcome?.isFromMemory == true)
        #expect(origin.callCount == 2)
        // And it went out as the screen's own fetch did: the same credential, the same adapted fields.
        let calls = origin.calls
        for name in ["Authorization", "Accept-Language", "X-Tenant", "X-App-Version"] {
            #expect(calls[1].value(forHTTPHeaderField: name) == calls[0].value(forHTTPHeaderField: name), "\(name)")
        }
        if identity != .none && identity != .adapter {
            #expect(calls[1].value(forHTTPHeaderField: "Authorization") == "Bearer me-1")
        }
    }

    @Test("refresh, tagged fetches and query POSTs share the key", arguments: IdentityConfiguration.allCases)
    func refreshTagsAndQueries(identity: IdentityConfiguration) async throws {
        let origin = origin()
        let (transport, _) = identity.transport(origin)
        let plain = identity.request("\(base)/feed")
        _ = try await transport.data(for: plain, tags: ["feed"])
        let refreshed = try await transport.refresh(plain).0
        #expect(try await transport.data(for: plain).0 == refreshed)
        #expect(origin.callCount == 2)
        #expect(transport.invalidate(tag: "feed") == 1)

        var query = identity.request("\(base)/search", method: "POST")
        query.httpBody = Data("q=1".utf8)
        _ = try await transport.data(for: query)
        _ = try await transport.data(for: query)
        #expect(origin.callCount(for: "\(base)/search", method: "POST") == 1)
    }

    @Test(
        "what the app stored is gone after signing out as the README shows: the next request goes to the origin",
        arguments: [IdentityConfiguration.authenticator, .partitions])
    func signOutLeavesNoStoredAnswer(identity: IdentityConfiguration) async throws {
        let origin = origin()
        let (transport, credentials) = identity.transport(origin)
        let plain = request("\(base)/inbox")
        try transport.store(ProvisionalAnswer(for: plain, data: Data("mine".utf8)))
        credentials?.credential = nil
        if identity == .partitions {
            transport.signOut(partition: "me")
            #expect(transport.snapshot().entries.isEmpty)
        }
        let answer = try await transport.data(for: plain).0.text
        #expect(answer.contains("auth=-"))
        #expect(origin.callCount == 1)
    }

    @Test("snapshot() shows each entry's partition")
    func snapshotShowsPartitions() async throws {
        let (transport, credentials) = IdentityConfiguration.partitions.transport(origin())
        _ = try await transport.data(for: request("\(base)/feed"))
        credentials?.credential = "you-1"
        try transport.store(ProvisionalAnswer(for: request("\(base)/feed"), data: Data("yours".utf8)))
        #expect(Set(transport.snapshot().entries.map(\.partition)) == ["me", "you"])
        #expect(transport.snapshot().description.contains("[you] https://api.example.com/feed"))
    }

    @Test(
        "a hit is answered while a token refresh runs: the key holds the account, not the token",
        arguments: [IdentityConfiguration.authenticator, .partitions])
    func hitDuringRefresh(identity: IdentityConfiguration) async throws {
        let accepted = Locked<Set<String>>(["Bearer me-1"])
        let origin = authenticatingOrigin(accepting: accepted)
        let refreshing = Gate()
        let authenticator = TokenAuthenticator(heldAt: refreshing) { _, refresh in "me-\(refresh + 1)" }
        let (transport, _) = identity.transport(origin, authenticator: authenticator)
        let kept = request("\(base)/kept")
        _ = try await transport.data(for: kept)
        accepted.withLock { $0 = ["Bearer me-2"] }
        let refused = Task { try await transport.data(for: request("\(self.base)/other")).0.text }
        await refreshing.waitForArrivals(1)
        #expect(try await transport.data(for: kept).0.text.contains("auth=Bearer me-1"))
        refreshing.open()
        #expect(try await refused.value.contains("auth=Bearer me-2"))
        // The refreshed token is the same account's: the entry is still read.
        _ = try await transport.data(for: kept)
        #expect(origin.callCount(for: "\(base)/kept") == 1)
    }
}
